// The report of `shardtrace compare-dump` (a DumpComparison) as terminal text, Markdown for
// a PR or issue, or JSON (schema 1, ordered keys, byte-stable). Text and Markdown: a header
// (dump, what was inferred from it, config, meshes, blocks), one table of parameters and one
// of activations with each tensor's status, then every difference side by side and a summary
// line. Only formats the comparison: nothing here resolves a sharding.
#pragma once

#include <string>

#include "check/dump_comparison.h"

namespace shardtrace {

std::string DumpComparisonToText(const DumpComparison& comparison);
std::string DumpComparisonToMarkdown(const DumpComparison& comparison);
std::string DumpComparisonToJson(const DumpComparison& comparison);

}  // namespace shardtrace
