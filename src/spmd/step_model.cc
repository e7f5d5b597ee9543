#include "spmd/step_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "shard/sharding.h"
#include "spmd/spmd_reshard.h"
#include "spmd/step_cotangent.h"
#include "spmd/step_memory.h"
#include "spmd/step_rules.h"
#include "spmd/trace_totals.h"

namespace shardtrace {
namespace {

class StepAnalysis {
 public:
  StepAnalysis(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
               const RematPolicy& policy)
      : mesh_(mesh), trace_(trace), spmd_(spmd), g_(mesh, trace, spmd) {
    result_.policy = policy;
    const size_t n = trace.tensors.size();
    g_.producer.assign(n, -1);
    g_.last_reader.assign(n, -1);
    g_.consumers.assign(n, {});
    g_.root.resize(n);
    for (size_t i = 0; i < n; ++i) g_.root[i] = static_cast<int>(i);
    for (const OpRecord& op : trace.ops) {
      for (const int o : op.outputs) g_.producer[o] = op.id;
      for (const int in : op.inputs) {
        g_.last_reader[in] = std::max(g_.last_reader[in], op.id);
        g_.consumers[in].push_back(op.id);
      }
      if (Aliases(op))
        for (const int o : op.outputs) g_.root[o] = g_.root[op.inputs.front()];
    }
  }

  StepResult Run() {
    MarkDifferentiable();
    Gradients();
    SeedOutputCotangent();
    for (auto it = trace_.ops.rbegin(); it != trace_.ops.rend(); ++it) Backward(*it);
    Memory();
    Recompute();
    const TraceTotals totals = ComputeTotals(trace_, spmd_);
    result_.forward_bytes_per_device =
        totals.collective_bytes_sent_per_device + totals.implied_bytes_sent_per_device;
    for (const StepCollective& c : result_.backward) {
      result_.backward_bytes_per_device += c.bytes_per_device;
      if (c.recompute) result_.recompute_bytes_per_device += c.bytes_per_device;
    }
    return std::move(result_);
  }

 private:
  const TensorRecord& T(int id) const { return trace_.tensors[static_cast<size_t>(id)]; }

  bool Aliases(const OpRecord& op) const {
    if (op.inputs.empty() || op.outputs.empty()) return false;
    const OpKind k = op.kind;
    if (k == OpKind::kReshape || k == OpKind::kCheckpointName ||
        k == OpKind::kOptimizationBarrier || k == OpKind::kShardMapOut)
      return true;
    if (k == OpKind::kShardingConstraint || k == OpKind::kShardMapIn)
      return spmd_.implied_at(op.id).empty();
    // A convert to the operand's own dtype is an identity XLA removes (as EstimateMemory).
    if (k == OpKind::kAstype && op.inputs.size() == 1 && op.outputs.size() == 1 &&
        spmd_.implied_at(op.id).empty())
      return T(op.inputs[0]).dtype == T(op.outputs[0]).dtype &&
             spmd_.tensor(op.inputs[0]).bytes_per_device ==
                 spmd_.tensor(op.outputs[0]).bytes_per_device;
    return false;
  }

  PartitionSpec Spec(int id) const {
    const PartitionSpec* s = spmd_.SpecOf(T(id));
    return WithRank(s ? *s : PartitionSpec::Replicated(T(id).shape.size()), T(id).shape.size());
  }

  // g_.need[t]: t depends differentiably on a parameter or the input, and the loss (the block
  // output and any load-balance loss) depends differentiably on t.
  void MarkDifferentiable() {
    const size_t n = trace_.tensors.size();
    std::vector<bool> fwd(n, false), bwd(n, false);
    for (const OpRecord& op : trace_.ops) {
      if (op.kind == OpKind::kParam || op.kind == OpKind::kInput) {
        for (const int o : op.outputs) fwd[o] = IsFloating(T(o).dtype);
        continue;
      }
      if (NonDifferentiable(op.kind)) continue;
      bool any = false;
      for (size_t k = 0; k < op.inputs.size(); ++k)
        any = any || (DifferentiableOperand(op, k) && fwd[op.inputs[k]]);
      if (!any) continue;
      for (const int o : op.outputs) fwd[o] = IsFloating(T(o).dtype);
    }
    // The loss reads the output and every scalar loss the block returns (lb_loss).
    if (trace_.output >= 0) bwd[trace_.output] = true;
    for (const TensorRecord& t : trace_.tensors)
      if (g_.consumers[t.id].empty() && t.name.find("loss") != std::string::npos && fwd[t.id])
        bwd[t.id] = true;
    for (auto it = trace_.ops.rbegin(); it != trace_.ops.rend(); ++it) {
      const OpRecord& op = *it;
      if (NonDifferentiable(op.kind)) continue;
      bool any = false;
      for (const int o : op.outputs) any = any || (bwd[o] && fwd[o]);
      if (!any) continue;
      for (size_t k = 0; k < op.inputs.size(); ++k)
        if (DifferentiableOperand(op, k)) bwd[op.inputs[k]] = true;
    }
    g_.need.assign(n, false);
    for (size_t i = 0; i < n; ++i) g_.need[i] = fwd[i] && bwd[i];
  }

