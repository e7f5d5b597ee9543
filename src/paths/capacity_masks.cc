#include "paths/capacity_masks.h"

#include <fmt/format.h>

#include <cmath>

#include "config/moe_lines.h"
#include "paths/traced_ops.h"
#include "util/checked.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

int64_t Capacity(int64_t tokens_per_batch, int64_t num_experts, double capacity_factor) {
  return CheckedToInt(
      std::max(std::ceil(static_cast<double>(tokens_per_batch) / static_cast<double>(num_experts)) *
                   capacity_factor,
               capacity_factor),
      "expert capacity (tokens / num_experts x capacity_factor)");
}

// Both mask builders share one implementation: identical arithmetic on a [B, (N,) S, K, E]
// view.
Masks GenerateMasks(const MoeContext& ctx, const Value& top_k_indices, const Value& probs,
                    int64_t groups) {
  Tracer& t = ctx.t;
  const bool sub = groups > 0;
  const auto scope = t.Scope(sub ? "generate_masks_subgroup" : "generate_masks");
  const int64_t b = top_k_indices.dim(0), seq = top_k_indices.dim(1), k = ctx.setup.top_k;
  const int64_t e = ctx.setup.num_experts;
  const int64_t cp = sub ? groups : 1, sub_seq = seq / cp;
  const int64_t c = Capacity(sub_seq * k, e, ctx.settings().capacity_factor);
  const std::string lead = sub ? "BN" : "B";
  const Shape lead_shape = sub ? Shape{b, cp} : Shape{b};
  auto with = [&](std::initializer_list<int64_t> rest) {
    Shape s = lead_shape;
    s.insert(s.end(), rest);
    return s;
  };
  Value idx = top_k_indices;
  if (sub) idx = tr::Reshape(t, idx, with({sub_seq, k}), {"top_k_indices", lead + "SK"});
  const Value expert_mask = tr::OneHot(t, idx, e, DType::kInt32, {"expert_mask", lead + "SKE"});
  Value fused =
      tr::Reshape(t, expert_mask, with({sub_seq * k, e}), {"expert_mask_fused", lead + "RE"});
  fused = sub ? t.ShardWithLogical(fused, "expert_mask_fused", "BNRE",
                                   LogicalNames({"activation_batch", nullptr, nullptr, nullptr}))
              : t.ShardWithLogical(fused, "expert_mask_fused", "BRE",
                                   LogicalNames({"activation_batch_moe", nullptr, nullptr}));
  const Value count_fused =
      tr::Cumsum(t, fused, sub ? 2 : 1, {"expert_token_count_fused", lead + "RE"});
  Value count =
      tr::Reshape(t, count_fused, with({sub_seq, k, e}), {"expert_token_count", lead + "SKE"});
  count = sub ? t.ShardWithLogical(count, "expert_token_count", "BNSKE",
                                   LogicalNames({"activation_batch", "activation_norm_length",
                                                 nullptr, nullptr, nullptr}))
              : t.ShardWithLogical(
                    count, "expert_token_count", "BSKE",
                    LogicalNames({"activation_batch", "activation_norm_length", nullptr, nullptr}));
  const Value cap = tr::Constant(t, Scalar(static_cast<float>(c), DType::kInt32),
                                 {"expert_capacity_per_batch", ""});
  const RevisionId rev = ctx.settings().revision.id;
  t.Annotate(cap, fmt::format("C = {}, a Python int in moe.py, not a traced array ({})", c,
                              MoeRef(rev, {sub ? MoeStatement::kSubgroupCapacity
                                               : MoeStatement::kMasksCapacity})));
  const Value within =
      tr::Binary(t, OpKind::kLessEqual, count, cap, {"within_capacity", lead + "SKE"});
  const Value trunc =
      tr::Binary(t, OpKind::kMul, expert_mask, within, {"trunc_expert_mask", lead + "SKE"});
  const int64_t k_axis = sub ? 3 : 2;
  const Value combined_mask =
      tr::Sum(t, trunc, k_axis, false, {"combined_expert_mask", lead + "SE"});
  Value weights = probs;
  if (sub) weights = tr::Reshape(t, weights, with({sub_seq, e}), {"softmax_probs", "BNSE"});
  weights = tr::Binary(t, OpKind::kMul, weights, combined_mask, {"softmax_probs", lead + "SE"});
  t.Annotate(weights,
             sub ? fmt::format("0 where a choice was dropped ({})",
                               MoeRef(rev, {MoeStatement::kSubgroupSoftmaxMul}))
                 : fmt::format("= weights, which {} passes as softmax_probs, 0 where dropped ({})",
                               MoeRefStart(rev, {MoeStatement::kGenerateMasksCall}),
                               MoeLines(rev, MoeStatement::kMasksSoftmaxMul)));
  const Value position_fused =
      tr::Binary(t, OpKind::kMul, fused, count_fused, {"expert_token_position_fused", lead + "RE"});
  const Value position = tr::Reshape(t, position_fused, with({sub_seq, k, e}),
                                     {"expert_token_position", lead + "SKE"});
  const Value summed =
      tr::Sum(t, position, k_axis, false, {"combined_expert_token_position", lead + "SE"});
  const Value combined_position = tr::Binary(t, OpKind::kMul, summed, combined_mask,
                                             {"combined_expert_token_position", lead + "SE"});
  // The one-hot has C+1 slots (slot 0 = not kept) until the slice below drops slot 0: that
  // dim is not C but C+1 (D), so the Definitions list C's one size.
  const Value in_capacity = tr::OneHot(t, combined_position, c + 1, DType::kInt32,
                                       {"expert_token_position_in_capacity", lead + "SED"});
  // combine_mask = softmax_probs[..., None] * one_hot, then drop slot 0 (= not kept).
  Value combine = t.Apply(
      {OpKind::kMul, "", {{"broadcast", "softmax_probs[..., None]"}}}, {&weights, &in_capacity},
      {"combine_mask", lead + "SED"},
      [](const Args& a) {
        Shape s = a[0]->shape;
        s.push_back(1);
        return Mul(Reshape(*a[0], s), *a[1]);
      },
      [](const Args& a, const Args&, const Args& g) {
        Shape s = a[0]->shape;
        s.push_back(1);
        const Array dw = MulVjp(Reshape(*a[0], s), *a[1], *g[0]).first;
        return std::vector<Array>{dw.WithShape(a[0]->shape), Array{}};
      });
  combine = tr::Slice(t, combine, -1 + static_cast<int64_t>(combine.shape().size()), 1, c,
                      {"combine_mask", lead + "SEC"});
  const Value dispatch = tr::Cast(t, combine, DType::kBool, {"dispatch_mask", lead + "SEC"});
  ctx.t.AddFact({FactKind::kExpertCapacity,
                 "",
                 "",
                 {},
                 {static_cast<double>(c)},
                 {{"tokens", static_cast<double>(sub_seq)},
                  {"top_k", static_cast<double>(k)},
                  {"num_experts", static_cast<double>(e)},
                  {"capacity_factor", ctx.settings().capacity_factor}}});
  if (t.numeric()) {
    // Routing facts: per expert, choices routed and choices dropped by capacity.
    std::vector<double> routed(e, 0.0), kept(e, 0.0);
    const std::vector<float>& m = expert_mask.array().values();
    const std::vector<float>& tm = trunc.array().values();
    for (size_t i = 0; i < m.size(); ++i) {
      routed[i % e] += m[i];
      kept[i % e] += tm[i];
    }
    std::vector<double> dropped(e);
    for (int64_t i = 0; i < e; ++i) dropped[i] = routed[i] - kept[i];
    const int64_t choices = static_cast<int64_t>(m.size()) / e;  // per expert column
    ctx.t.AddFact(
        {FactKind::kTokensDroppedPerExpert,
         "",
         "",
         {e},
         dropped,
         {{"choices", static_cast<double>(choices)}, {"capacity", static_cast<double>(c)}}});
  }
  return {dispatch, combine, c};
}

}  // namespace shardtrace
