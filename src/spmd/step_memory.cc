#include "spmd/step_memory.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "spmd/step_rules.h"

namespace shardtrace {

bool StepGraph::Live(const OpRecord& op) const {
  for (const int o : op.outputs)
    if (need[o]) return true;
  return false;
}

int StepGraph::CastSource(int id) const {
  const int p = producer[id];
  if (p < 0) return id;
  const OpRecord& op = trace.ops[p];
  if (op.kind != OpKind::kAstype || op.inputs.size() != 1) return id;
  return T(op.inputs[0]).shape == T(id).shape ? op.inputs[0] : id;
}

bool StepGraph::IsArgument(int id) const {
  const int p = producer[root[id]];
  return p < 0 || trace.ops[p].kind == OpKind::kParam || trace.ops[p].kind == OpKind::kInput;
}

std::vector<int> StepGraph::ResidualsOf(const OpRecord& op) const {
  auto needs = [&](size_t k) { return k < op.inputs.size() && need[op.inputs[k]]; };
  switch (op.kind) {
    case OpKind::kEinsum:
    case OpKind::kGmm: {
      std::vector<int> r;
      if (needs(1)) r.push_back(op.inputs[0]);
      if (needs(0)) r.push_back(op.inputs[1]);
      if (op.kind == OpKind::kGmm && op.inputs.size() > 2) r.push_back(op.inputs[2]);
      return r;
    }
    case OpKind::kMul:
    case OpKind::kDiv: {
      std::vector<int> r;
      if (needs(1) || op.kind == OpKind::kDiv) r.push_back(op.inputs[0]);
      if (needs(0) || op.kind == OpKind::kDiv) r.push_back(op.inputs[1]);
      return r;
    }
    case OpKind::kActivation:
    case OpKind::kClip:
      return {op.inputs.front()};
    case OpKind::kSoftmax:
      return {op.outputs.front()};
    case OpKind::kWhere:  // the condition: its non-float operand
      for (const int in : op.inputs)
        if (!IsFloating(T(in).dtype)) return {in};
      return {};
    case OpKind::kTake:
    case OpKind::kTakeAlongAxis:
    case OpKind::kScatterSet:
      return op.inputs.size() > 1 ? std::vector<int>{op.inputs[1]} : std::vector<int>{};
    case OpKind::kTopK:
      return op.outputs.size() > 1 ? std::vector<int>{op.outputs[1]} : std::vector<int>{};
    case OpKind::kRaggedAllToAll:
      return std::vector<int>(op.inputs.begin() + std::min<size_t>(2, op.inputs.size()),
                              op.inputs.end());
    default:
      return {};
  }
}

int64_t StepGraph::ReadBytes(const OpRecord& op, int id) const {
  int64_t bytes = spmd.tensor(id).bytes_per_device;
  for (const ImpliedCollective& f : spmd.implied_at(op.id))
    if ((f.tensor == id || f.tensor == CastSource(id)) &&
        (f.kind == CollectiveKind::kAllGather || f.kind == CollectiveKind::kAllToAll))
      bytes = std::max(bytes, Elements(f.local_after) * ByteSize(T(id).dtype));
  return bytes;
}

namespace {

// A residual buffer: its bytes as read, and the first and last forward ops whose VJPs read it.
struct Residual {
  int64_t bytes = 0;
  int first = -1, last = -1;
};

// Walks back from the operands of `r`'s producer (what recomputing `r` starts from) through
// values that are computed again too, and calls `visit` on each value where `stop` holds
// (arguments end the walk unvisited).
template <typename Stop, typename Visit>
void RecomputedFrom(const StepGraph& g, int r, const Stop& stop, const Visit& visit) {
  if (g.producer[r] < 0) return;
  std::vector<int> stack(g.trace.ops[g.producer[r]].inputs);
  std::set<int> seen;
  while (!stack.empty()) {
    const int t = g.root[stack.back()];
    stack.pop_back();
    if (!seen.insert(t).second || g.IsArgument(t) || g.producer[t] < 0) continue;
    if (stop(t)) {
      visit(t);
      continue;
    }
    const OpRecord& p = g.trace.ops[g.producer[t]];
    stack.insert(stack.end(), p.inputs.begin(), p.inputs.end());
  }
}

// Whether residual `r` is an activation (silu, gelu) of another residual read only by
// elementwise products (or through its own aliases): silu(w0) * w1 of a gated MLP. TPU fuses
// it into those products and their VJPs and never writes it (the TPU fixtures' buffers at the
// compiler's fullest moment in the MoE backward: three [rows, mlp] buffers, layer_w0, layer_w1
// and the cotangent, against five with it and the product kept).
bool FusibleActivation(const StepGraph& g, int r, const std::map<int, Residual>& residual) {
  const int p = g.producer[static_cast<size_t>(r)];
  if (p < 0) return false;
  const OpRecord& op = g.trace.ops[static_cast<size_t>(p)];
  if (op.kind != OpKind::kActivation || op.inputs.empty() ||
      !residual.count(g.root[static_cast<size_t>(op.inputs.front())])) {
    return false;
  }
  for (size_t t = 0; t < g.trace.tensors.size(); ++t) {
    if (g.root[t] != r) continue;
    for (const int c : g.consumers[t]) {
      const OpRecord& reader = g.trace.ops[static_cast<size_t>(c)];
      const bool alias =
          !reader.outputs.empty() && g.root[static_cast<size_t>(reader.outputs.front())] == r;
      if (reader.kind != OpKind::kMul && !alias) return false;
    }
  }
  return true;
}

// StepMemoryPlan::run_again from the plan's kept residuals and gathered operands.
std::vector<bool> RunAgain(const StepGraph& g, const StepMemoryPlan& plan) {
  const Trace& trace = g.trace;
  std::vector<bool> again(trace.ops.size(), false);
  std::vector<int> stack;
  for (const OpRecord& op : trace.ops) {
    if (!g.Live(op)) continue;
    for (const int r : g.ResidualsOf(op)) {
      if (plan.kept.count(g.root[r])) continue;
      if (plan.gathered.count(op.id)) again[op.id] = true;  // the gather of its weight operand
      stack.push_back(r);
    }
  }
  std::vector<bool> seen(trace.tensors.size(), false);
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    if (seen[t] || plan.kept.count(g.root[t])) continue;
    seen[t] = true;
    const int p = g.producer[t];
    if (p < 0) continue;
    const OpRecord& op = trace.ops[p];
    if (op.kind == OpKind::kParam || op.kind == OpKind::kInput) continue;
    again[p] = true;
    for (const int in : op.inputs) stack.push_back(in);
  }
  return again;
}

// How XLA:CPU's memory_analysis() of the same step differs, by what it does that TPU does not.
void XlaCpuNotes(const StepGraph& g, StepMemory& m) {
  bool dot = false, gmm = false, half = false;
  for (const OpRecord& op : g.trace.ops) {
    if (!g.Live(op)) continue;
    dot = dot || op.kind == OpKind::kEinsum || op.kind == OpKind::kGmm;
    gmm = gmm || op.kind == OpKind::kGmm;
    for (const int o : op.outputs)
      half = half || (g.T(o).kind == TensorKind::kAct &&
                      (g.T(o).dtype == DType::kBfloat16 || g.T(o).dtype == DType::kFloat16));
  }
  if (dot)
    m.xla_cpu_notes.push_back(
        "XLA:CPU's temp also holds the layout copies of its dots (operands and results "
        "transposed into the row-major order its dot kernels take, several operand-sized "
        "buffers around each einsum's VJP), and its heap's packing; not counted here");
  if (half)
    m.xla_cpu_notes.push_back(
        "XLA:CPU widens 16-bit floats to float32: its temp counts these activations at twice "
        "the bytes");
  if (gmm)
    m.xla_cpu_notes.push_back(
        "XLA:CPU lowers ragged_dot (the grouped matmul) with megabytes of scratch; TPU's "
        "kernel does not");
  if (m.offloaded_bytes > 0)
    m.xla_cpu_notes.push_back(
        "XLA:CPU has one memory space: what the policy offloads to pinned_host stays in its "
        "temp (host_temp_size 0)");
}

}  // namespace

