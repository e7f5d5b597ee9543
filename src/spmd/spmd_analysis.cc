#include "spmd/spmd_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "numeric/einsum.h"
#include "shard/sharding.h"
#include "spmd/all_reduce_combiner.h"
#include "spmd/spmd_einsum_sharding.h"
#include "spmd/spmd_memory_estimate.h"
#include "spmd/spmd_reshard.h"

namespace shardtrace {
namespace {

using Entry = PartitionSpec::Entry;
using Entries = std::vector<Entry>;

// How sharding flows through an op (ClassifyKind maps every OpKind).
enum class Rule {
  kArgument,     // param, input: no operands; parameters are explicit
  kSource,       // constants, zeros: placed by their users
  kElementwise,  // same shape as the (broadcast) operands; includes identities
  kConstraint,   // sharding_constraint: resharded to its spec
  kShardMapIn,   // resharded to the in_spec, then per-device blocks
  kShardMapOut,  // explicit out_spec
  kEinsum,
  kReshape,
  kReduce,    // sum/mean over `axis`
  kLastAxis,  // softmax, top_k, cumsum, argsort: the op axis must be whole on a device
  kLeading,   // index ops (one_hot, take_along_axis, slice): leading dims kept
  // x.at[(arange(B), arange(S), top_k_indices)].set(weights): GSPMD does not partition this
  // scatter along the batch, so its updates and index tuples are gathered whole and the
  // result is replicated (every sharded dense fixture's HLO: 'div' and 'concatenate').
  kScatter,
  kInShardMap,
};

const std::string* Attr(const OpRecord& op, const std::string& name) {
  for (const auto& [k, v] : op.attrs)
    if (k == name) return &v;
  return nullptr;
}

// The op's rule by kind alone (inside shard_map too, for fusion).
Rule ClassifyKind(const OpRecord& op, const Trace& trace) {
  switch (op.kind) {
    case OpKind::kShardMapIn:
      return Rule::kShardMapIn;
    case OpKind::kShardMapOut:
      return Rule::kShardMapOut;
    case OpKind::kAxisIndex:
    case OpKind::kAllGather:
    case OpKind::kPsum:
    case OpKind::kPsumScatter:
    case OpKind::kRaggedAllToAll:
      return Rule::kInShardMap;
    case OpKind::kParam:
    case OpKind::kInput:
      return Rule::kArgument;
    case OpKind::kConstant:
    case OpKind::kZeros:
    case OpKind::kEmpty:
    case OpKind::kRandomRandint:
      return Rule::kSource;
    case OpKind::kShardingConstraint:
      return Rule::kConstraint;
    case OpKind::kEinsum:
      return op.inputs.size() == 2 ? Rule::kEinsum : Rule::kLeading;
    case OpKind::kReshape:
      return Rule::kReshape;
    case OpKind::kSum:
    case OpKind::kMean:
      return Rule::kReduce;
    case OpKind::kScatterSet:
      return Rule::kScatter;
    case OpKind::kSoftmax:
    case OpKind::kTopK:
    case OpKind::kCumsum:
    case OpKind::kArgsort:
      return Rule::kLastAxis;
    case OpKind::kOneHot:
    case OpKind::kTakeAlongAxis:
    case OpKind::kTake:
    case OpKind::kSlice:
    case OpKind::kConcatenate:
    case OpKind::kDynamicSliceInDim:
    case OpKind::kIndex:
    case OpKind::kBincount:
    case OpKind::kRepeat:
    case OpKind::kTranspose:
    case OpKind::kGmm:
    case OpKind::kTransformArray:
      return Rule::kLeading;
    default:
      break;
  }
  if (op.inputs.empty()) return Rule::kSource;
  // Anything else that keeps the shape of an operand is elementwise (casts, activations,
  // arithmetic, checkpoint_name, optimization_barrier, where, clip, ones_like).
  const Shape& out = trace.tensors[op.outputs.front()].shape;
  for (const int in : op.inputs)
    if (trace.tensors[in].shape == out) return Rule::kElementwise;
  return Rule::kLeading;
}

Rule Classify(const OpRecord& op, const Trace& trace) {
  const Rule rule = ClassifyKind(op, trace);
  if (rule == Rule::kShardMapIn || rule == Rule::kShardMapOut) return rule;
  for (const int out : op.outputs)
    if (trace.tensors[out].in_shard_map) return Rule::kInShardMap;
  return rule;
}

// The reduced or op axis of kReduce/kLastAxis ops, non-negative.
int OpAxis(const OpRecord& op, const Shape& operand) {
  const std::string* a = Attr(op, "axis");
  int axis = a ? std::stoi(*a) : -1;
  if (axis < 0) axis += static_cast<int>(operand.size());
  return axis;
}

bool HasAxis(const Entries& entries, const std::string& axis) {
  for (const Entry& e : entries)
    if (std::find(e.begin(), e.end(), axis) != e.end()) return true;
  return false;
}

// Elementwise broadcasting: operand dim i aligns with output dim i + (out_rank - rank).
PartitionSpec AlignToOperand(const PartitionSpec& out_spec, const Shape& out_shape,
                             const Shape& operand) {
  Entries e(operand.size());
  // NumPy broadcasting aligns trailing dims; an operand the code expanded as x[..., None]
  // (the dropping masks' softmax_probs) is recorded without its new dim and aligns leading.
  size_t offset = out_shape.size() - operand.size();
  bool trailing = true, leading = true;
  for (size_t i = 0; i < operand.size(); ++i) {
    trailing &= operand[i] == 1 || operand[i] == out_shape[i + offset];
    leading &= operand[i] == out_shape[i];
  }
  if (!trailing && leading) offset = 0;
  for (size_t i = 0; i < operand.size(); ++i)
    if (operand[i] == out_shape[i + offset] && operand[i] > 1) e[i] = out_spec[i + offset];
  return PartitionSpec(e);
}

// Carries a sharding through a reshape: within each group of dims whose sizes multiply to
// the same product, the sharding of the group's major input dim moves to its major output
// dim when it divides it. `lost` gets the input spec with the axes that cannot be carried
// removed (XLA gathers them first).
PartitionSpec ReshapeSpec(const Shape& in, const Shape& out, const PartitionSpec& spec,
                          const Mesh& mesh, PartitionSpec* lost) {
  Entries result(out.size()), kept(in.size());
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    const size_t i0 = i, j0 = j;
    int64_t pi = i < in.size() ? in[i++] : 1, pj = j < out.size() ? out[j++] : 1;
    while (pi != pj) {
      if (pi < pj && i < in.size())
        pi *= in[i++];
      else if (j < out.size())
        pj *= out[j++];
      else
        break;
    }
    // Size-1 dims at the group's head do not shard; skip them on both sides.
    size_t mi = i0, mj = j0;
    while (mi + 1 < i && in[mi] == 1) ++mi;
    while (mj + 1 < j && out[mj] == 1) ++mj;
    bool minor_sharded = false;
    for (size_t d = mi + 1; d < i; ++d) minor_sharded |= mesh.Size(spec[d]) > 1;
    if (mi < i && mj < j && mesh.Size(spec[mi]) > 1 && out[mj] % mesh.Size(spec[mi]) == 0) {
      result[mj] = spec[mi];
      kept[mi] = spec[mi];
    }
    (void)minor_sharded;  // minor dims' sharding is gathered: left out of `kept`
  }
  if (lost) *lost = PartitionSpec(kept);
  return PartitionSpec(result);
}

enum class Source { kNone, kExplicit, kArgument, kForward, kBackward };

class Analysis {
 public:
  Analysis(const Mesh& mesh, const Trace& trace, const std::optional<PartitionSpec>& input_arrival)
      : mesh_(mesh),
        trace_(trace),
        spec_(trace.tensors.size()),
        source_(trace.tensors.size(), Source::kNone),
        consumers_(trace.tensors.size()),
        producer_(trace.tensors.size(), -1) {
    result_.implied.resize(trace.ops.size());
    for (const OpRecord& op : trace_.ops) {
      rules_.push_back(Classify(op, trace_));
      kind_rules_.push_back(ClassifyKind(op, trace_));
      for (const int in : op.inputs) consumers_[in].push_back(op.id);
      for (const int out : op.outputs) producer_[out] = op.id;
    }
    for (const TensorRecord& t : trace_.tensors)
      if (!t.in_shard_map && t.partition_spec) {
        spec_[t.id] = WithRank(*t.partition_spec, t.shape.size());
        source_[t.id] = Source::kExplicit;
      }
    const int input = trace_.input;
    if (input_arrival && input >= 0 && !T(input).in_shard_map && !T(input).partition_spec) {
      const Shape& shape = T(input).shape;
      Entries e = WithRank(*input_arrival, shape.size()).entries();
      for (size_t d = 0; d < e.size(); ++d)
        if (shape[d] % mesh_.Size(e[d]) != 0) e[d].clear();
      spec_[input] = PartitionSpec(e);
      source_[input] = Source::kArgument;
    }
  }

