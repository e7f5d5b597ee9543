// The machine-readable Trace (schema 1): every tensor record, op, collective, fact and the
// totals, with ordered keys so the same input gives byte-identical JSON.
#pragma once

#include <string>

#include "ir/trace.h"

namespace shardtrace {

std::string TraceToJson(const Trace& trace);

}  // namespace shardtrace
