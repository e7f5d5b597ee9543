// The machine-readable Trace (schema 1): every tensor record, op, collective, fact and the
// totals, with ordered keys so the same input gives byte-identical JSON.
#pragma once

#include <string>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// `spmd` is `trace`'s SPMD result: each tensor's placement, propagated spec and per-device
// shape, the implied collectives and the memory are read from it.
std::string TraceToJson(const Trace& trace, const SpmdResult& spmd);

}  // namespace shardtrace
