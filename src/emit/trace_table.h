// The terminal view of a Trace: one table per scope (name, kind, dtype, shape with dim
// letters, logical axes, PartitionSpec, per-device shape and bytes, constraint, condition),
// then the collectives with the bytes they move, the numeric facts, and the totals.
#pragma once

#include <string>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// `spmd` is `trace`'s SPMD result (propagated specs, per-device shapes, implied collectives,
// memory).
std::string TraceToTable(const Trace& trace, const SpmdResult& spmd);

}  // namespace shardtrace
