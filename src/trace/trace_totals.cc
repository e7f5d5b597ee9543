#include "trace/trace_totals.h"

#include <algorithm>
#include <vector>

namespace shardtrace {

TraceTotals ComputeTotals(const Trace& trace) {
  TraceTotals totals;
  for (const TensorRecord& t : trace.tensors)
    if (t.kind == TensorKind::kWeight && t.constraint == Constraint::kKernelAxes)
      totals.weight_bytes_per_device += t.bytes_per_device;
  for (const OpRecord& op : trace.ops)
    for (const ImpliedCollective& c : op.implied)
      totals.implied_bytes_sent_per_device += c.bytes_per_device;
  for (const OpRecord& op : trace.ops)
    if (op.collective && !op.collective->bytes_sent.empty())
      totals.collective_bytes_sent_per_device +=
          *std::max_element(op.collective->bytes_sent.begin(), op.collective->bytes_sent.end());
  return totals;
}

}  // namespace shardtrace
