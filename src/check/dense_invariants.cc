// The invariants of dense_matmul: capacity masks in training and inference, the training combine,
// dropless weights.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include "check/invariant_support.h"
#include "ir/fact_text.h"

namespace shardtrace::invariant_internal {

// ---------------------------------------------------------------------------------------
// dense_matmul with capacity: the masks and the drop counts agree.

void CapacityInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  const TensorRecord* combine = trace.At(trace.combine_mask);
  if (!dispatch || !combine) return;
  const bool subgroups = dispatch->shape.size() == 5;
  const std::string masks =
      MoeRefStart(trace.revision, {subgroups ? S::kGenerateMasksSubgroup : S::kGenerateMasks});
  {
    const std::string statement = "dispatch_mask == (combine_mask != 0)";
    const std::string reason =
        "dispatch_mask is combine_mask cast to bool: a slot is dispatched iff it has a weight";
    if (dispatch->summary && combine->summary) {
      b.Checked(InvariantKind::kDispatchIsCombineNonzero, masks,
                statement + ", so nnz(dispatch_mask) == nnz(combine_mask)", reason,
                dispatch->summary->nonzeros == combine->summary->nonzeros,
                fmt::format("{} == {}", dispatch->summary->nonzeros, combine->summary->nonzeros));
    } else {
      b.Unchecked(InvariantKind::kDispatchIsCombineNonzero, masks, statement, reason,
                  "symbolic trace");
    }
  }
  const Fact* capacity = trace.FindFact(FactKind::kExpertCapacity);
  const auto c = DimSize(*dispatch, 'C');
  if (capacity && c && !capacity->values.empty())
    b.Checked(InvariantKind::kCapacityIsMaskDim, masks,
              "C (the masks' last dim) == expert_capacity_per_batch",
              "one mask slot per unit of capacity", *c == capacity->values[0],
              fmt::format("{} == {}", *c, FactValueText(capacity->values[0])));
  const Fact* routed = trace.FindFact(FactKind::kTokensPerExpert);
  const Fact* dropped = trace.FindFact(FactKind::kTokensDroppedPerExpert);
  if (routed && dropped && dispatch->summary) {
    const double kept = Sum(routed->values) - Sum(dropped->values);
    b.Checked(InvariantKind::kKeptIsRoutedMinusDropped, masks,
              "nnz(dispatch_mask) == sum(tokens per expert) - sum(tokens dropped)",
              "a routed choice either gets a slot or is dropped by capacity",
              static_cast<double>(dispatch->summary->nonzeros) == kept,
              fmt::format("{} == {} - {}", dispatch->summary->nonzeros,
                          FactValueText(Sum(routed->values)), FactValueText(Sum(dropped->values))));
  }
  const std::string one_per_slot = "each (batch, expert, slot) holds at most one token";
  const std::string fcfs =
      "slots fill first come, first served: within an expert, a later token never gets an "
      "earlier slot";
  const Array* mask = Captured(captures, Capture::kDispatchMask);
  if (mask && mask->rank() != 4) mask = nullptr;
  if (!mask) {
    b.Unchecked(InvariantKind::kOneTokenPerSlot, masks, one_per_slot,
                "the slot index is the token's arrival count", "no mask values (symbolic trace)");
    return;
  }
  const Array& m = *mask;
  // The inference masks [B,N,S/N,E,C] are captured as [B,S,E,C]: the same data, read per
  // (b, n) group, where slots restart.
  const int64_t groups = subgroups ? dispatch->shape[1] : 1;
  const int64_t nb = m.shape[0] * groups, ns = m.shape[1] / groups, ne = m.shape[2],
                nc = m.shape[3];
  const auto at = [&](int64_t bi, int64_t s, int64_t e, int64_t ci) {
    return m.values()[((bi * ns + s) * ne + e) * nc + ci] != 0.0f;
  };
  int64_t crowded = 0, out_of_order = 0;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t e = 0; e < ne; ++e) {
      int64_t last_token = -1;
      for (int64_t ci = 0; ci < nc; ++ci) {
        int64_t holders = 0;
        for (int64_t s = 0; s < ns; ++s) {
          if (!at(bi, s, e, ci)) continue;
          ++holders;
          if (s <= last_token) ++out_of_order;
          last_token = s;
        }
        crowded += holders > 1;
      }
    }
  b.Checked(InvariantKind::kOneTokenPerSlot, masks, one_per_slot,
            "the slot index is the token's arrival count at the expert", crowded == 0,
            fmt::format("{} of {} slots hold more than one token", crowded, nb * ne * nc));
  b.Checked(InvariantKind::kSlotsInArrivalOrder, masks, fcfs,
            "positions come from a cumulative sum over tokens in order", out_of_order == 0,
            fmt::format("{} out-of-order assignments in {} {} x {} experts", out_of_order, nb,
                        subgroups ? "(batch, group) rows" : "batch rows", ne));
}

