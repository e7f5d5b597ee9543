// Per-device totals of a Trace: the weight bytes (every kernel_axes record) and the bytes
// every device sends in the collectives moe.py writes and in those XLA inserts, also grouped
// by collective (kind, origin, mesh axes) so a summary lists them without adding anything up
// itself. The weights' per-device bytes and the implied collectives are the SPMD result's
// (spmd/spmd_result.h), so the totals live with it; memory (liveness, peak) is
// SpmdResult::memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// The collectives of one kind, origin and set of mesh axes in one layer's forward pass.
struct CollectiveTotal {
  CollectiveKind kind = CollectiveKind::kAllGather;
  bool written = true;                // called in moe.py (false: inserted by XLA)
  std::vector<std::string> axes;      // mesh axes it runs over
  int count = 0;                      // how many the layer runs
  int64_t bytes_sent_per_device = 0;  // summed; each written one at its busiest device
};

struct TraceTotals {
  int64_t weight_bytes_per_device = 0;
  int64_t collective_bytes_sent_per_device = 0;  // written: max over devices, summed
  int64_t implied_bytes_sent_per_device = 0;     // inserted by XLA (SpmdResult::implied)
  // The same on XLA:CPU's fake devices, which widen 16-bit floats to float32 first.
  int64_t implied_bytes_sent_per_device_on_xla_cpu = 0;
  // Every collective that moves bytes (a local slice moves none), in order of first use;
  // their bytes add up to the two sums above.
  std::vector<CollectiveTotal> collectives;
};

TraceTotals ComputeTotals(const Trace& trace, const SpmdResult& spmd);

}  // namespace shardtrace