  void Gradients() {
    StepMemory& m = result_.memory;
    m.parameter_bytes = spmd_.memory.parameter_bytes;
    m.input_bytes = spmd_.memory.input_bytes;
    auto add = [&](int id) {
      const TensorSpmd& s = spmd_.tensor(id);
      result_.gradients.push_back({id, Spec(id), s.local_shape, T(id).dtype, s.bytes_per_device});
      return s.bytes_per_device;
    };
    for (const OpRecord& op : trace_.ops)
      if (op.kind == OpKind::kParam)
        for (const int o : op.outputs)
          if (g_.need[o]) m.gradient_bytes += add(o);
    if (trace_.input >= 0 && g_.need[trace_.input]) m.input_gradient_bytes = add(trace_.input);
  }

  void Add(StepCollective c, const Shape& in, const Shape& out) {
    c.groups = std::max<int64_t>(1, mesh_.num_devices() / std::max<int64_t>(1, c.participants));
    if (c.xla_cpu_op.empty()) SetXlaCpu(c, in, out);
    c.local_before = in;
    c.local_after = out;
    result_.backward.push_back(std::move(c));
  }

  // Collectives from an ImpliedCollective-style plan, moved into the backward record.
  void AddPlanned(const OpRecord& op, int tensor, const std::vector<ImpliedCollective>& plan,
                  const std::string& why) {
    // XLA:CPU has no reduce-scatter: GSPMD's reduce-scatters of one array there are
    // all-reduces of the whole block, sliced after the last of them (the compiled step of
    // deepseek3-671b-2dfsdp's shared experts on fsdp=2 x EP=2 all-reduces wi_0's whole
    // gradient over fsdp, then over expert); an all-reduce after them reads the slice.
    std::optional<Shape> unsliced;
    for (const ImpliedCollective& p : plan) {
      if (p.kind == CollectiveKind::kSlice) continue;
      Shape in = p.local_before;
      if (p.kind == CollectiveKind::kPsumScatter) {
        if (unsliced) in = *unsliced;
        unsliced = in;
      }
      StepCollective c;
      c.kind = p.kind;
      c.forward_op = op.id;
      c.tensor = tensor;
      c.axes = p.axes;
      c.participants = p.participants;
      c.bytes_per_device = p.bytes_per_device;
      c.dtype = p.dtype;
      c.reason = why;
      Add(std::move(c), in, p.local_after);
    }
  }

  void Backward(const OpRecord& op) {
    bool live = false;
    for (const int o : op.outputs) live = live || g_.need[o];
    if (!live) return;
    // An alias passes its cotangent on in the same sharding; a sharding constraint's transpose
    // constrains the cotangent (it returns to the value's sharding).
    if (Aliases(op) && op.kind != OpKind::kShardingConstraint && op.kind != OpKind::kShardMapIn &&
        ct_.count(op.outputs.front()) &&
        T(op.inputs.front()).shape.size() == T(op.outputs.front()).shape.size())
      ct_[op.inputs.front()] = ct_.at(op.outputs.front());
    if (Diverged(op) && DivergedBackward(op)) return;
    if (op.collective) WrittenTranspose(op);
    if (op.kind == OpKind::kShardMapIn) {
      ShardMapIn(op);
      return;
    }
    const bool einsum = op.kind == OpKind::kEinsum && op.einsum && op.inputs.size() == 2 &&
                        !T(op.outputs.front()).in_shard_map;
    if (einsum) EinsumOperands(op);
    if (op.kind == OpKind::kScatterSet) ScatterCotangent(op);
    if ((op.kind == OpKind::kMul || op.kind == OpKind::kAdd || op.kind == OpKind::kSub ||
         op.kind == OpKind::kDiv) &&
        !op.outputs.empty() && !T(op.outputs.front()).in_shard_map)
      ElementwiseOperands(op);
    for (const ImpliedCollective& f : spmd_.implied_at(op.id)) {
      if (einsum && f.reason == "einsum operand") continue;
      const int moved = f.tensor;
      if (moved < 0 || !g_.need[moved]) continue;
      StepCollective c;
      c.forward_op = op.id;
      c.tensor = moved;
      c.axes = f.axes;
      c.participants = f.participants;
      c.dtype = f.dtype;
      switch (f.kind) {
        case CollectiveKind::kPsum:
          continue;  // the cotangent of a sum is broadcast: every device has it
        case CollectiveKind::kAllGather:
          continue;  // read whole by every device: the cotangent is sliced back, free
        case CollectiveKind::kPsumScatter:
          c.kind = CollectiveKind::kAllGather;
          c.bytes_per_device = f.bytes_per_device;
          c.reason = "transpose of the forward's reduce-scatter of partial sums";
          Add(std::move(c), f.local_after, f.local_before);
          break;
        case CollectiveKind::kSlice:
          c.kind = CollectiveKind::kAllGather;
          c.bytes_per_device = TensorBytes(f.local_after, f.dtype) * (f.participants - 1);
          c.reason = fmt::format("transpose of the forward's slice at a {}", f.reason);
          Add(std::move(c), f.local_after, f.local_before);
          break;
        default:  // all-to-all, collective-permute: the same move back
          c.kind = f.kind;
          c.bytes_per_device = f.bytes_per_device;
          c.reason = fmt::format("transpose of the forward's {} ({})", HloName(f.kind), f.reason);
          Add(std::move(c), f.local_after, f.local_before);
          break;
      }
    }
  }