// Training: generate_masks weights the slots with `weights` (the top-k weights scattered to
// [B,S,E], passed as its softmax_probs parameter), so a kept choice's slot holds exactly its
// top-k weight and a dropped choice none.
void TrainingCombineInvariant(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  if (!dispatch || dispatch->shape.size() != 4) return;
  const std::string statement =
      "sum over c of combine_mask[b,s,e,c] == top_k_weights[b,s,k] for every kept choice "
      "(e = top_k_indices[b,s,k]) and 0 for every dropped or unchosen expert";
  const std::string reason =
      "dense_matmul passes the scattered top-k `weights` as generate_masks' softmax_probs, "
      "which the capacity mask zeroes for dropped choices";
  const Array* mask = Captured(captures, Capture::kDispatchMask);
  const Array* combine = Captured(captures, Capture::kCombineMask);
  const Array* idx = Captured(captures, Capture::kTopKIndices);
  const Array* tw = Captured(captures, Capture::kTopKWeights);
  if (!mask || !combine || !idx || !tw || mask->rank() != 4 || combine->shape != mask->shape ||
      idx->shape != tw->shape || idx->rank() != 3) {
    b.Unchecked(InvariantKind::kCombineHoldsTopKWeights,
                Ref(trace, {S::kMasksSoftmaxMul, S::kGenerateMasksCall}), statement, reason,
                "no mask values (symbolic trace)");
    return;
  }
  const int64_t tokens = mask->shape[0] * mask->shape[1], ne = mask->shape[2], nc = mask->shape[3],
                k = idx->shape[2];
  double worst = 0;
  int64_t kept = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < ne; ++e) {
      double sum = 0;
      bool dispatched = false;
      for (int64_t c = 0; c < nc; ++c) {
        sum += combine->values()[(t * ne + e) * nc + c];
        dispatched |= mask->values()[(t * ne + e) * nc + c] != 0.0f;
      }
      double want = 0;
      if (dispatched) {
        ++kept;
        for (int64_t j = 0; j < k; ++j)
          if (idx->values()[t * k + j] == static_cast<float>(e)) want = tw->values()[t * k + j];
      }
      worst = std::max(worst, std::abs(sum - want));
    }
  b.Checked(InvariantKind::kCombineHoldsTopKWeights,
            Ref(trace, {S::kMasksSoftmaxMul, S::kGenerateMasksCall}), statement, reason,
            worst <= 1e-6,
            fmt::format("max |difference| {} over {} (token, expert) pairs, {} kept (tolerance "
                        "1e-6)",
                        Number(worst), tokens * ne, kept));
}

// ---------------------------------------------------------------------------------------
// dense_matmul dropless: the top-k weights scattered into [B,S,E], every expert on every
// token.

void DroplessInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* layer_w0 = nullptr;
  for (const TensorRecord& t : trace.tensors)
    if (t.name == "layer_w0" && t.dims == "BSEH") {
      layer_w0 = &t;
      break;
    }
  // The masked loop: one [B,S,H] layer_w0 per expert, each in its own scope.
  std::set<std::string> loop_experts;
  bool loop_shapes = true;
  const TensorRecord* in = trace.At(trace.input);
  for (const TensorRecord& t : trace.tensors)
    if (t.name == "layer_w0" && t.dims == "BSH" &&
        t.scope.find("masked_loop") != std::string::npos) {
      loop_experts.insert(t.scope);
      loop_shapes &= in && t.shape[0] == in->shape[0] && t.shape[1] == in->shape[1];
    }
  if (!layer_w0 && loop_experts.empty()) return;
  // The experts' count, from the gate's [M, E] kernel (or the constrained logits).
  const TensorRecord* logits = FindTensor(trace, "gate_logits");
  if (!logits) logits = FindTensor(trace, "gate.kernel");
  if (in && logits && !layer_w0) {
    const auto e = DimSize(*logits, 'E');
    b.Checked(InvariantKind::kDroplessEveryExpert, "sparse-moe-jax-port.md",
              "each of the E experts' layer_w0 is [B,S,H]: every expert computes on every token",
              "the loop runs every expert on all tokens and masks afterwards, as dense_matmul's "
              "dropless einsums do at once",
              loop_shapes && e && static_cast<int64_t>(loop_experts.size()) == *e,
              fmt::format("{} expert scopes with layer_w0 [B={},S={},H] of E={}",
                          loop_experts.size(), in->shape[0], in->shape[1], e ? *e : 0));
  }
  if (in && logits && layer_w0) {
    const auto e = DimSize(*logits, 'E');
    const bool every = e && layer_w0->shape[0] == in->shape[0] &&
                       layer_w0->shape[1] == in->shape[1] && layer_w0->shape[2] == *e;
    b.Checked(InvariantKind::kDroplessEveryExpert, Ref(trace, {S::kDroplessWi0Wi1}),
              "layer_w0 is [B,S,E,H]: every expert computes on every token",
              "BSM,EMH -> BSEH has no capacity dim: nothing is selected or dropped before the "
              "experts; the routing only weights their outputs",
              every,
              fmt::format("layer_w0 {} against inputs {} and E={}", ShapeToString(layer_w0->shape),
                          ShapeToString(in->shape), e ? *e : 0));
  }
  const std::string sum_statement =
      "sum over E of weights[b,s,:] == sum over K of top_k_weights[b,s,:]";
  const std::string sum_reason =
      "reshape_and_update_weights writes each token's K weights into K distinct columns of "
      "zeros (Llama 4: ones, so the sum is K)";
  const Array* w = Captured(captures, Capture::kWeights);
  const Array* tw = Captured(captures, Capture::kTopKWeights);
  const Array* ti = Captured(captures, Capture::kTopKIndices);
  if (!w || !tw || !ti || w->rank() != 3 || ti->shape != tw->shape) {
    b.Unchecked(InvariantKind::kDroplessWeightSum, Ref(trace, {S::kReshapeAndUpdateWeights}),
                sum_statement, sum_reason, "no weight values (symbolic trace)");
    return;
  }
  const bool ones = FindTensor(trace, "router_scores") != nullptr;  // llama4
  const int64_t tokens = ti->shape[0] * ti->shape[1], k = ti->shape[2], e = w->shape[2];
  double worst = 0, lo = 1e30, hi = -1e30;
  int64_t stray = 0, misplaced = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    double expected = 0, got = 0;
    std::vector<bool> chosen(static_cast<size_t>(e), false);
    for (int64_t j = 0; j < k; ++j) {
      const auto col = static_cast<int64_t>(ti->values()[t * k + j]);
      const float want = ones ? 1.0f : tw->values()[t * k + j];
      expected += want;
      if (col < 0 || col >= e) {
        ++misplaced;
        continue;
      }
      chosen[static_cast<size_t>(col)] = true;
      misplaced += w->values()[t * e + col] != want;
    }
    for (int64_t c = 0; c < e; ++c) {
      const float v = w->values()[t * e + c];
      got += v;
      stray += !chosen[static_cast<size_t>(c)] && v != 0.0f;
    }
    worst = std::max(worst, std::abs(got - expected));
    lo = std::min(lo, got);
    hi = std::max(hi, got);
  }
  b.Checked(InvariantKind::kDroplessWeightSum,
            Ref(trace, {S::kReshapeAndUpdateWeights, S::kDenseReshapeWeights}), sum_statement,
            sum_reason, worst <= 1e-6,
            fmt::format("max |difference| {} over {} tokens (per-token sums {}..{}, tolerance "
                        "1e-6)",
                        Number(worst), tokens, Number(lo), Number(hi)));
  b.Checked(InvariantKind::kDroplessUnchosenZero,
            Ref(trace, {S::kUpdateWeightsZeros, S::kUpdateWeightsSet}),
            fmt::format("weights[b,s,e] == 0 for e not in top_k_indices[b,s], and == {} for the "
                        "K chosen",
                        ones ? "1" : "top_k_weights[b,s,k]"),
            "the scatter starts from zeros and sets only the chosen columns",
            stray == 0 && misplaced == 0,
            fmt::format("{} nonzero unchosen and {} wrong chosen entries of {}", stray, misplaced,
                        tokens * e));
}

