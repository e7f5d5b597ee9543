// The invariants of every trace (shape, bytes, token counts, choices) and the routing variants
// (DeepSeek, Llama 4, norm_topk_prob).
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
// Every trace.

void ShapeInvariant(const Trace& trace, Builder& b) {
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* result = trace.At(trace.output);
  if (!in || !result) return;
  b.Checked(InvariantKind::kOutputShape, "", "output.shape == inputs.shape",
            "the block is a residual-branch layer: [B,S,M] in, [B,S,M] out",
            in->shape == result->shape,
            fmt::format("{} == {}", ShapeToString(result->shape), ShapeToString(in->shape)));
}

// A placed tensor's bytes per device are its local block's elements times the dtype size.
void BytesInvariant(const Trace& trace, const SpmdResult& spmd, Builder& b) {
  int placed = 0;
  std::vector<std::string> bad;
  for (const TensorRecord& t : trace.tensors) {
    if (t.constraint == Constraint::kNone) continue;
    ++placed;
    const TensorSpmd& s = spmd.tensor(t.id);
    if (s.bytes_per_device != NumElements(s.local_shape) * ByteSize(t.dtype))
      bad.push_back(fmt::format("{} ({} in {})", t.name, s.bytes_per_device, t.scope));
  }
  if (placed == 0) return;
  b.Checked(InvariantKind::kPlacedBytes, "",
            "bytes_per_device == prod(local_shape) * sizeof(dtype) for every placed tensor",
            "a constraint or shard_map spec fixes the per-device block; its bytes follow",
            bad.empty(),
            bad.empty() ? fmt::format("{} placed tensors", placed)
                        : fmt::format("{}", fmt::join(bad, ", ")));
}

// Top-k routes every token to exactly K experts.
void RoutingInvariant(const Trace& trace, Builder& b) {
  const TensorRecord* in = trace.At(trace.input);
  const TensorRecord* indices = trace.At(trace.top_k_indices);
  if (!in || !indices) return;
  const std::string statement = "sum(tokens per expert) == B*S*K";
  const std::string reason = "top_k picks exactly K distinct experts for each of the B*S tokens";
  const Fact* per_expert = trace.FindFact(FactKind::kTokensPerExpert);
  const auto bs = DimSize(*in, 'B'), s = DimSize(*in, 'S'), k = DimSize(*indices, 'K');
  if (!per_expert || !bs || !s || !k) {
    b.Unchecked(InvariantKind::kTokensRouted, Ref(trace, {S::kGetTopk}), statement, reason,
                "symbolic trace (no routing counts)");
    return;
  }
  const double total = Sum(per_expert->values);
  b.Checked(InvariantKind::kTokensRouted, Ref(trace, {S::kGetTopk}), statement, reason,
            total == static_cast<double>(*bs * *s * *k),
            fmt::format("sum({}) = {}, B*S*K = {}*{}*{} = {}", Vector(per_expert->values),
                        FactValueText(total), *bs, *s, *k, *bs * *s * *k));
}