  SpmdResult Run() && {
    // Strict forward sweeps (every operand placed) and backward sweeps to a fixed point;
    // only then may ops with some operands unplaced propagate (counting those replicated),
    // so a constraint downstream outranks a guess from half the operands.
    for (int round = 0; round < 16; ++round) {
      bool changed = false;
      for (int inner = 0; inner < 16; ++inner) {
        bool step = Forward(/*partial=*/false);
        step |= Backward();
        changed |= step;
        if (!step) break;
      }
      if (!Forward(/*partial=*/true) && !changed) break;
    }
    Implied();
    CombineAllReduces(trace_, result_.implied);
    Record();
    result_.memory = EstimateMemory(trace_, result_, Fused());
    return std::move(result_);
  }

 private:
  const TensorRecord& T(int id) const { return trace_.tensors[id]; }
  bool Known(int id) const { return spec_[id].has_value(); }

  // The spec every reader of `id` constrains it to, if all readers are one such constraint
  // spec: GSPMD propagates it back into the op that writes `id`.
  std::optional<PartitionSpec> ConstrainedBy(int id) const {
    std::optional<PartitionSpec> spec;
    for (const int c : consumers_[id]) {
      if (rules_[c] != Rule::kConstraint) return std::nullopt;
      const PartitionSpec s =
          WithRank(*T(trace_.ops[c].outputs[0]).partition_spec, T(id).shape.size());
      if (spec && *spec != s) return std::nullopt;
      spec = s;
    }
    return spec;
  }