  // An operand held whole (or less sharded) where the result is sharded is sliced for free
  // in the forward; its cotangent arrives sharded like the result and is all-gathered back
  // (the dense paths' [B,S,E] routing weights, computed replicated by the scatter).
  void ElementwiseOperands(const OpRecord& op) {
    const int out = op.outputs.front();
    for (const int x : op.inputs) {
      if (g_.need[x] && !T(x).in_shard_map && T(x).shape != T(out).shape) BroadcastOperand(op, x);
      if (!g_.need[x] || T(x).shape != T(out).shape || T(x).in_shard_map) continue;
      const PartitionSpec from = Spec(out), to = Spec(x);
      if (from == to) continue;
      std::vector<ImpliedCollective> plan =
          PlanReshard(T(x).shape, T(x).dtype, ShardState{from, {}}, to, mesh_);
      plan.erase(std::remove_if(plan.begin(), plan.end(),
                                [](const ImpliedCollective& p) {
                                  return p.kind != CollectiveKind::kAllGather;
                                }),
                 plan.end());
      for (ImpliedCollective& p : plan) p.dtype = T(x).dtype;
      AddPlanned(op, x, plan,
                 fmt::format("cotangent of {} (read whole by {}) gathered back from the result's "
                             "sharding {}",
                             T(x).name, op.Name(), from.ToString()));
    }
  }

  // A broadcast operand's cotangent is the result's summed over the dims it lacks (or holds
  // once); where the result is sharded on those, each device sums its shard: partial sums,
  // all-reduced into the operand's sharding (the router's bias [E] added to batch-sharded
  // logits).
  void BroadcastOperand(const OpRecord& op, int x) {
    const int out = op.outputs.front();
    const std::string& dims = T(out).dims;
    const std::string& mine = T(x).dims;
    const PartitionSpec spec = Spec(out);
    const std::vector<std::string> own = Spec(x).UsedAxes();
    std::set<std::string> partial;
    for (size_t d = 0; d < dims.size() && d < spec.rank(); ++d) {
      const size_t at = mine.find(dims[d]);
      const bool summed = at == std::string::npos || (T(x).shape.size() == mine.size() &&
                                                      T(x).shape[at] == 1 && T(out).shape[d] > 1);
      if (!summed) continue;
      for (const std::string& a : spec[d])
        if (mesh_.Size(a) > 1 && std::find(own.begin(), own.end(), a) == own.end())
          partial.insert(a);
    }
    if (partial.empty()) return;
    const PartitionSpec to = Spec(x);
    std::vector<ImpliedCollective> plan = PlanReshard(
        T(x).shape, T(x).dtype,
        ShardState{to, std::vector<std::string>(partial.begin(), partial.end())}, to, mesh_);
    for (ImpliedCollective& p : plan) p.dtype = T(x).dtype;
    AddPlanned(op, g_.CastSource(x), plan,
               fmt::format("gradient of {}: broadcast over dims the result {} shards on {}, "
                           "its cotangent summed there holds partial sums",
                           T(g_.CastSource(x)).name, T(out).name, fmt::join(partial, ", ")));
  }

  // GSPMD computes the dense paths' weights scatter replicated (the forward gathers its
  // updates whole), so its transpose, a gather of the cotangent at the same indices, reads the
  // output's cotangent whole: an all-gather from the output's sharding.
  void ScatterCotangent(const OpRecord& op) {
    bool replicated = false;
    for (const ImpliedCollective& f : spmd_.implied_at(op.id))
      replicated |= f.kind == CollectiveKind::kAllGather;
    const int out = op.outputs.front();
    if (!replicated || op.inputs.size() < 3 || !g_.need[op.inputs[2]]) return;
    std::vector<ImpliedCollective> plan =
        PlanReshard(T(out).shape, T(out).dtype, ShardState{Spec(out), {}},
                    PartitionSpec::Replicated(T(out).shape.size()), mesh_);
    for (ImpliedCollective& p : plan) p.dtype = T(out).dtype;
    AddPlanned(op, out, plan,
               fmt::format("cotangent of {} read whole by the scatter's transpose (GSPMD "
                           "computes the scatter replicated)",
                           T(out).name));
  }

