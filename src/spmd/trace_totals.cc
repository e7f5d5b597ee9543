#include "spmd/trace_totals.h"

#include <algorithm>
#include <vector>

namespace shardtrace {
namespace {

void Add(std::vector<CollectiveTotal>& totals, CollectiveKind kind, bool written,
         const std::vector<std::string>& axes, int64_t bytes) {
  for (CollectiveTotal& t : totals)
    if (t.kind == kind && t.written == written && t.axes == axes) {
      ++t.count;
      t.bytes_sent_per_device += bytes;
      return;
    }
  totals.push_back({kind, written, axes, 1, bytes});
}

}  // namespace

TraceTotals ComputeTotals(const Trace& trace, const SpmdResult& spmd) {
  TraceTotals totals;
  for (const TensorRecord& t : trace.tensors)
    if (t.kind == TensorKind::kWeight && t.constraint == Constraint::kKernelAxes)
      totals.weight_bytes_per_device += spmd.tensor(t.id).bytes_per_device;
  for (const OpRecord& op : trace.ops) {
    for (const ImpliedCollective& c : spmd.implied_at(op.id)) {
      totals.implied_bytes_sent_per_device += c.bytes_per_device;
      totals.implied_bytes_sent_per_device_on_xla_cpu += c.xla_cpu_bytes_per_device;
      if (c.kind != CollectiveKind::kSlice)
        Add(totals.collectives, c.kind, /*written=*/false, c.axes, c.bytes_per_device);
    }
    if (op.collective && !op.collective->bytes_sent.empty()) {
      const int64_t busiest =
          *std::max_element(op.collective->bytes_sent.begin(), op.collective->bytes_sent.end());
      totals.collective_bytes_sent_per_device += busiest;
      Add(totals.collectives, op.collective->kind,
          op.collective->origin == CollectiveOrigin::kWritten, op.collective->axes, busiest);
    }
  }
  return totals;
}

}  // namespace shardtrace
