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
  // megablox=false on TPU: the grouped matmuls run as jax.lax.ragged_dot, whose kernel the
  // compiler can fail to fit in VMEM (mixtral_l2_v5p8_megablox_off: the weight gradient's
  // bf16[8,4096,14336] at tiling 512,1024,1024), a failed compile where fit says it fits.
  kRaggedDotVmem,
  // sparse_matmul=false on TPU with the expert kernels gathered over 8 or 16 devices: the
  // compiler runs the dense dispatch's backward einsums over whole gathered kernels or as
  // windowed einsums, by a rule read on seven compiles (model/block_step.cc,
  // WindowedBackwardKernels: held out, Qwen3-Next on v6e-16 +52.0% of temp, +16.4% now;
  // gpt-oss-20b at 4 layers on v6e-8 +22.0%, +10.2% now).
  kDenseDispatchWindows,
};

// The JSON spelling: "offload_staging".
std::string_view ToString(Unmodelled u);
// A few words for a table cell: "offloads several names".
std::string_view ShortLabel(Unmodelled u);
// One sentence on what the compiler did and why that means compiling to be sure.
std::string_view Explanation(Unmodelled u);

}  // namespace shardtrace
