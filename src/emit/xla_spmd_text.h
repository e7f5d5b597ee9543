// Text for what the SPMD analysis (spmd/spmd_analysis.h) says of a Trace, shared by the emitters
// that show it: an implied collective's label (`all-gather ⇄ xla`, visibly not a collective moe.py
// writes) and the reshard it performs, and the per-device memory breakdown.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// "all-gather ⇄ xla" (HLO names: all-reduce, reduce-scatter, all-to-all, slice)
std::string ImpliedLabel(const ImpliedCollective& c);
// "w0_kernel P('expert', 'fsdp', None) -> P('expert', None, None) [sharding constraint]"
std::string ImpliedDetail(const Trace& trace, const ImpliedCollective& c);
// The flow pages' line, in the `⇄ xla` notation of the collectives the code writes:
// "⇄ xla all-gather over fsdp: w0_kernel P(None, 'fsdp', None) -> P(), 2.0 KiB per device"
std::string ImpliedFlowText(const Trace& trace, const ImpliedCollective& c);
// The memory lines of `trace`'s SPMD result, each without a newline:
//   parameters  float32 168.0 MiB (kernel_axes, per device)
//   ...
std::vector<std::string> MemoryLines(const Trace& trace, const SpmdResult& spmd);

}  // namespace shardtrace
