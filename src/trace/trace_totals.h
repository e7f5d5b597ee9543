// Per-device memory totals of a Trace: the weight bytes (every kernel_axes record) and the
// peak of live activation bytes over the recorded program order (a tensor is live from the
// op that makes it to the last op that reads it). Only activations whose per-device size is
// known count: those a constraint placed and those inside shard_map; shardtrace does not
// guess how XLA propagates shardings to the rest.
#pragma once

#include <cstdint>
#include <string>

#include "trace/trace.h"

namespace shardtrace {

struct TraceTotals {
  int64_t weight_bytes_per_device = 0;
  int64_t peak_activation_bytes_per_device = 0;
  int peak_op = -1;                              // the op at which the peak is reached
  int64_t collective_bytes_sent_per_device = 0;  // max over devices, summed over collectives
};

TraceTotals ComputeTotals(const Trace& trace);

}  // namespace shardtrace