StepMemoryPlan PlanStepMemory(const StepGraph& g, const RematPolicy& policy, StepMemory& m,
                              const std::map<int, int64_t>& moved) {
  StepMemoryPlan plan;
  const Trace& trace = g.trace;
  const int num_ops = static_cast<int>(trace.ops.size());
  std::map<int, Residual> residual;  // by root
  for (const OpRecord& op : trace.ops) {
    if (!g.Live(op)) continue;
    for (const int r : g.ResidualsOf(op)) {
      const int64_t bytes = g.ReadBytes(op, r);
      if (g.IsArgument(r) && bytes == g.spmd.tensor(r).bytes_per_device) continue;
      if (bytes != g.spmd.tensor(r).bytes_per_device) plan.gathered.insert(op.id);
      auto [it, fresh] = residual.try_emplace(g.root[r], Residual{bytes, op.id, op.id});
      it->second.bytes = std::max(it->second.bytes, bytes);
      it->second.last = std::max(it->second.last, op.id);
    }
  }
  // The names a buffer carries that the policy saves (or offloads).
  std::map<int, std::pair<std::string, bool>> named;  // root -> (name, offloaded)
  if (policy.wrapped) {
    for (const CheckpointTag& t : trace.checkpoint_tags) {
      const int r = g.root[t.tensor];
      const auto in = [&](const std::vector<std::string>& names) {
        return std::find(names.begin(), names.end(), t.name) != names.end();
      };
      if (in(policy.saved))
        named[r] = {t.name, false};
      else if (in(policy.offloaded) && !named.count(r))
        named[r] = {t.name, true};
    }
  }
  // jax.checkpoint saves a named value the backward needs: one a VJP reads, and one the
  // recomputation of an unsaved residual starts from (the sparse path's wo output, which the
  // unsort between it and the combine's VJP is recomputed from: JAX's saved_residuals of
  // step_sparse_fsdp2_remat_minimal lists it).
  std::map<int, std::pair<std::string, bool>> kept;  // root -> (name, offloaded)
  if (policy.wrapped) {
    for (const auto& [r, v] : named)
      if (residual.count(r)) kept[r] = v;
    std::map<int, Residual> sources;      // named values a recomputation reads
    for (const auto& entry : residual) {  // not a structured binding: the lambda reads it
      const int r = entry.first;
      const Residual& v = entry.second;
      if (kept.count(r)) continue;
      RecomputedFrom(
          g, r, [&](int t) { return named.count(t) || residual.count(t); },
          [&](int t) {
            if (!named.count(t)) return;
            const auto [it, fresh] = sources.try_emplace(
                t, Residual{g.spmd.tensor(t).bytes_per_device, v.first, v.last});
            it->second.first = std::min(it->second.first, v.first);
            it->second.last = std::max(it->second.last, v.last);
          });
    }
    for (const auto& [t, v] : sources) {
      if (residual.count(t)) continue;
      residual.emplace(t, v);
      kept[t] = named.at(t);
    }
  } else {
    for (const auto& [r, v] : residual) kept[r] = {"", false};
  }
  for (const auto& [r, v] : kept) {
    const int64_t bytes = residual.at(r).bytes;
    m.saved.push_back({r, bytes, v.first, v.second});
    (v.second ? m.offloaded_bytes : m.saved_bytes) += bytes;
    plan.kept.insert(r);
  }
  std::stable_sort(
      m.saved.begin(), m.saved.end(),
      [](const SavedResidual& a, const SavedResidual& b) { return a.bytes > b.bytes; });
  auto on_device = [&](int r) { return kept.count(r) && !kept.at(r).second; };

  // The forward phase: its peak, plus what it keeps on the device past the last forward read
  // when that read came before the peak.
  const MemoryEstimate& f = g.spmd.memory;
  m.forward_temporary_bytes = f.peak_temporary_bytes;
  for (const SavedResidual& s : m.saved) {
    if (s.offloaded) continue;
    int last = g.last_reader[s.tensor];
    for (size_t i = 0; i < trace.tensors.size(); ++i)
      if (g.root[i] == s.tensor) last = std::max(last, g.last_reader[i]);
    if (g.producer[s.tensor] <= f.peak_op && last < f.peak_op) m.forward_temporary_bytes += s.bytes;
  }

  // A residual recomputed in the backward is computed again from its producer's operands when
  // the first VJP reads it: residuals among those operands (through values that are no
  // residuals) must still be live then.
  bool changed = true;
  for (int round = 0; changed && round < 8; ++round) {
    changed = false;
    for (auto& [r, v] : residual) {
      if (on_device(r)) continue;
      RecomputedFrom(
          g, r, [&](int t) { return residual.count(t) > 0; },
          [&, last = v.last](int t) {
            Residual& source = residual.at(t);
            if (source.last < last) {
              source.last = last;
              changed = true;
            }
          });
    }
  }

  // The backward phase: delta[i] changes what is live while the VJP of forward op i runs
  // (the backward walks i from the last op down to 0).
  std::vector<int64_t> delta(num_ops + 2, 0);
  std::vector<StepRange>& ranges = m.backward_ranges;  // the schedule, kept for its readers
  auto live_between = [&](int tensor, int lo, int hi, int64_t bytes, bool cotangent) {
    if (lo < 0 || hi < lo) return;  // live while the VJPs of ops lo..hi run
    delta[lo] += bytes;
    delta[hi + 1] -= bytes;
    ranges.push_back({{tensor, bytes, cotangent}, lo, hi});
  };
  for (const auto& [r, v] : residual) {
    m.residual_bytes += v.bytes;
    if (!plan.kept.count(r)) m.recomputed_bytes += v.bytes;
    // Kept on the device: held from the forward until the VJP of its first reader; else
    // computed again (or fetched from the host) for its last VJP reader.
    live_between(r, v.first, on_device(r) ? num_ops - 1 : v.last, v.bytes, false);
    if (!on_device(r) && !ranges.empty() && ranges.back().buffer.tensor == r) {
      ranges.back().fusible_activation = FusibleActivation(g, r, residual);
    }
  }
  // Cotangents, one per buffer: from the VJP of the last reader of the value (or an alias of
  // it) to the VJP of its producer. A value XLA fuses into its one elementwise reader has its
  // cotangent fused into that reader's VJP; the output's cotangent is the step's argument.
  std::vector<int> last_use(trace.tensors.size(), -1);
  for (const TensorRecord& t : trace.tensors)
    for (const int c : g.consumers[t.id])
      last_use[g.root[t.id]] = std::max(last_use[g.root[t.id]], c);
  const std::vector<bool>& fused = f.fused;
  std::vector<bool> read_by_alias(trace.tensors.size(), false);  // an identity reads it
  for (const OpRecord& op : trace.ops)
    for (const int in : op.inputs)
      for (const int o : op.outputs)
        if (o != in && g.root[o] == g.root[in]) read_by_alias[in] = true;
  for (const TensorRecord& t : trace.tensors) {
    if (!g.need[t.id] || g.IsArgument(t.id) || g.root[t.id] != t.id || g.producer[t.id] < 0 ||
        t.id == trace.output)
      continue;
    if (static_cast<size_t>(t.id) < fused.size() && fused[t.id] && !read_by_alias[t.id]) continue;
    live_between(t.id, g.producer[t.id], std::max(last_use[t.id], g.producer[t.id]),
                 g.spmd.tensor(t.id).bytes_per_device, true);
  }
  // The VJP of a residual's last backward reader writes the residual's cotangent there (the
  // cotangent's range ends, in the backward's order begins, at that op).
  std::map<int, int> cotangent_born;
  for (const StepRange& r : ranges) {
    if (r.buffer.cotangent) cotangent_born[r.buffer.tensor] = r.hi;
  }
  for (StepRange& r : ranges) {
    const OpRecord& op = trace.ops[static_cast<size_t>(r.lo)];
    const auto born = cotangent_born.find(r.buffer.tensor);
    if (r.buffer.cotangent || born == cotangent_born.end() || born->second != r.lo ||
        (op.kind != OpKind::kEinsum && op.kind != OpKind::kGmm)) {
      continue;
    }
    r.freed_before_cotangent = std::any_of(op.inputs.begin(), op.inputs.end(), [&](int in) {
      return g.root[static_cast<size_t>(in)] == r.buffer.tensor;
    });
  }
  // What a gmm's weight gradient reads, and the cotangents several gmms' activation gradients
  // sum into (facts for model/block_step.cc's TPU schedule).
  std::map<int, std::vector<int>> gmm_readers;  // root of a gmm's activation operand -> gmms
  std::map<int, int> kernel_operand;            // root of a gmm's kernel -> of its operand
  std::set<int> gmm_outputs;
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kGmm || !g.Live(op) || op.inputs.size() < 2 || op.outputs.empty())
      continue;
    if (g.T(g.CastSource(op.inputs[1])).kind != TensorKind::kWeight) continue;
    if (m.first_gmm < 0) m.first_gmm = op.id;
    gmm_readers[g.root[static_cast<size_t>(op.inputs[0])]].push_back(op.id);
    gmm_outputs.insert(g.root[static_cast<size_t>(op.outputs[0])]);
    m.gmm_kernels.push_back(g.root[static_cast<size_t>(op.inputs[1])]);
    kernel_operand[m.gmm_kernels.back()] = g.root[static_cast<size_t>(op.inputs[0])];
  }
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kRaggedAllToAll || !g.Live(op) || op.outputs.empty()) continue;
    m.combine_all_to_all = op.id;
    m.combine_bytes = g.spmd.tensor(op.outputs.front()).bytes_per_device;
  }
  for (StepRange& r : ranges) {
    const auto readers = gmm_readers.find(r.buffer.tensor);
    r.read_by_weight_gradient =
        r.buffer.cotangent ? gmm_outputs.count(r.buffer.tensor) > 0 : readers != gmm_readers.end();
    if (r.buffer.cotangent && readers != gmm_readers.end() && readers->second.size() > 1)
      r.summed_at = readers->second.front();
    if (const auto k = kernel_operand.find(r.buffer.tensor);
        !r.buffer.cotangent && k != kernel_operand.end()) {
      const std::vector<int>& sharing = gmm_readers.at(k->second);
      if (sharing.size() > 1) r.kernel_summed_at = sharing.front();
    }
  }
  // Prefix sums over i give what is live at VJP i (ranges are [lo, hi] in op order).
  int64_t live = 0;
  for (int i = 0; i < num_ops; ++i) {
    live += delta[i];
    int64_t transient = 0;  // a gathered weight's cotangent before its reduce-scatter
    if (plan.gathered.count(i))
      for (const int in : trace.ops[i].inputs)
        if (g.T(g.CastSource(in)).kind == TensorKind::kWeight)
          transient += g.ReadBytes(trace.ops[i], in);
    if (const auto it = moved.find(i); it != moved.end()) transient += it->second;
    m.backward_transient.push_back(transient);
    if (live + transient > m.backward_temporary_bytes) {
      m.backward_temporary_bytes = live + transient;
      m.backward_peak_op = i;
    }
  }
  // What holds the backward's peak, largest first.
  for (const StepRange& r : ranges)
    if (r.lo <= m.backward_peak_op && m.backward_peak_op <= r.hi) m.at_peak.push_back(r.buffer);
  std::stable_sort(m.at_peak.begin(), m.at_peak.end(),
                   [](const StepBuffer& a, const StepBuffer& b) { return a.bytes > b.bytes; });
  XlaCpuNotes(g, m);
  if (policy.wrapped) plan.run_again = RunAgain(g, plan);
  return plan;
}

}  // namespace shardtrace