  // all_gather <-> psum_scatter, psum -> psum (check_vma=False), ragged_all_to_all with the
  // send and receive sizes swapped.
  void WrittenTranspose(const OpRecord& op) {
    const CollectiveRecord& w = *op.collective;
    const int data = op.inputs.empty() ? -1 : op.inputs.front();
    if (data < 0 || !g_.need[data]) return;
    StepCollective c;
    c.kind = Transposed(w.kind);
    c.written = true;
    c.forward_op = op.id;
    c.tensor = data;
    c.axes = w.axes;
    c.participants = w.participants;
    c.dtype = T(data).dtype;
    const std::vector<int64_t>& sent =
        w.kind == CollectiveKind::kRaggedAllToAll ? w.bytes_received : w.bytes_sent;
    c.bytes_per_device = sent.empty() ? 0 : *std::max_element(sent.begin(), sent.end());
    c.reason = fmt::format("transpose of {} over {}", ToString(w.kind), fmt::join(w.axes, ", "));
    Shape in = T(op.outputs.front()).shape, out = T(data).shape;
    const int64_t peers = c.participants;
    const std::vector<std::string> axes = c.axes;
    Add(std::move(c), in, out);
    // JAX's transpose of ragged_all_to_all first exchanges the offsets (input and output
    // offsets, int32[peers] each) with two all-to-alls, then sends the rows back.
    if (w.kind != CollectiveKind::kRaggedAllToAll) return;
    for (const char* which : {"input", "output"}) {
      StepCollective o;
      o.kind = CollectiveKind::kAllToAll;
      o.written = true;
      o.forward_op = op.id;
      o.tensor = data;
      o.axes = axes;
      o.participants = peers;
      o.dtype = DType::kInt32;
      o.bytes_per_device = 4 * (peers - 1);
      o.reason = fmt::format("{} offsets of the transposed ragged_all_to_all", which);
      Add(std::move(o), {peers}, {peers});
    }
  }

  // The mesh axes sharding `letters` in a value with dims `dims` and sharding `spec`.
  void AxesOf(const std::string& dims, const PartitionSpec& spec, const std::string& letters,
              std::set<std::string>& axes) const {
    for (size_t d = 0; d < dims.size() && d < spec.rank(); ++d)
      if (letters.find(dims[d]) != std::string::npos)
        for (const std::string& a : spec[d])
          if (mesh_.Size(a) > 1) axes.insert(a);
  }

  // The sharding operand `id` is computed in at einsum `op`: where the forward moved it
  // ("einsum operand"), else its own.
  PartitionSpec ComputedSpec(const OpRecord& op, int id) const {
    if (const auto it = step_read_.find({op.id, id}); it != step_read_.end()) return it->second;
    std::optional<PartitionSpec> to;
    auto moved = [&](const ImpliedCollective& f) {
      return f.reason == "einsum operand" && (f.tensor == id || f.tensor == g_.CastSource(id));
    };
    for (const ImpliedCollective& f : spmd_.implied_at(op.id))
      if (moved(f)) to = f.to;
    // An earlier einsum's moved copy XLA's CSE shares with this one (the forward records the
    // collective once, at its first reader).
    for (int p = 0; !to && p < op.id; ++p)
      for (const ImpliedCollective& f : spmd_.implied_at(p))
        if (moved(f) && f.last_reader_op >= op.id) to = f.to;
    return WithRank(to ? *to : Spec(id), T(id).shape.size());
  }