// The routing itself, read from the run's top-k arrays: each token's K choices are
// distinct experts with non-negative weights, and under DeepSeek's group-limited routing
// every choice lies in one of the token's kept groups.
void ChoiceInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const Array* idx = Captured(captures, Capture::kTopKIndices);
  const Array* weights = Captured(captures, Capture::kTopKWeights);
  if (!idx || idx->rank() != 3) return;
  const int64_t k = idx->shape[2], tokens = idx->shape[0] * idx->shape[1];
  int64_t repeated = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<float> seen;
    for (int64_t j = 0; j < k; ++j) seen.insert(idx->values()[t * k + j]);
    repeated += static_cast<int64_t>(seen.size()) != k;
  }
  b.Checked(InvariantKind::kDistinctChoices, Ref(trace, {S::kGetTopk}),
            "every token's K choices are K distinct experts",
            "top_k picks K different indices of the expert axis", repeated == 0,
            fmt::format("{} of {} tokens repeat an expert", repeated, tokens));
  // Llama 4 keeps the raw top logit as its weight (the sigmoid comes in permute): any sign.
  const bool raw_logits = FindTensor(trace, "router_scores") != nullptr;
  if (!raw_logits && weights && weights->shape == idx->shape) {
    const std::vector<float>& w = weights->values();
    const float lowest = w.empty() ? 0.0f : *std::min_element(w.begin(), w.end());
    b.Checked(InvariantKind::kNonNegativeWeights, Ref(trace, {S::kGetTopk}), "top_k_weights >= 0",
              "the weights are softmax or sigmoid scores (normalized or scaled by positive "
              "factors)",
              lowest >= 0.0f, fmt::format("min {:.4g}", lowest));
  }
  const Array* mask = Captured(captures, Capture::kGroupMask);
  const Array* logits = Captured(captures, Capture::kGateLogits);
  if (!mask || !logits || mask->rank() != 3) return;
  const int64_t groups = mask->shape[2], experts = logits->shape[2];
  if (groups == 0 || experts % groups != 0) return;
  int64_t outside = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const auto e = static_cast<int64_t>(idx->values()[t * k + j]);
      outside += mask->values()[t * groups + e / (experts / groups)] == 0.0f;
    }
  b.Checked(InvariantKind::kChoicesInKeptGroups, Ref(trace, {S::kExpertGroupMask, S::kBiasedTopk}),
            "group_mask[token, expert / (E/G)] == 1 for every chosen expert",
            "expert_group_mask sets the scores outside the kept groups to -inf before top-k",
            outside == 0, fmt::format("{} of {} choices outside kept groups", outside, tokens * k));
}

// ---------------------------------------------------------------------------------------
// Routing variants: DeepSeek's scaled weights and biased selection, Llama 4's unit combine
// weights, norm_topk_prob.

// True when some tensor named `name` in a scope ending with `tail` runs under `clause`.
bool HasConditioned(const Trace& trace, std::string_view name, std::string_view tail,
                    std::string_view clause) {
  return std::any_of(trace.tensors.begin(), trace.tensors.end(), [&](const TensorRecord& t) {
    return t.name == name && ScopeEndsWith(t.scope, tail) &&
           std::find(t.condition_clauses.begin(), t.condition_clauses.end(), clause) !=
               t.condition_clauses.end();
  });
}

// Per token, sum over k of top_k_weights: {tokens, K, min, max, max |sum - want|}.
struct WeightSums {
  int64_t tokens = 0, k = 0;
  double lo = 1e30, hi = -1e30, worst = 0;
};
std::optional<WeightSums> SumWeights(const Captures* captures, double want) {
  const Array* w = Captured(captures, Capture::kTopKWeights);
  if (!w || w->rank() != 3) return std::nullopt;
  WeightSums out;
  out.k = w->shape[2];
  out.tokens = w->shape[0] * w->shape[1];
  for (int64_t t = 0; t < out.tokens; ++t) {
    double sum = 0;
    for (int64_t j = 0; j < out.k; ++j) sum += w->values()[t * out.k + j];
    out.lo = std::min(out.lo, sum);
    out.hi = std::max(out.hi, sum);
    out.worst = std::max(out.worst, std::abs(sum - want));
  }
  return out;
}