  EinsumPlan Plan(const OpRecord& op) const {
    const int a = op.inputs[0], b = op.inputs[1], o = op.outputs[0];
    return PlanEinsum(ParseEinsum(op.equation), {T(a).shape, T(b).shape}, {T(a).dtype, T(b).dtype},
                      {State(a).spec, State(b).spec}, T(o).dtype, mesh_, ConstrainedBy(o));
  }

  // Output specs from operand specs, or nullopt while an operand is unplaced.
  std::optional<std::vector<PartitionSpec>> ForwardSpecs(const OpRecord& op, Rule rule,
                                                         bool partial) const {
    // With `partial`, operands not placed yet count as replicated as long as one operand
    // is placed: XLA propagates from what it knows.
    bool any = false, all = true;
    for (const int in : op.inputs) {
      any |= Known(in);
      all &= Known(in);
    }
    if (!(partial ? any : all)) return std::nullopt;
    const TensorRecord& out = T(op.outputs.front());
    switch (rule) {
      case Rule::kElementwise: {
        // The largest placed operand of the output's shape leads; others follow it.
        int lead = -1;
        for (const int in : op.inputs)
          if (T(in).shape == out.shape && Known(in) &&
              (lead < 0 ||
               TensorBytes(T(in).shape, T(in).dtype) > TensorBytes(T(lead).shape, T(lead).dtype)))
            lead = in;
        if (lead < 0) return std::nullopt;
        return std::vector<PartitionSpec>(op.outputs.size(), *spec_[lead]);
      }
      case Rule::kEinsum: {
        return std::vector<PartitionSpec>{Plan(op).output};
      }
      case Rule::kReshape:
        return std::vector<PartitionSpec>{ReshapeSpec(T(op.inputs[0]).shape, out.shape,
                                                      State(op.inputs[0]).spec, mesh_, nullptr)};
      case Rule::kReduce: {
        const Shape& in = T(op.inputs[0]).shape;
        const int axis = OpAxis(op, in);
        Entries e = State(op.inputs[0]).spec.entries();
        if (out.shape.size() == in.size())
          e[axis].clear();
        else if (out.shape.size() + 1 == in.size())
          e.erase(e.begin() + axis);
        else  // a reduction over several axes (to a scalar loss): the result is replicated
          e.assign(out.shape.size(), Entry{});
        return std::vector<PartitionSpec>{PartitionSpec(e)};
      }
      case Rule::kLastAxis: {
        const Shape& in = T(op.inputs[0]).shape;
        const int axis = OpAxis(op, in);
        std::vector<PartitionSpec> outs;
        for (const int o : op.outputs) {
          Entries e = WithRank(State(op.inputs[0]).spec, T(o).shape.size()).entries();
          if (axis < static_cast<int>(e.size())) e[axis].clear();
          outs.emplace_back(e);
        }
        return outs;
      }
      case Rule::kLeading: {
        // x[e] (one slice of the leading dim): the other dims keep their sharding.
        if (IsLeadingIndex(op)) {
          const Entries in = State(op.inputs[0]).spec.entries();
          return std::vector<PartitionSpec>{PartitionSpec(Entries(in.begin() + 1, in.end()))};
        }
        std::vector<PartitionSpec> outs;
        for (const int o : op.outputs) outs.push_back(LeadingSpec(op, T(o).shape));
        return outs;
      }
      case Rule::kScatter:
        // Its updates and index tuples are gathered whole, so each device can write any block:
        // the result takes the sharding its reader asks for (the combine einsum's E in
        // dropless, the batch of the dropping masks), replicated only if none does.
        if (!partial || !consumers_[op.outputs.front()].empty()) return std::nullopt;
        return std::vector<PartitionSpec>{PartitionSpec(Entries(out.shape.size()))};
      default:
        return std::nullopt;
    }
  }