  // d_a = einsum(d_out, b) contracts the letters of b and out that a lacks; where those are
  // sharded the gradient holds partial sums, reduced into a's own sharding: a reduce-scatter
  // over the axes the forward gathered a on (a weight's FSDP axes), an all-reduce over axes
  // a is replicated on (the batch axes for a weight, the expert axis for the input of an
  // expert-sharded einsum).
  void EinsumOperands(const OpRecord& op) {
    const ParsedEinsum& eq = *op.einsum;
    const int out = op.outputs.front();
    for (size_t k = 0; k < 2; ++k) {
      const int x = op.inputs[k], other = op.inputs[1 - k];
      if (!g_.need[x]) continue;
      const std::string& mine = eq.operands[k];
      std::string letters;
      for (const char c : eq.operands[1 - k] + eq.output)
        if (mine.find(c) == std::string::npos && letters.find(c) == std::string::npos) letters += c;
      std::set<std::string> partial;
      AxesOf(eq.operands[1 - k], ComputedSpec(op, other), letters, partial);
      AxesOf(eq.output, Spec(out), letters, partial);
      const PartitionSpec own = Spec(x);
      // The gradient comes out sharded like the operand was computed, and also on a dim
      // whose letter the other operand or the output shards (the forward sliced the operand
      // there: GSPMD slices freely, so no record holds it; the gate kernel's M under tensor
      // parallelism), less the axes that hold partial sums.
      std::vector<PartitionSpec::Entry> entries = ComputedSpec(op, x).entries();
      std::set<std::string> used;
      for (const auto& e : entries) used.insert(e.begin(), e.end());
      for (size_t d = 0; d < entries.size() && d < mine.size(); ++d) {
        if (!entries[d].empty()) continue;
        std::set<std::string> on;
        AxesOf(eq.operands[1 - k], ComputedSpec(op, other), std::string(1, mine[d]), on);
        AxesOf(eq.output, Spec(out), std::string(1, mine[d]), on);
        for (const std::string& a : on)
          if (!used.count(a) && !partial.count(a)) {
            entries[d].push_back(a);
            used.insert(a);
          }
      }
      const PartitionSpec computed(entries);
      // Mesh axes the computed copy already shards cannot hold partial sums of it.
      for (const std::string& a : computed.UsedAxes()) partial.erase(a);
      if (partial.empty() && computed == own) continue;
      const ShardState from{computed, std::vector<std::string>(partial.begin(), partial.end())};
      const int named = g_.CastSource(x);
      const bool weight = T(named).kind == TensorKind::kWeight;
      std::vector<ImpliedCollective> plan =
          PlanReshard(T(x).shape, T(x).dtype, from, own, mesh_, /*regroup=*/true);
      for (ImpliedCollective& p : plan) p.dtype = T(x).dtype;
      const std::string why =
          weight ? fmt::format(
                       "gradient of {}: the contraction over the batch leaves partial "
                       "sums, reduced into its sharding {}",
                       T(named).name, own.ToString())
                 : fmt::format("gradient of {}: partial sums over '{}' reduced into {}", T(x).name,
                               letters, own.ToString());
      AddPlanned(op, named, plan, why);
    }
  }

  // shard_map's transpose (check_vma=False) psums an input's cotangent over the mesh axes
  // its in_spec leaves out; the forward's gather into the in_spec then transposes to a slice
  // of the summed block, which TPU's XLA fuses with the all-reduce into a reduce-scatter
  // (XLA:CPU keeps the all-reduce and slices). A forward slice into the in_spec transposes
  // to an all-gather, an all-to-all to the reverse all-to-all.
  void ShardMapIn(const OpRecord& op) {
    const int x = op.inputs.front(), inner = op.outputs.front();
    if (!g_.need[x]) return;
    const PartitionSpec& in_spec = *T(inner).partition_spec;
    const std::vector<std::string> used = in_spec.UsedAxes();
    std::vector<std::string> unmentioned, gathered;
    for (const MeshAxis& a : mesh_.axes())
      if (a.size > 1 && std::find(used.begin(), used.end(), a.name) == used.end())
        unmentioned.push_back(a.name);
    const std::vector<ImpliedCollective>& fwd = spmd_.implied_at(op.id);
    for (const ImpliedCollective& f : fwd)
      if (f.kind == CollectiveKind::kAllGather)
        gathered.insert(gathered.end(), f.axes.begin(), f.axes.end());
    // A weight constrained to the in_spec first (the sparse path's kernels, gathered over
    // fsdp at _maybe_shard_with_pspec): those gathers are sliced back after the psum too.
    Shape scattered = T(inner).shape;
    for (int v = x; g_.producer[v] >= 0;) {
      const OpRecord& p = trace_.ops[g_.producer[v]];
      if (p.kind != OpKind::kShardingConstraint && p.kind != OpKind::kAstype) break;
      for (const ImpliedCollective& f : spmd_.implied_at(p.id))
        if (f.kind == CollectiveKind::kAllGather) {
          gathered.insert(gathered.end(), f.axes.begin(), f.axes.end());
          scattered = f.local_before;
        }
      v = p.inputs.front();
    }
    const DType dtype = T(x).dtype;
    const Shape block = T(inner).shape;
    const std::string name = T(g_.CastSource(x)).name;
    if (!unmentioned.empty()) {
      std::vector<std::string> rest;
      for (const std::string& a : unmentioned)
        if (std::find(gathered.begin(), gathered.end(), a) == gathered.end()) rest.push_back(a);
      const int64_t n_all = mesh_.Size(unmentioned);
      StepCollective cpu_view;
      cpu_view.kind = CollectiveKind::kPsum;
      cpu_view.dtype = dtype;
      cpu_view.participants = n_all;
      cpu_view.written = true;
      SetXlaCpu(cpu_view, block, block);
      bool first = true;
      auto emit = [&](CollectiveKind kind, const std::vector<std::string>& axes,
                      const Shape& before, const Shape& after, const std::string& why) {
        StepCollective c;
        c.kind = kind;
        c.written = true;
        c.forward_op = op.id;
        c.tensor = g_.CastSource(x);
        c.axes = axes;
        c.participants = mesh_.Size(axes);
        c.dtype = dtype;
        const int64_t n = c.participants;
        const int64_t bytes = TensorBytes(before, dtype);
        c.bytes_per_device =
            kind == CollectiveKind::kPsum ? 2 * bytes * (n - 1) / n : bytes * (n - 1) / n;
        c.reason = why;
        if (first) {
          c.xla_cpu_op = cpu_view.xla_cpu_op;
          c.xla_cpu_bytes_per_device = cpu_view.xla_cpu_bytes_per_device;
          c.xla_cpu_result_bytes = cpu_view.xla_cpu_result_bytes;
        } else {
          c.xla_cpu_op = "-";  // the same XLA:CPU all-reduce as the one before
        }
        first = false;
        Add(std::move(c), before, after);
      };
      const std::string psum = fmt::format(
          "shard_map transpose: psum of {}'s cotangent over {} (axes its in_spec {} leaves out)",
          name, fmt::join(unmentioned, ", "), in_spec.ToString());
      if (!gathered.empty()) {
        for (const ImpliedCollective& f : fwd)
          if (f.kind == CollectiveKind::kAllGather) scattered = f.local_before;
        emit(CollectiveKind::kPsumScatter, gathered, block, scattered,
             psum + fmt::format(", sliced back to the {} shards the forward gathered: a "
                                "reduce-scatter on TPU (XLA:CPU: all-reduce + slice)",
                                fmt::join(gathered, ", ")));
      }
      if (!rest.empty())
        emit(CollectiveKind::kPsum, rest, scattered, scattered,
             gathered.empty() ? psum : psum + " (the rest of it: an all-reduce)");
    }
    for (const ImpliedCollective& f : fwd) {
      if (f.kind == CollectiveKind::kAllGather) continue;
      StepCollective c;
      c.forward_op = op.id;
      c.tensor = g_.CastSource(x);
      c.axes = f.axes;
      c.participants = f.participants;
      c.dtype = f.dtype;
      if (f.kind == CollectiveKind::kSlice) {
        c.kind = CollectiveKind::kAllGather;
        c.bytes_per_device = TensorBytes(f.local_after, f.dtype) * (f.participants - 1);
        c.reason = "transpose of the slice into shard_map's in_specs";
      } else {
        c.kind = f.kind;
        c.bytes_per_device = f.bytes_per_device;
        c.reason =
            fmt::format("transpose of the forward's {} into shard_map's in_specs", HloName(f.kind));
      }
      Add(std::move(c), f.local_after, f.local_before);
    }
  }

