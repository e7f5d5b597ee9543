// The "knobs that change this" of a page's summary: for each config key a MaxText engineer
// turns on this path (ragged_buffer_factor, capacity_factor, expert/tensor parallelism,
// use_ring_of_experts, shard_exp_on_fsdp, per_device_batch_size, sparse_matmul), the
// config with that key changed, traced symbolically at full size like the page's own config
// (a few milliseconds each), and its per-device peak memory and communication per layer as
// the trace's totals give them. Nothing is estimated: a row is a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/trace.h"
#include "pages/kernel_variants.h"

namespace shardtrace {

// One traced variant of the config, or the reason it cannot be traced.
struct KnobRun {
  std::string change;         // "`ici_expert_parallelism=2`"; the first run is the config as given
  std::string mesh;           // Mesh::ToString() of the run
  std::string path;           // Trace::path
  int64_t peak_bytes = 0;     // MemoryEstimate::peak_bytes(), per device
  int64_t written_bytes = 0;  // TraceTotals::collective_bytes_sent_per_device
  int64_t implied_bytes = 0;  // TraceTotals::implied_bytes_sent_per_device
  std::string not_traced;     // why the config cannot take this change (empty: traced)
};

// The config as given (symbolic) first, then one run per knob that applies to its path.
// `traced` is the page's own trace, which says which path ran.
std::vector<KnobRun> TraceKnobs(const VariantBase& base, const Trace& traced);

}  // namespace shardtrace
