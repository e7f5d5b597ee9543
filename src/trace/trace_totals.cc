#include "trace/trace_totals.h"

#include <algorithm>
#include <vector>

namespace shardtrace {

TraceTotals ComputeTotals(const Trace& trace) {
  TraceTotals totals;
  const size_t n = trace.tensors.size();
  std::vector<int> def(n, -1), last(n, -1);
  for (const OpRecord& op : trace.ops) {
    for (const int out : op.outputs) def[out] = op.id;
    for (const int in : op.inputs) last[in] = std::max(last[in], op.id);
  }
  std::vector<int64_t> delta(trace.ops.size() + 1, 0);
  for (const TensorRecord& t : trace.tensors) {
    if (t.kind == TensorKind::kWeight) {
      if (t.constraint == Constraint::kKernelAxes)
        totals.weight_bytes_per_device += t.bytes_per_device;
      continue;
    }
    // Only activations whose per-device size is known: constrained, or inside shard_map.
    if (def[t.id] < 0 || (!t.partition_spec && !t.in_shard_map)) continue;
    const int end = std::max(def[t.id], last[t.id]);
    delta[def[t.id]] += t.bytes_per_device;
    delta[end + 1] -= t.bytes_per_device;
  }
  int64_t live = 0;
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    live += delta[i];
    if (live > totals.peak_activation_bytes_per_device) {
      totals.peak_activation_bytes_per_device = live;
      totals.peak_op = static_cast<int>(i);
    }
  }
  for (const OpRecord& op : trace.ops)
    if (op.collective && !op.collective->bytes_sent.empty())
      totals.collective_bytes_sent_per_device +=
          *std::max_element(op.collective->bytes_sent.begin(), op.collective->bytes_sent.end());
  return totals;
}

}  // namespace shardtrace