  // x[e]: one static index into the leading dim, the other dims whole.
  bool IsLeadingIndex(const OpRecord& op) const {
    if (op.kind != OpKind::kIndex || op.inputs.size() != 1 || op.outputs.size() != 1) return false;
    const Shape& in = T(op.inputs[0]).shape;
    const Shape& out = T(op.outputs[0]).shape;
    return in.size() == out.size() + 1 && std::equal(out.begin(), out.end(), in.begin() + 1);
  }

  // Leading dims (all but the last) from the first operand that has them at that size.
  PartitionSpec LeadingSpec(const OpRecord& op, const Shape& out) const {
    Entries e(out.size());
    Entries used;
    for (size_t d = 0; d + 1 < out.size(); ++d)
      for (const int in : op.inputs) {
        const TensorRecord& t = T(in);
        if (d >= t.shape.size() || t.shape[d] != out[d] || !Known(in)) continue;
        const Entry& cand = (*spec_[in])[d];
        bool free = true;
        for (const std::string& a : cand) free &= !HasAxis(used, a);
        if (!cand.empty() && free) {
          e[d] = cand;
          used.push_back(cand);
          break;
        }
      }
    return PartitionSpec(e);
  }

  // A partial sweep only places outputs nothing placed yet.
  bool Forward(bool partial) {
    bool changed = false;
    for (const OpRecord& op : trace_.ops) {
      const Rule rule = rules_[op.id];
      if (rule == Rule::kInShardMap || op.outputs.empty()) continue;
      const auto specs = ForwardSpecs(op, rule, partial);
      if (!specs) continue;
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        const int o = op.outputs[k];
        if (source_[o] == Source::kExplicit || T(o).in_shard_map) continue;
        if (partial && Known(o)) continue;
        if (source_[o] != Source::kForward || spec_[o] != (*specs)[k]) {
          spec_[o] = (*specs)[k];
          source_[o] = Source::kForward;
          changed = true;
        }
      }
    }
    return changed;
  }