// ---------------------------------------------------------------------------------------
// dense_matmul dropping in inference: generate_masks_subgroup's [B,N,S,E,C] masks.

void SubgroupInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const TensorRecord* dispatch = trace.At(trace.dispatch_mask);
  if (!dispatch || dispatch->shape.size() != 5) return;
  const int64_t nb = dispatch->shape[0], nn = dispatch->shape[1], ns = dispatch->shape[2],
                ne = dispatch->shape[3], nc = dispatch->shape[4];
  // The combine einsum's [B,N,S,M] output folded back to [B,N*S,M].
  for (const OpRecord& op : trace.ops) {
    if (op.kind != OpKind::kReshape || op.inputs.empty() || op.outputs.empty()) continue;
    const TensorRecord& from = trace.tensors[op.inputs[0]];
    const TensorRecord& to = trace.tensors[op.outputs[0]];
    if (from.name != "output" || from.dims != "BNSM") continue;
    const TensorRecord* in = trace.At(trace.input);
    const bool folded = from.shape.size() == 4 && to.shape.size() == 3 &&
                        to.shape[0] == from.shape[0] &&
                        to.shape[1] == from.shape[1] * from.shape[2] &&
                        to.shape[2] == from.shape[3] && in && to.shape == in->shape;
    b.Checked(InvariantKind::kSubgroupOutputReshape, Ref(trace, {S::kSubgroupOutputReshape}),
              "output [B,N,S/N,M] is reshaped to [B,N*(S/N),M] == inputs.shape",
              "the combine einsum keeps the context groups apart; the block must return [B,S,M]",
              folded,
              fmt::format("{} -> {} (inputs {})", ShapeToString(from.shape),
                          ShapeToString(to.shape), in ? ShapeToString(in->shape) : "?"));
    break;
  }
  const Array* mask = Captured(captures, Capture::kDispatchMask);
  const Array* combine = Captured(captures, Capture::kCombineMask);
  const Array* idx = Captured(captures, Capture::kTopKIndices);
  const std::string pos_statement =
      "per (b, n) group and expert, slots 0..min(routed, C)-1 hold one token each and the "
      "rest none";
  const std::string pos_reason =
      "positions are a cumsum over the group's (token, choice) rows (axis 2 of [B,N,S*K,E]), "
      "restarting in every group, and capped at C";
  if (!mask || !combine || !idx || mask->size() != nb * nn * ns * ne * nc ||
      combine->size() != mask->size() || idx->size() % (nb * nn * ns) != 0) {
    b.Unchecked(InvariantKind::kSubgroupPositions,
                Ref(trace, {S::kSubgroupCumsum, S::kSubgroupTrunc}), pos_statement, pos_reason,
                "no mask values (symbolic trace)");
    return;
  }
  const int64_t k = idx->size() / (nb * nn * ns);
  const auto slot = [&](const Array& a, int64_t bi, int64_t n, int64_t s, int64_t e, int64_t c) {
    return a.values()[(((bi * nn + n) * ns + s) * ne + e) * nc + c];
  };
  int64_t bad_groups = 0, groups = 0, dropped = 0;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t n = 0; n < nn; ++n)
      for (int64_t e = 0; e < ne; ++e) {
        int64_t routed = 0;
        for (int64_t s = 0; s < ns; ++s)
          for (int64_t j = 0; j < k; ++j)
            routed += idx->values()[((bi * nn + n) * ns + s) * k + j] == static_cast<float>(e);
        const int64_t kept = std::min(routed, nc);
        dropped += routed - kept;
        bool ok = true;
        for (int64_t c = 0; c < nc; ++c) {
          int64_t holders = 0;
          for (int64_t s = 0; s < ns; ++s) holders += slot(*mask, bi, n, s, e, c) != 0.0f;
          ok &= holders == (c < kept ? 1 : 0);
        }
        ++groups;
        bad_groups += !ok;
      }
  b.Checked(InvariantKind::kSubgroupPositions, Ref(trace, {S::kSubgroupCumsum, S::kSubgroupTrunc}),
            pos_statement, pos_reason, bad_groups == 0,
            fmt::format("{} of {} (b, n, expert) groups differ; {} choices dropped", bad_groups,
                        groups, dropped));
  const Array* probs = Captured(captures, Capture::kSoftmaxProbs);
  const std::string soft_statement =
      "sum over c of combine_mask[b,n,s,e,c] == softmax_probs[b,s,e] for every kept expert e "
      "(0 otherwise), so sum over e,c of combine_mask[b,n,s] <= 1";
  const std::string soft_reason =
      "inference weights the kept choices with the softmax over all E experts, not the top-k "
      "weights: a token's combine weights sum to the probability mass it kept";
  if (!probs || probs->size() != nb * nn * ns * ne) {
    b.Unchecked(InvariantKind::kSubgroupCombineSoftmax,
                Ref(trace, {S::kSubgroupSoftmaxMul, S::kInferenceSoftmax}), soft_statement,
                soft_reason, "no softmax_probs values");
    return;
  }
  double worst = 0, lo = 1e30, hi = -1e30;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t n = 0; n < nn; ++n)
      for (int64_t s = 0; s < ns; ++s) {
        double total = 0;
        for (int64_t e = 0; e < ne; ++e) {
          double sum = 0;
          bool kept = false;
          for (int64_t c = 0; c < nc; ++c) {
            sum += slot(*combine, bi, n, s, e, c);
            kept |= slot(*mask, bi, n, s, e, c) != 0.0f;
          }
          const double p = probs->values()[((bi * nn + n) * ns + s) * ne + e];
          worst = std::max(worst, std::abs(sum - (kept ? p : 0.0)));
          total += sum;
        }
        lo = std::min(lo, total);
        hi = std::max(hi, total);
      }
  // bf16 rounds each of the E probabilities by at most 2^-9 of itself.
  const double tolerance = std::ldexp(1.0, -8);
  b.Checked(InvariantKind::kSubgroupCombineSoftmax,
            Ref(trace, {S::kSubgroupSoftmaxMul, S::kInferenceSoftmax}), soft_statement, soft_reason,
            worst <= 1e-6 && hi <= 1.0 + tolerance,
            fmt::format("max |difference| {} (tolerance 1e-6); per-token combine sums {}..{} "
                        "(<= 1 + 2^-8)",
                        Number(worst), Number(lo), Number(hi)));
}

}  // namespace shardtrace::invariant_internal