  PartitionSpec CtSpec(int id) const {
    const auto it = ct_.find(id);
    return it != ct_.end() ? it->second : Spec(id);
  }

  PartitionSpec Effective(const PartitionSpec& s) const { return EffectiveSpec(s, mesh_); }

  // Some output's cotangent arrives in another sharding than the output's.
  bool Diverged(const OpRecord& op) const {
    for (const int o : op.outputs)
      if (ct_.count(o) && Effective(ct_.at(o)) != Effective(Spec(o))) return true;
    return false;
  }

  // The block output's cotangent is sharded like the block input (docs/step.md). Where the
  // forward leaves an einsum's output in another sharding, the step computes that einsum
  // toward the cotangent's sharding (StepOutputRead).
  void SeedOutputCotangent() {
    const int out = trace_.output, in = trace_.input;
    if (out < 0 || in < 0 || !g_.need[out] || T(out).shape != T(in).shape) return;
    const PartitionSpec want = Effective(Spec(in));
    if (want == Effective(Spec(out))) return;
    int v = out;
    while (g_.producer[v] >= 0 && Aliases(trace_.ops[g_.producer[v]]))
      v = trace_.ops[g_.producer[v]].inputs.front();
    if (g_.producer[v] < 0) return;
    const OpRecord& op = trace_.ops[g_.producer[v]];
    if (op.kind != OpKind::kEinsum || !op.einsum || op.inputs.size() != 2 ||
        T(op.outputs.front()).in_shard_map || T(v).shape.size() != want.rank())
      return;
    for (int w = out;; w = trace_.ops[g_.producer[w]].inputs.front()) {
      ct_[w] = want;
      if (w == v) break;
    }
    for (size_t k = 0; k < 2; ++k)
      step_read_[{op.id, op.inputs[k]}] =
          StepOutputRead(*op.einsum, k, ComputedSpec(op, op.inputs[k]), want);
  }

