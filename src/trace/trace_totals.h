// Per-device totals of a Trace: the weight bytes (every kernel_axes record) and the bytes
// every device sends in the collectives moe.py writes and in those XLA inserts. Memory
// (liveness, peak) is Trace::memory, from the SPMD analysis (trace/spmd_analysis.h).
#pragma once

#include <cstdint>
#include <string>

#include "trace/trace.h"

namespace shardtrace {

struct TraceTotals {
  int64_t weight_bytes_per_device = 0;
  int64_t collective_bytes_sent_per_device = 0;  // written: max over devices, summed
  int64_t implied_bytes_sent_per_device = 0;     // inserted by XLA (OpRecord::implied)
};

TraceTotals ComputeTotals(const Trace& trace);

}  // namespace shardtrace
