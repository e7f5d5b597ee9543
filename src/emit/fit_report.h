// `shardtrace fit`'s output: the whole training step on a slice, per device. Text puts the
// answer first (fits with X to spare / does not fit by X, on which target), then the memory
// by component as memory_analysis() names it, the layers, the five largest buffers, the
// collectives per step by kind and mesh axis, the variants that would make it fit, and what
// was assumed. JSON carries the same with memory_analysis()'s field names
// (argument_size_in_bytes, ..., peak_memory_in_bytes) beside `fits` and `hbm_bytes`.
// Formats only what the FitResult holds.
#pragma once

#include <string>

#include "model/whole_step.h"

namespace shardtrace {

std::string FitToText(const FitResult& fit);
std::string FitToJson(const FitResult& fit);

// "fits with 12.3 GiB to spare" / "does not fit by 1.2 GiB".
std::string FitVerdict(bool fits, int64_t headroom_bytes);

}  // namespace shardtrace
