// What a fit names but does not count: behaviours of TPU's compiler the fixtures measured
// (testdata/maxtext-tpu/fit_differences.json) that fit cannot predict from the config. Each is
// flagged wherever it may apply, so that every place a verdict is shown (fit's report and JSON,
// plan's rows, a page's summary) says "compile to be sure" beside it, in one wording.
#pragma once

#include <string_view>

namespace shardtrace {

enum class Unmodelled {
  // A TPU policy offloads several names: the compiler has staged whole stacked offloads in HBM
  // to change their layout between the forward and the backward (published_n1: a false fit).
  kOffloadStaging,
};

// The JSON spelling: "offload_staging".
std::string_view ToString(Unmodelled u);
// A few words for a table cell: "offloads several names".
std::string_view ShortLabel(Unmodelled u);
// One sentence on what the compiler did and why that means compiling to be sure.
std::string_view Explanation(Unmodelled u);

}  // namespace shardtrace