  // What op needs of its operand `k`, from its (placed) output.
  std::optional<PartitionSpec> BackwardSpec(const OpRecord& op, Rule rule, size_t k) const {
    const int in = op.inputs[k];
    const TensorRecord& t = T(in);
    const int o = op.outputs.empty() ? -1 : op.outputs.front();
    if (rule == Rule::kShardMapIn || rule == Rule::kConstraint)
      return WithRank(*T(o).partition_spec, t.shape.size());
    if (o < 0 || !Known(o)) return std::nullopt;
    const PartitionSpec& os = *spec_[o];
    switch (rule) {
      case Rule::kElementwise:
        return AlignToOperand(os, T(o).shape, t.shape);
      case Rule::kReshape:
        return ReshapeSpec(T(o).shape, t.shape, os, mesh_, nullptr);
      case Rule::kReduce: {
        Entries e = os.entries();
        const int axis = OpAxis(op, t.shape);
        if (e.size() < t.shape.size()) e.insert(e.begin() + axis, Entry{});
        e[axis].clear();
        return PartitionSpec(e);
      }
      case Rule::kScatter:  // unpartitioned: every operand whole
        return PartitionSpec(Entries(t.shape.size()));
      case Rule::kLastAxis:
      case Rule::kLeading: {
        Entries e(t.shape.size());
        for (size_t d = 0; d + 1 < t.shape.size() && d < T(o).shape.size(); ++d)
          if (t.shape[d] == T(o).shape[d]) e[d] = os[d];
        return PartitionSpec(e);
      }
      case Rule::kEinsum: {
        const ParsedEinsum eq = ParseEinsum(op.equation);
        const std::string& letters = eq.operands[k];
        const int other = op.inputs[1 - k];
        Entries e(letters.size());
        Entries used;
        for (size_t d = 0; d < letters.size(); ++d) {
          const size_t p = eq.output.find(letters[d]);
          if (p != std::string::npos) {
            e[d] = os[p];
            used.push_back(e[d]);
          }
        }
        // Contracted dims follow the other operand when its axes are still free.
        if (Known(other))
          for (size_t d = 0; d < letters.size(); ++d) {
            const size_t q = eq.operands[1 - k].find(letters[d]);
            if (eq.output.find(letters[d]) != std::string::npos || q == std::string::npos) continue;
            const Entry& cand = (*spec_[other])[q];
            bool free = true;
            for (const std::string& a : cand) free &= !HasAxis(used, a);
            if (free) e[d] = cand;
          }
        return PartitionSpec(e);
      }
      default:
        return std::nullopt;
    }
  }