  // A reshard the backward needs, once per buffer (`tensor`'s value, its cotangent, or what
  // `tag` names that has its shape), source and target (XLA's CSE).
  void Move(const OpRecord& op, int tensor, bool cotangent, const ShardState& from,
            const PartitionSpec& to, const std::string& why, const std::string& tag = "") {
    const std::string key =
        fmt::format("{}{}{}:{}{}->{}", cotangent ? "d" : "", tag, tensor, from.spec.ToString(),
                    fmt::join(from.partial, ","), to.ToString());
    if (!moved_.insert(key).second) return;
    std::vector<ImpliedCollective> plan =
        PlanReshard(T(tensor).shape, T(tensor).dtype, from, to, mesh_);
    for (ImpliedCollective& p : plan) {
      p.dtype = T(tensor).dtype;
      if (p.kind != CollectiveKind::kSlice)
        moved_bytes_[op.id] += TensorBytes(p.local_after, p.dtype);
    }
    const size_t before = result_.backward.size();
    AddPlanned(op, g_.CastSource(tensor), plan, why);
    // A parameter, or the block output's cotangent (the step's argument), gathered whole.
    const bool argument =
        from.partial.empty() &&
        (cotangent ? g_.root[tensor] == g_.root[trace_.output] : g_.IsArgument(tensor));
    for (size_t i = before; i < result_.backward.size(); ++i)
      result_.backward[i].argument = argument;
  }

  // Whether `id`'s cotangent is pinned to its own sharding: a parameter's gradient (the step's
  // out_shardings), the block input's, a sharding constraint's output.
  bool Pinned(int id) const {
    if (g_.IsArgument(id) || T(g_.CastSource(id)).kind == TensorKind::kWeight) return true;
    const int p = g_.producer[id];
    return p >= 0 && trace_.ops[p].kind == OpKind::kShardingConstraint;
  }

  // The VJP of `op` whose output cotangent arrived in another sharding: einsums, products and
  // activations computed where Shardy puts them (spmd/step_cotangent.h), with the reshards
  // that takes. False for any other op (its VJP is taken in the forward's shardings).
  bool DivergedBackward(const OpRecord& op) {
    const int out = op.outputs.front();
    const PartitionSpec ct = CtSpec(out);
    if (op.kind == OpKind::kEinsum && op.einsum && op.inputs.size() == 2 && !T(out).in_shard_map) {
      const ParsedEinsum& eq = *op.einsum;
      for (size_t k = 0; k < 2; ++k) {
        const int x = op.inputs[k], other = op.inputs[1 - k];
        if (!g_.need[x]) continue;
        const CotangentEinsumPlan plan = PlanCotangentEinsum(
            {eq.output, T(out).shape, ct},
            {eq.operands[1 - k], T(other).shape, ComputedSpec(op, other)}, eq.operands[k], mesh_);
        const std::string name = T(g_.CastSource(x)).name;
        Move(op, out, true, {ct, {}}, plan.d_out,
             fmt::format("cotangent of {} moved to compute {}'s where Shardy puts it", T(out).name,
                         name));
        Move(op, other, false, {ComputedSpec(op, other), {}}, plan.other,
             fmt::format("{} read as the transposed einsum computing {}'s cotangent needs it",
                         T(g_.CastSource(other)).name, name));
        const PartitionSpec own = Spec(x);
        const PartitionSpec to = Pinned(x) ? own : plan.result;
        if (!plan.partial.empty() || to != plan.result)
          Move(op, x, true, {plan.result, plan.partial}, to,
               fmt::format("gradient of {}: computed {} with partial sums over {}, reduced into {}",
                           name, plan.result.ToString(), fmt::join(plan.partial, ", "),
                           to.ToString()));
        if (!Pinned(x)) ct_[x] = to;
      }
      return true;
    }
    if (op.kind == OpKind::kMul && op.inputs.size() == 2 && T(op.inputs[0]).shape == T(out).shape &&
        T(op.inputs[1]).shape == T(out).shape && !T(out).in_shard_map) {
      // ct_a = ct * b, ct_b = a * ct (JAX's transpose of mul): the first operand's sharding
      // unless the second is more sharded.
      for (size_t k = 0; k < 2; ++k) {
        const int x = op.inputs[k], other = op.inputs[1 - k];
        if (!g_.need[x]) continue;
        const PartitionSpec first = k == 0 ? ct : Spec(other);
        const PartitionSpec second = k == 0 ? Spec(other) : ct;
        const PartitionSpec at = ElementwiseSharding(first, second, mesh_);
        Move(op, out, true, {ct, {}}, at,
             fmt::format("cotangent of {} moved to {} for {}'s cotangent", T(out).name,
                         at.ToString(), T(x).name));
        Move(op, other, false, {Spec(other), {}}, at,
             fmt::format("{} moved to {} for {}'s cotangent", T(other).name, at.ToString(),
                         T(x).name));
        if (!Pinned(x)) ct_[x] = at;
      }
      return true;
    }
    if (op.kind == OpKind::kActivation && op.inputs.size() == 1 && !T(out).in_shard_map &&
        T(op.inputs[0]).shape == T(out).shape) {
      // ct * f'(x), f'(x) computed where x is. JAX writes silu(x) as x * sigmoid(x), whose VJP
      // is ct * sigmoid(x) + (x * ct) * sigmoid'(x); each product and the sum are computed
      // where Shardy puts their first operand (ElementwiseSharding).
      const int x = op.inputs.front();
      const PartitionSpec own = Spec(x);
      const std::string& f = op.function;
      const PartitionSpec t1 = ElementwiseSharding(ct, own, mesh_);
      Move(op, out, true, {ct, {}}, t1,
           fmt::format("cotangent of {} moved to {} for ct * {}'(x)", T(out).name, t1.ToString(),
                       f));
      Move(op, x, false, {own, {}}, t1,
           fmt::format("{}'s derivative at {} moved to {}", f, T(x).name, t1.ToString()), "f'");
      PartitionSpec at = t1;
      if (f == "silu") {
        const PartitionSpec t2 = ElementwiseSharding(own, ct, mesh_);
        const PartitionSpec t3 = ElementwiseSharding(t2, own, mesh_);
        at = ElementwiseSharding(t1, t3, mesh_);
        Move(op, x, false, {own, {}}, t2,
             fmt::format("{} moved to {} for x * ct in silu's VJP", T(x).name, t2.ToString()));
        Move(op, out, true, {ct, {}}, t2,
             fmt::format("cotangent of {} moved to {} for x * ct in silu's VJP", T(out).name,
                         t2.ToString()));
        Move(op, x, false, {own, {}}, t3,
             fmt::format("sigmoid'({}) moved to {} in silu's VJP", T(x).name, t3.ToString()),
             "sigmoid'");
        Move(op, x, true, {t2, {}}, t3,
             fmt::format("x * ct moved to {} in silu's VJP", t3.ToString()), "x*ct");
        Move(op, x, true, {t1, {}}, at,
             fmt::format("silu's first VJP term moved to {}", at.ToString()), "term1");
        Move(op, x, true, {t3, {}}, at,
             fmt::format("silu's second VJP term moved to {}", at.ToString()), "term2");
      }
      if (!Pinned(x)) ct_[x] = at;
      return true;
    }
    return false;
  }

