// The terminal view of a Trace: one table per scope (name, kind, dtype, shape with dim
// letters, logical axes, PartitionSpec, per-device shape and bytes, constraint, condition),
// then the collectives with the bytes they move, the numeric facts, and the totals.
#pragma once

#include <string>

#include "ir/trace.h"

namespace shardtrace {

std::string TraceToTable(const Trace& trace);

}  // namespace shardtrace
