// The report of `shardtrace diff` (a TraceDiff) as terminal text, Markdown for a PR review
// (a summary line, then tables) or JSON (schema 1, documented in the README, byte-stable).
// Sections: the two sides (arguments, mesh, path and the key that selected it), config keys
// and logical-axis rules that differ, tensors and collectives by impact (bytes per device),
// and the per-device totals with signed deltas. Unconstrained activations print as
// "unconstrained (XLA chooses)", never with a per-device size. Only formats the diff.
#pragma once

#include <string>

#include "check/trace_diff.h"

namespace shardtrace {

std::string TraceDiffToText(const TraceDiff& diff);
std::string TraceDiffToMarkdown(const TraceDiff& diff);
std::string TraceDiffToJson(const TraceDiff& diff);

}  // namespace shardtrace