  bool Backward() {
    bool changed = false;
    for (auto it = trace_.ops.rbegin(); it != trace_.ops.rend(); ++it) {
      const OpRecord& op = *it;
      const Rule rule = rules_[op.id];
      if (rule == Rule::kInShardMap || rule == Rule::kShardMapOut) continue;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const int in = op.inputs[k];
        if (Known(in) || T(in).in_shard_map) continue;
        const auto s = BackwardSpec(op, rule, k);
        if (!s) continue;
        spec_[in] = *s;
        source_[in] = Source::kBackward;
        changed = true;
      }
    }
    return changed;
  }

  ShardState State(int id) const {
    return {spec_[id] ? WithRank(*spec_[id], T(id).shape.size())
                      : PartitionSpec::Replicated(T(id).shape.size()),
            partial_.empty() ? std::vector<std::string>{} : partial_[id]};
  }

  // Records the collectives taking tensor `id` to `to` at `op`, named after `named` (a
  // weight or value `id` is a cast copy of; default `id`).
  void Reshard(const OpRecord& op, int id, const PartitionSpec& to, const std::string& reason,
               bool keep_slices, int named = -1) {
    // What moves is `id` as the op reads it: a weight cast to the compute dtype is gathered
    // after the cast (the convert is elementwise on the sharded parameter), in bfloat16 on
    // TPU; XLA:CPU widens it to float32 first (XlaCpuCollectiveDType). The collective is
    // listed under the weight's own name.
    if (named < 0) named = CastWeightSource(id);
    const TensorRecord& t = T(id);
    // The same tensor moved the same way twice (the shared expert's wi_0 and wi_1 reading one
    // input) is one collective: XLA's CSE keeps the first and both ops read its result.
    const ShardState from = State(id);
    const std::tuple<int, std::string, std::string> key = {id, from.spec.ToString(),
                                                           WithRank(to, t.shape.size()).ToString()};
    if (from.partial.empty()) {
      const auto seen = resharded_.find(key);
      if (seen != resharded_.end()) {
        for (const size_t k : seen->second.second)
          result_.implied[seen->second.first][k].last_reader_op = op.id;
        return;
      }
    }
    std::vector<size_t> added;
    for (ImpliedCollective c : PlanReshard(t.shape, t.dtype, from, to, mesh_)) {
      if (c.kind == CollectiveKind::kSlice && !keep_slices) continue;
      c.tensor = named;
      c.reason = reason;
      SetDType(c, t.dtype);
      added.push_back(result_.implied[op.id].size());
      result_.implied[op.id].push_back(std::move(c));
    }
    if (from.partial.empty()) resharded_[key] = {op.id, added};
  }

  static void SetDType(ImpliedCollective& c, DType dtype) {
    c.dtype = dtype;
    c.xla_cpu_bytes_per_device =
        c.bytes_per_device * ByteSize(XlaCpuCollectiveDType(dtype)) / ByteSize(dtype);
  }

  // The scatter's (b, s, k) index tuples: the indices `id` with the two iotas beside them,
  // s32[..., 3], gathered whole as XLA's 'concatenate'.
  void GatherIndexTuples(const OpRecord& op, int id, const PartitionSpec& to) {
    const TensorRecord& t = T(id);
    Shape tuples = t.shape;
    tuples.push_back(3);
    Entries from = State(id).spec.entries();
    from.emplace_back();
    Entries whole = to.entries();
    whole.emplace_back();
    for (ImpliedCollective c :
         PlanReshard(tuples, DType::kInt32, ShardState{PartitionSpec(from), {}},
                     PartitionSpec(whole), mesh_)) {
      if (c.kind == CollectiveKind::kSlice) continue;
      c.tensor = id;
      SetDType(c, DType::kInt32);
      c.reason = "scatter index tuples (b, s, k) as int32[..., 3] (GSPMD gathers them whole)";
      result_.implied[op.id].push_back(std::move(c));
    }
  }

  // The tensor `id` was cast from (same shape), or `id` itself.
  int CastSource(int id) const {
    if (producer_[id] < 0) return id;
    const OpRecord& p = trace_.ops[producer_[id]];
    if (p.kind != OpKind::kAstype || p.inputs.size() != 1) return id;
    return T(p.inputs[0]).shape == T(id).shape ? p.inputs[0] : id;
  }

  // The weight `id` was cast from (same shape), or `id` itself.
  int CastWeightSource(int id) const {
    if (producer_[id] < 0) return id;
    const OpRecord& p = trace_.ops[producer_[id]];
    if (p.kind != OpKind::kAstype || p.inputs.size() != 1) return id;
    const TensorRecord& source = T(p.inputs[0]);
    return source.kind == TensorKind::kWeight && source.shape == T(id).shape ? source.id : id;
  }

  // Second sweep, over the final shardings: the collectives and where partial sums go.
  void Implied() {
    partial_.assign(trace_.tensors.size(), {});
    for (const OpRecord& op : trace_.ops) {
      const Rule rule = rules_[op.id];
      switch (rule) {
        case Rule::kConstraint:
          Reshard(op, op.inputs[0], *T(op.outputs[0]).partition_spec, "sharding constraint", true);
          break;
        case Rule::kLeading:
          // x[e] along a sharded dim (the masked loop's w0[e] of P('expert', 'fsdp', None)):
          // the slice lives on the devices owning e, and every device needs it, so GSPMD
          // gathers that dim first; each kernel is gathered once for all its slices (CSE).
          if (IsLeadingIndex(op) && Known(op.inputs[0]) &&
              !State(op.inputs[0]).spec.entries().front().empty()) {
            Entries whole = State(op.inputs[0]).spec.entries();
            whole.front().clear();
            Reshard(op, op.inputs[0], PartitionSpec(whole), "x[e] along a sharded dim", false);
          }
          break;
        case Rule::kShardMapIn:
          Reshard(op, op.inputs[0], *T(op.outputs[0]).partition_spec, "shard_map in_specs", true);
          break;
        case Rule::kEinsum: {
          const ParsedEinsum eq = ParseEinsum(op.equation);
          const int a = op.inputs[0], b = op.inputs[1], o = op.outputs[0];
          const EinsumPlan plan = Plan(op);
          Reshard(op, a, plan.operands[0], "einsum operand", false);
          Reshard(op, b, plan.operands[1], "einsum operand", false);
          std::vector<std::string> partial;
          for (const std::string& x : plan.partial)
            if (mesh_.Size(x) > 1) partial.push_back(x);
          if (partial.empty()) break;
          partial_[o] = partial;
          // A constraint right after the einsum decides how the sums are reduced.
          bool constrained = !consumers_[o].empty();
          for (const int c : consumers_[o]) constrained &= rules_[c] == Rule::kConstraint;
          if (!constrained) {
            std::string letters;
            for (const char c : eq.contracted) letters += c;
            Reshard(op, o, State(o).spec, fmt::format("partial sums over contracted '{}'", letters),
                    false);
            partial_[o].clear();
          }
          break;
        }
        case Rule::kElementwise:
          for (const int in : op.inputs) {
            if (!Known(in) || op.outputs.empty()) continue;
            const int o = op.outputs.front();
            Reshard(op, in, AlignToOperand(State(o).spec, T(o).shape, T(in).shape),
                    "elementwise operand", false);
          }
          break;
        case Rule::kReshape: {
          PartitionSpec kept;
          const int in = op.inputs[0];
          ReshapeSpec(T(in).shape, T(op.outputs[0]).shape, State(in).spec, mesh_, &kept);
          Reshard(op, in, kept, "reshape across a sharded dim", false);
          break;
        }
        case Rule::kReduce: {
          const int in = op.inputs[0];
          const PartitionSpec spec = State(in).spec;
          // One reduced dim, or (a scalar loss) all of them: each sharded one leaves partial sums.
          Entry e;
          if (T(op.outputs[0]).shape.size() + 1 >= T(in).shape.size()) {
            e = spec[OpAxis(op, T(in).shape)];
          } else {
            for (const Entry& d : spec.entries()) e.insert(e.end(), d.begin(), d.end());
          }
          std::vector<std::string> axes;
          for (const std::string& x : e)
            if (mesh_.Size(x) > 1) axes.push_back(x);
          if (axes.empty()) break;
          const int o = op.outputs[0];
          partial_[o] = axes;
          Reshard(op, o, State(o).spec, "sum over a sharded dim", false);
          partial_[o].clear();
          break;
        }
        case Rule::kScatter: {
          // A result nothing reads (inference's dropping masks take the softmax probabilities
          // instead) is dead code XLA removes, with its gathers.
          if (consumers_[op.outputs[0]].empty()) break;
          // inputs: the zeros it writes into, the indices, the updates.
          for (size_t k = 1; k < op.inputs.size(); ++k) {
            const int in = op.inputs[k];
            if (!Known(in)) continue;
            const PartitionSpec whole(Entries(T(in).shape.size()));
            if (k == 1)
              GatherIndexTuples(op, in, whole);
            else
              Reshard(op, in, whole, "scatter updates (GSPMD gathers them whole)", false,
                      CastSource(in));
          }
          break;
        }
        case Rule::kLastAxis: {
          const int in = op.inputs[0];
          Entries e = State(in).spec.entries();
          const int axis = OpAxis(op, T(in).shape);
          // jax.lax.top_k is XLA's TopK custom call, which the SPMD partitioner splits only
          // along a sharded sort dim; otherwise (logits sharded on the batch) it runs on the
          // whole operand and each device slices its rows of the result (no communication).
          if (op.kind == OpKind::kTopK && axis < static_cast<int>(e.size()) && e[axis].empty()) {
            bool sharded = false;
            for (const Entry& d : e) sharded |= mesh_.Size(d) > 1;
            if (sharded)
              Reshard(op, in, PartitionSpec(Entries(e.size())),
                      "top_k runs on the whole operand (XLA's TopK custom call)", false);
            break;
          }
          if (axis < static_cast<int>(e.size()) && !e[axis].empty()) {
            e[axis].clear();
            Reshard(op, in, PartitionSpec(e), op.Name() + " needs the whole axis", false);
          }
          break;
        }
        default:
          break;
      }
    }
  }

  // Elementwise results read only by one elementwise op of the same shape: XLA's loop
  // fusion computes them in registers (identities alias instead, see memory_estimate.h).
  std::vector<bool> Fused() const {
    std::vector<bool> fused(trace_.tensors.size(), false);
    auto fusible = [&](const OpRecord& op) {
      return kind_rules_[op.id] == Rule::kElementwise && op.kind != OpKind::kCheckpointName &&
             op.kind != OpKind::kOptimizationBarrier;
    };
    for (const OpRecord& op : trace_.ops) {
      if (!fusible(op)) continue;
      for (const int o : op.outputs) {
        if (consumers_[o].size() != 1) continue;
        const OpRecord& user = trace_.ops[consumers_[o].front()];
        if (fusible(user) && T(user.outputs.front()).shape == T(o).shape &&
            T(user.outputs.front()).in_shard_map == T(o).in_shard_map)
          fused[o] = true;
      }
    }
    return fused;
  }

  // Every tensor's placement and per-device shape: a shard_map record is already one device's
  // block, a written spec is the statement's (a shorter spec leaves the trailing dims whole, as
  // P() does), anything else has the spec propagation gave it, or none (counted replicated).
  void Record() {
    result_.tensors.resize(trace_.tensors.size());
    for (const TensorRecord& t : trace_.tensors) {
      TensorSpmd& r = result_.tensors[t.id];
      if (t.in_shard_map) {
        r.placement = Placement::kShardMapBlock;
        r.local_shape = t.shape;
      } else if (source_[t.id] == Source::kExplicit) {
        r.placement = Placement::kExplicit;
        r.local_shape = LocalShapeOf(t.shape, *t.partition_spec, mesh_);
      } else {
        const PartitionSpec spec =
            spec_[t.id] ? *spec_[t.id] : PartitionSpec::Replicated(t.shape.size());
        r.placement = source_[t.id] == Source::kArgument ? Placement::kArgument
                      : spec_[t.id]                      ? Placement::kPropagated
                                                         : Placement::kUnresolved;
        r.propagated_spec = spec;
        r.local_shape = LocalShapeOf(t.shape, spec, mesh_);
      }
      r.bytes_per_device = TensorBytes(r.local_shape, t.dtype);
    }
  }

  const Mesh& mesh_;
  const Trace& trace_;
  SpmdResult result_;
  std::vector<std::optional<PartitionSpec>> spec_;
  std::vector<Source> source_;
  std::vector<std::vector<int>> consumers_;
  std::vector<int> producer_;  // the op that writes each tensor, -1 for block inputs
  std::vector<Rule> rules_;
  std::vector<Rule> kind_rules_;
  std::vector<std::vector<std::string>> partial_;
  // (tensor, from, to) -> the op that moved it and its collectives' indices there.
  std::map<std::tuple<int, std::string, std::string>, std::pair<int, std::vector<size_t>>>
      resharded_;
};

}  // namespace

SpmdResult AnalyzeSpmd(const Mesh& mesh, const Trace& trace,
                       const std::optional<PartitionSpec>& input_arrival) {
  return Analysis(mesh, trace, input_arrival).Run();
}

}  // namespace shardtrace