void RoutingVariantInvariants(const Trace& trace, const Captures* captures, Builder& b) {
  const bool renormalized = HasConditioned(trace, "weights_sum", "get_topk", "norm_topk_prob");
  // bf16 rounds each of the K weights by at most 2^-9 of itself, twice.
  const double bf16 = std::ldexp(1.0, -7);
  const TensorRecord* factor = FindTensor(trace, "routed_scaling_factor", "deepseek_scale_weights");
  const bool normalized = FindTensor(trace, "weights_sum", "deepseek_scale_weights") != nullptr;
  if (factor && normalized && !renormalized) {
    const std::string statement =
        "sum over k of top_k_weights[b,s,:] == routed_scaling_factor for every token";
    const std::string reason =
        "deepseek_scale_weights divides the sigmoid scores by their sum, then scales them";
    const double f = factor->summary ? factor->summary->max : 0.0;
    const auto sums = factor->summary ? SumWeights(captures, f) : std::nullopt;
    if (!sums) {
      b.Unchecked(InvariantKind::kScaledWeightSum, Ref(trace, {S::kDeepseekScaleWeights}),
                  statement, reason, "no weight values (symbolic trace)");
    } else {
      b.Checked(InvariantKind::kScaledWeightSum, Ref(trace, {S::kDeepseekScaleWeights}), statement,
                reason, sums->worst <= f * bf16,
                fmt::format("routed_scaling_factor {}; per-token sums {}..{} over {} tokens, max "
                            "|difference| {} (tolerance {} = factor x 2^-7, bf16)",
                            Number(f), Number(sums->lo), Number(sums->hi), sums->tokens,
                            Number(sums->worst), Number(f * bf16)));
    }
  }
  if (FindTensor(trace, "top_k_values", "deepseek_routing")) {
    const std::string statement =
        "the K experts are the top K by biased score (gate_logits + bias; with routing "
        "groups, inside the groups kept by the same scores); their weights are the pre-bias "
        "scores, normalized";
    const std::string reason =
        "deepseek_routing runs top_k on the biased logits, then take_along_axis on "
        "pre_bias_logits: the bias steers the load, not the weighting";
    const Array* biased = Captured(captures, Capture::kGateLogits);
    const Array* pre = Captured(captures, Capture::kPreBiasLogits);
    const Array* idx = Captured(captures, Capture::kTopKIndices);
    const Array* w = Captured(captures, Capture::kTopKWeights);
    const Array* groups = Captured(captures, Capture::kGroupMask);
    if (!biased || !pre || !idx || !w || biased->rank() != 3 || idx->shape != w->shape ||
        pre->shape != biased->shape) {
      b.Unchecked(InvariantKind::kBiasedSelection, Ref(trace, {S::kBiasedTopkWeights}), statement,
                  reason, "no routing values (symbolic trace)");
    } else {
      const int64_t e = biased->shape[2], k = idx->shape[2];
      const int64_t tokens = idx->shape[0] * idx->shape[1];
      const int64_t g = groups && groups->rank() == 3 ? groups->shape[2] : 0;
      int64_t outranked = 0, differ_by_pre_bias = 0, groups_outranked = 0;
      double worst = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        std::vector<bool> chosen(static_cast<size_t>(e), false);
        double lowest = 1e30, total_w = 0, total_p = 0;
        for (int64_t j = 0; j < k; ++j) {
          const auto c = static_cast<int64_t>(idx->values()[t * k + j]);
          chosen[static_cast<size_t>(c)] = true;
          lowest = std::min<double>(lowest, biased->values()[t * e + c]);
          total_w += w->values()[t * k + j];
          total_p += pre->values()[t * e + c];
        }
        for (int64_t c = 0; c < e; ++c) {
          const bool kept = g == 0 || groups->values()[t * g + c / (e / g)] != 0.0f;
          if (!chosen[static_cast<size_t>(c)] && kept && biased->values()[t * e + c] > lowest)
            ++outranked;
        }
        // The kept groups are the best by the sum of their two best biased scores.
        if (g > 0) {
          double worst_kept = 1e30, best_dropped = -1e30;
          for (int64_t group = 0; group < g; ++group) {
            std::vector<float> scores(biased->values().begin() + t * e + group * (e / g),
                                      biased->values().begin() + t * e + (group + 1) * (e / g));
            std::sort(scores.begin(), scores.end(), std::greater<>());
            const double top2 = scores.size() < 2 ? scores[0] : double{scores[0]} + scores[1];
            if (groups->values()[t * g + group] != 0.0f)
              worst_kept = std::min(worst_kept, top2);
            else
              best_dropped = std::max(best_dropped, top2);
          }
          groups_outranked += best_dropped > worst_kept + 1e-6;
        }
        for (int64_t j = 0; j < k; ++j) {
          const auto c = static_cast<int64_t>(idx->values()[t * k + j]);
          if (total_w != 0 && total_p != 0)
            worst = std::max(worst, std::abs(w->values()[t * k + j] / total_w -
                                             pre->values()[t * e + c] / total_p));
        }
        // Would the pre-bias scores have chosen differently? (Not an invariant: the bias's
        // effect on this run.)
        std::vector<int64_t> by_pre(static_cast<size_t>(e));
        std::iota(by_pre.begin(), by_pre.end(), 0);
        std::stable_sort(by_pre.begin(), by_pre.end(), [&](int64_t x, int64_t y) {
          return pre->values()[t * e + x] > pre->values()[t * e + y];
        });
        int64_t taken = 0;
        bool same = true;
        for (const int64_t c : by_pre) {
          const bool kept = g == 0 || groups->values()[t * g + c / (e / g)] != 0.0f;
          if (!kept) continue;
          if (taken++ == k) break;
          same &= chosen[static_cast<size_t>(c)];
        }
        differ_by_pre_bias += !same;
      }
      const std::string ranked_groups =
          g > 0 ? fmt::format(
                      "{} tokens keep a group whose two best biased scores sum lower "
                      "than a dropped group's; ",
                      groups_outranked)
                : "";
      b.Checked(InvariantKind::kBiasedSelection,
                g > 0 ? Ref(trace, {S::kGroupScores, S::kBiasedTopkWeights})
                      : Ref(trace, {S::kBiasedTopkWeights}),
                statement, reason, outranked == 0 && groups_outranked == 0 && worst <= bf16,
                fmt::format("{}{} unchosen kept experts outrank a chosen one; max |w/sum(w) - "
                            "p/sum(p)| {} (tolerance 2^-7); the pre-bias scores alone would "
                            "pick other experts for {} of {} tokens",
                            ranked_groups, outranked, Number(worst), differ_by_pre_bias, tokens));
    }
  }
  if (FindTensor(trace, "router_scores")) {
    const std::string statement =
        "Llama 4 combines each (token, choice) with weight 1: the weight-sum's weights are all "
        "ones";
    const std::string reason =
        "the routing score already scaled the inputs (sigmoid of the top logit); unpermute "
        "replaces the weights with ones_like";
    const Array* sparse = Captured(captures, Capture::kWeightSumWeightsPerDevice);
    const Array* dense = Captured(captures, Capture::kWeights);
    const Array* w = sparse ? sparse : dense;
    if (!w) {
      b.Unchecked(InvariantKind::kUnitCombineWeights,
                  Ref(trace, {S::kLlama4UnitWeightsSparse, S::kLlama4UnitWeightsDense}), statement,
                  reason, "no weight-sum values");
    } else {
      const auto ones = std::count(w->values().begin(), w->values().end(), 1.0f);
      const auto zeros = std::count(w->values().begin(), w->values().end(), 0.0f);
      // Sparse: [devices, T, K], every entry 1. Dense: the ones scattered into [B,S,E].
      const bool holds = sparse ? ones == w->size() : ones + zeros == w->size();
      b.Checked(InvariantKind::kUnitCombineWeights,
                Ref(trace, {sparse ? S::kLlama4UnitWeightsSparse : S::kLlama4UnitWeightsDense}),
                statement, reason, holds,
                fmt::format("{} of {} {} weights are 1{}", ones, w->size(),
                            sparse ? "(token, choice)" : "[B,S,E]",
                            sparse ? "" : fmt::format(", {} are 0", zeros)));
    }
  }
  if (renormalized) {
    const std::string statement = "sum over k of top_k_weights[b,s,:] == 1 for every token";
    const std::string reason = "norm_topk_prob divides the K weights by their sum";
    const auto sums = SumWeights(captures, 1.0);
    if (!sums) {
      b.Unchecked(InvariantKind::kNormalizedWeights, Ref(trace, {S::kNormTopkProb}), statement,
                  reason, "no weight values (symbolic trace)");
    } else {
      b.Checked(InvariantKind::kNormalizedWeights, Ref(trace, {S::kNormTopkProb}), statement,
                reason, sums->worst <= bf16,
                fmt::format("per-token sums {}..{} over {} tokens, max |difference| {} "
                            "(tolerance 2^-7, bf16)",
                            Number(sums->lo), Number(sums->hi), sums->tokens, Number(sums->worst)));
    }
  }
}

}  // namespace shardtrace::invariant_internal
