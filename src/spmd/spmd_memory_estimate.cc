#include "spmd/spmd_memory_estimate.h"

#include <algorithm>
#include <map>

namespace shardtrace {
namespace {

// Ops whose output is its operand's buffer in XLA (no copy). An astype to the operand's own
// dtype is an identity convert that XLA removes: a float32 kernel used in a float32 einsum is
// the argument itself, not a weight copy (the 1-device fixtures' temp_size shows no such copy).
bool Aliases(const Trace& trace, const SpmdResult& spmd, const OpRecord& op) {
  const OpKind k = op.kind;
  const std::vector<ImpliedCollective>& implied = spmd.implied_at(op.id);
  if (k == OpKind::kAstype && implied.empty() && op.inputs.size() == 1 && op.outputs.size() == 1 &&
      trace.tensors[op.inputs.front()].dtype == trace.tensors[op.outputs.front()].dtype &&
      spmd.tensor(op.inputs.front()).bytes_per_device ==
          spmd.tensor(op.outputs.front()).bytes_per_device)
    return true;
  if (k == OpKind::kReshape || k == OpKind::kCheckpointName || k == OpKind::kOptimizationBarrier ||
      k == OpKind::kShardMapOut)
    return true;
  if (k == OpKind::kShardingConstraint || k == OpKind::kShardMapIn) {
    for (const ImpliedCollective& c : implied)
      if (c.kind != CollectiveKind::kSlice) return false;
    return implied.empty();  // a slice writes a new (smaller) buffer
  }
  return false;
}

}  // namespace

MemoryEstimate EstimateMemory(const Trace& trace, const SpmdResult& spmd,
                              const std::vector<bool>& fused) {
  MemoryEstimate m;
  m.fused = fused;
  const size_t n = trace.tensors.size();
  const int num_ops = static_cast<int>(trace.ops.size());
  std::vector<int> root(n), def(n, -1), last(n, -1);
  for (size_t i = 0; i < n; ++i) root[i] = static_cast<int>(i);
  std::vector<bool> argument(n, false);
  std::map<DType, int64_t> params;
  for (const OpRecord& op : trace.ops) {
    for (const int out : op.outputs) def[out] = op.id;
    for (const int in : op.inputs) last[in] = std::max(last[in], op.id);
    if (op.kind == OpKind::kParam || op.kind == OpKind::kInput) {
      for (const int out : op.outputs) {
        const TensorRecord& t = trace.tensors[out];
        argument[out] = true;
        if (op.kind == OpKind::kParam)
          params[t.dtype] += spmd.tensor(out).bytes_per_device;
        else
          m.input_bytes += spmd.tensor(out).bytes_per_device;
      }
    } else if (op.kind == OpKind::kRaggedAllToAll && op.inputs.size() > 1) {
      root[op.outputs.front()] = root[op.inputs[1]];  // written into its `output` operand
    } else if (Aliases(trace, spmd, op) && !op.inputs.empty()) {
      for (const int out : op.outputs) root[out] = root[op.inputs.front()];
    }
  }
  for (const auto& [dtype, bytes] : params) {
    m.parameter_bytes_by_dtype.emplace_back(dtype, bytes);
    m.parameter_bytes += bytes;
  }
  // A buffer lives from its root's definition to the last read of any alias; a tensor
  // nobody reads lives at its definition (the block output: to the end).
  std::vector<int> begin(n, -1), end(n, -1);
  std::vector<int64_t> size(n, 0);
  int final_output = -1;
  for (const TensorRecord& t : trace.tensors)
    if (!t.in_shard_map && t.kind == TensorKind::kAct && def[t.id] >= 0) final_output = t.id;
  for (const TensorRecord& t : trace.tensors) {
    const int r = root[t.id];
    if (argument[r] || def[t.id] < 0) continue;
    if (r == t.id && static_cast<size_t>(t.id) < fused.size() && fused[t.id]) continue;
    if (begin[r] < 0) begin[r] = def[r];
    int e = std::max(def[t.id], last[t.id]);
    if (t.id == final_output) e = num_ops - 1;
    end[r] = std::max(end[r], e);
    size[r] = std::max(size[r], spmd.tensor(t.id).bytes_per_device);
  }
  std::vector<int64_t> delta(num_ops + 1, 0), transient(num_ops, 0);
  for (size_t b = 0; b < n; ++b)
    if (begin[b] >= 0) {
      delta[begin[b]] += size[b];
      delta[end[b] + 1] -= size[b];
    }
  // Operands an einsum (or elementwise op) gathers exist only while it runs.
  for (const OpRecord& op : trace.ops)
    if (op.kind != OpKind::kShardingConstraint && op.kind != OpKind::kShardMapIn)
      for (const ImpliedCollective& c : spmd.implied_at(op.id))
        if (c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kAllToAll) {
          int64_t elems = 1;
          for (const int64_t d : c.local_after) elems *= d;
          // The copy, in the dtype moved, lives until the last op that reads it (CSE).
          const int last = std::max(op.id, c.last_reader_op);
          for (int i = op.id; i <= last; ++i) transient[i] += elems * ByteSize(c.dtype);
        }
  int64_t live = 0;
  for (int i = 0; i < num_ops; ++i) {
    live += delta[i];
    if (live + transient[i] > m.peak_temporary_bytes || m.peak_op < 0) {
      m.peak_temporary_bytes = live + transient[i];
      m.peak_op = i;
    }
  }
  // What holds the peak: the buffers live there, largest first (ties: program order).
  for (size_t b = 0; b < n; ++b) {
    if (begin[b] < 0 || size[b] == 0) continue;
    m.largest.push_back({static_cast<int>(b), size[b]});
    if (m.peak_op >= 0 && begin[b] <= m.peak_op && m.peak_op <= end[b]) {
      m.at_peak.push_back({static_cast<int>(b), size[b]});
      const TensorRecord& t = trace.tensors[b];
      if (t.kind == TensorKind::kWeight) m.gathered_weight_bytes += size[b];
      if (spmd.tensor(t.id).placement == Placement::kUnresolved) m.unresolved_bytes += size[b];
    }
  }
  auto by_size = [](const MemoryHolder& a, const MemoryHolder& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.tensor < b.tensor;
  };
  std::stable_sort(m.at_peak.begin(), m.at_peak.end(), by_size);
  std::stable_sort(m.largest.begin(), m.largest.end(), by_size);
  if (m.largest.size() > 5) m.largest.resize(5);
  return m;
}

}  // namespace shardtrace