  void Memory() {
    run_again_ = PlanStepMemory(g_, result_.policy, result_.memory, moved_bytes_).run_again;
  }

  // Forward collectives the backward runs again (StepMemoryPlan::run_again).
  void Recompute() {
    if (!result_.policy.wrapped) return;
    for (const OpRecord& op : trace_.ops) {
      if (!run_again_[op.id]) continue;
      if (op.collective) {
        const CollectiveRecord& w = *op.collective;
        StepCollective c;
        c.kind = w.kind;
        c.written = true;
        c.recompute = true;
        c.forward_op = op.id;
        c.tensor = op.inputs.empty() ? -1 : op.inputs.front();
        c.axes = w.axes;
        c.participants = w.participants;
        c.dtype = c.tensor >= 0 ? T(c.tensor).dtype : DType::kFloat32;
        c.bytes_per_device =
            w.bytes_sent.empty() ? 0 : *std::max_element(w.bytes_sent.begin(), w.bytes_sent.end());
        c.reason = "forward collective run again (remat)";
        const Shape in = c.tensor >= 0 ? T(c.tensor).shape : Shape{};
        Add(std::move(c), in, T(op.outputs.front()).shape);
        again_.push_back(std::move(result_.backward.back()));
        result_.backward.pop_back();
      }
      for (const ImpliedCollective& f : spmd_.implied_at(op.id)) {
        if (f.kind == CollectiveKind::kSlice) continue;
        StepCollective c;
        c.kind = f.kind;
        c.recompute = true;
        c.forward_op = op.id;
        c.tensor = f.tensor;
        c.axes = f.axes;
        c.participants = f.participants;
        c.dtype = f.dtype;
        c.bytes_per_device = f.bytes_per_device;
        c.reason = fmt::format("forward {} run again (remat)", f.reason);
        Add(std::move(c), f.local_before, f.local_after);
        again_.push_back(std::move(result_.backward.back()));
        result_.backward.pop_back();
      }
    }
    // The layer's backward starts by recomputing its forward.
    result_.backward.insert(result_.backward.begin(), std::make_move_iterator(again_.begin()),
                            std::make_move_iterator(again_.end()));
  }

  const Mesh& mesh_;
  const Trace& trace_;
  const SpmdResult& spmd_;
  StepGraph g_;
  StepResult result_;
  std::vector<bool> run_again_;        // by forward op: remat runs it again
  std::vector<StepCollective> again_;  // forward collectives remat runs again
  // Cotangents computed in another sharding than their value's (step_cotangent.h).
  std::map<int, PartitionSpec> ct_;
  // How the step's forward reads an einsum operand where it differs from the forward pass's.
  std::map<std::pair<int, int>, PartitionSpec> step_read_;
  std::set<std::string> moved_;         // reshards the backward already has
  std::map<int, int64_t> moved_bytes_;  // by forward op: the copies its VJP's reshards make
};

}  // namespace

StepResult AnalyzeStep(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
                       const RematPolicy& policy) {
  return StepAnalysis(mesh, trace, spmd, policy).Run();
}

}  // namespace shardtrace
