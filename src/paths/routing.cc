#include "paths/routing.h"

#include <cmath>
#include <limits>

#include "config/moe_settings.h"
#include "paths/traced_ops.h"
#include "util/error.h"

namespace shardtrace {

namespace tr = traced;

GateOutput GateLogit(const MoeContext& ctx, const Value& routing_inputs, const Value& kernel,
                     const std::optional<Value>& bias) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("gate");
  const DType gate_dtype = ctx.setup.gate_dtype;
  const Value inputs = tr::Cast(t, routing_inputs, gate_dtype, {"inputs", "BSM"});
  const Value k = tr::Cast(t, kernel, gate_dtype, {"kernel", "ME"});
  // dot_general contracting the last input axis with the kernel's first.
  Value output = tr::Einsum(t, "BSM,ME -> BSE", inputs, k, gate_dtype, {"output", "BSE"});
  GateOutput result{output, std::nullopt};
  const std::string score_func = ctx.settings().routed_score_func;
  if (!score_func.empty()) {
    const auto cond = t.Condition("routed_score_func");
    result.gate_logits = tr::Activation(t, score_func, result.gate_logits, {"output", "BSE"});
    if (ctx.setup.deepseek3_routing) result.pre_bias_logits = result.gate_logits;
  }
  if (ctx.settings().routed_bias) {
    const auto cond = t.Condition("routed_bias");
    SHARDTRACE_CHECK(bias.has_value());
    const Value b = tr::Cast(t, *bias, gate_dtype, {"bias", "E"});
    result.gate_logits = tr::Binary(t, OpKind::kAdd, result.gate_logits, b, {"output", "BSE"});
  }
  return result;
}

namespace {

// expert_group_mask: keep the topk_routing_group groups whose two best scores sum highest.
Value ExpertGroupMask(const MoeContext& ctx, const Value& gate_logits) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("expert_group_mask");
  const int64_t groups = ctx.settings().n_routing_groups;
  const int64_t top_groups = ctx.settings().topk_routing_group;
  const int64_t e = ctx.setup.num_experts;
  const Shape& s = gate_logits.shape();
  const Value grouped =
      tr::Reshape(t, gate_logits, {s[0], s[1], groups, e / groups}, {"scores_grouped", "BSGg"});
  const auto [top2, top2_idx] =
      tr::TopK(t, grouped, 2, {"top2_in_group_vals", "BSGJ"}, {"top2_in_group_idx", "BSGJ"});
  const Value top2_f32 = tr::Cast(t, top2, DType::kFloat32, {"top2_in_group_vals", "BSGJ"});
  const Value group_scores = tr::Sum(t, top2_f32, -1, false, {"group_scores", "BSG"});
  const auto [gv, group_idx] =
      tr::TopK(t, group_scores, top_groups, {"group_vals", "BSV"}, {"group_idx", "BSV"});
  const Value one_hot = tr::OneHot(t, group_idx, groups, DType::kFloat32, {"group_mask", "BSVG"});
  const Value group_mask = tr::Sum(t, one_hot, -2, false, {"group_mask", "BSG"});
  // Outside shard_map (dense_matmul) these are global: the visualizations draw the groups
  // each token keeps from them.
  if (!group_mask.per_device) {
    ctx.Capture(Capture::kGroupScores, group_scores.array());
    ctx.Capture(Capture::kGroupMask, group_mask.array());
  }
  return t.Apply(
      {OpKind::kBroadcastTo, "", {}}, {&group_mask}, {"score_mask", "BSE"},
      [&](const std::vector<const Array*>& a) {
        const Array expanded = Reshape(*a[0], {s[0], s[1], groups, 1});
        return Reshape(BroadcastTo(expanded, {s[0], s[1], groups, e / groups}), {s[0], s[1], e});
      });
}

}  // namespace

TopKOutput GetTopK(const MoeContext& ctx, const Value& gate_logits,
                   const std::optional<Value>& pre_bias_logits) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("get_topk");
  const MoeSetup& s = ctx.setup;
  const int64_t k = s.top_k;
  if (ctx.settings().use_random_routing) {
    // Inside shard_map each device draws its own indices; shardtrace's draw is one symbolic
    // array, which the expert-parallel collectives cannot split.
    if (s.ep > 1)
      Fail(
          "use_random_routing=True with expert parallelism {} is not modelled (shardtrace "
          "traces random routing only with expert parallelism 1)",
          s.ep);
    if (t.numeric())
      Fail(
          "use_random_routing: random routing draws from JAX's PRNG and cannot be reproduced "
          "numerically; "
          "run the trace without --numeric");
    const auto cond = t.Condition("use_random_routing");
    const Value idx = t.Apply(
        {OpKind::kRandomRandint, "", {{"maxval", std::to_string(s.num_experts)}}}, {},
        {"top_k_indices", "BSK"}, [&](const std::vector<const Array*>&) {
          // gate_logits.shape[:-1] + (k,): inside shard_map, the local rows.
          return Array::Symbolic({gate_logits.dim(0), gate_logits.dim(1), k}, DType::kInt32);
        });
    return {tr::TakeAlongAxis(t, gate_logits, idx, -1, {"top_k_weights", "BSK"}), idx};
  }
  std::optional<Value> weights, indices;
  if (s.deepseek3_routing) {
    const auto cond = t.Condition("model_name startswith " + s.deepseek_routing_prefix);
    const auto route = t.Scope("deepseek_routing");
    if (!pre_bias_logits)
      Fail(
          "model_name {}: deepseek routing needs pre_bias_logits, which GateLogit only keeps when "
          "routed_score_func is set",
          s.model_name);
    Value candidates = gate_logits;
    if (ctx.settings().n_routing_groups != -1) {
      const Value mask = ExpertGroupMask(ctx, gate_logits);
      candidates = t.Apply(
          {OpKind::kWhere, "", {{"else", "-inf"}}}, {&mask, &gate_logits}, {"masked_logits", "BSE"},
          [](const std::vector<const Array*>& a) {
            const Array zero = Scalar(0.0f, a[0]->dtype);
            const Array ninf = Scalar(-std::numeric_limits<float>::infinity(), a[1]->dtype);
            return Where(Greater(*a[0], zero), *a[1], ninf);
          },
          [](const Tracer::Args& a, const Tracer::Args&, const Tracer::Args& g) {
            const Array keep = Greater(*a[0], Scalar(0.0f, a[0]->dtype));
            return std::vector<Array>{
                Array{}, Cast(Where(keep, *g[0], Scalar(0.0f, g[0]->dtype)), a[1]->dtype)};
          });
    }
    auto [vals, idx] =
        tr::TopK(t, candidates, k, {"top_k_values", "BSK"}, {"top_k_indices", "BSK"});
    indices = idx;
    weights = tr::TakeAlongAxis(t, *pre_bias_logits, idx, -1, {"top_k_weights", "BSK"});
  } else if (s.decoder_block == "gemma4") {
    const auto cond = t.Condition("decoder_block == gemma4");
    const Value f32 = tr::Cast(t, gate_logits, DType::kFloat32, {"gate_logits", "BSE"});
    const Value probs = tr::Softmax(t, f32, {"router_probs", "BSE"});
    auto [vals, idx] =
        tr::TopK(t, gate_logits, k, {"top_k_values", "BSK"}, {"top_k_indices", "BSK"});
    indices = idx;
    const Value taken = tr::TakeAlongAxis(t, probs, idx, -1, {"top_k_weights", "BSK"});
    weights = tr::Cast(t, taken, s.dtype, {"top_k_weights", "BSK"});
  } else {
    auto [vals, idx] =
        tr::TopK(t, gate_logits, k, {"top_k_weights", "BSK"}, {"top_k_indices", "BSK"});
    weights = vals;
    indices = idx;
  }
  if (s.decoder_block == "deepseek" || s.decoder_block == "deepseek4") {
    const auto cond = t.Condition("decoder_block == " + s.decoder_block);
    const auto sc = t.Scope("deepseek_scale_weights");
    const std::string& score = ctx.settings().routed_score_func;
    if (score == "sigmoid" || score == "sqrtsoftplus") {
      const auto cond = t.Condition("routed_score_func == " + score);
      const Value sum = tr::Sum(t, *weights, -1, true, {"weights_sum", "BS1"});
      weights = tr::Binary(t, OpKind::kDiv, *weights, sum, {"top_k_weights", "BSK"});
    }
    const Value factor = tr::Constant(
        t, Scalar(static_cast<float>(ctx.settings().routed_scaling_factor), weights->dtype()),
        {"routed_scaling_factor", ""});
    weights = tr::Binary(t, OpKind::kMul, *weights, factor, {"top_k_weights", "BSK"});
  } else if (s.decoder_block != "llama4" && s.decoder_block != "gemma4") {
    const Value f32 = tr::Cast(t, *weights, DType::kFloat32, {"top_k_weights", "BSK"});
    const Value soft = tr::Softmax(t, f32, {"top_k_weights", "BSK"});
    weights = tr::Cast(t, soft, s.dtype, {"top_k_weights", "BSK"});
  }
  if (ctx.settings().norm_topk_prob) {
    const auto cond = t.Condition("norm_topk_prob");
    const Value sum = tr::Sum(t, *weights, -1, true, {"weights_sum", "BS1"});
    weights = tr::Binary(t, OpKind::kDiv, *weights, sum, {"top_k_weights", "BSK"});
  }
  if (ctx.topk_scale) {
    // take_along_axis(per_expert_scale[None, None, :], top_k_indices, -1), in the weights'
    // dtype.
    const auto cond = t.Condition("decoder_block == gemma4");
    const Value taken = tr::Take(t, *ctx.topk_scale, *indices, 0, {"per_expert_scale_topk", "BSK"});
    const Value scale = tr::Cast(t, taken, weights->dtype(), {"per_expert_scale_topk", "BSK"});
    weights = tr::Binary(t, OpKind::kMul, *weights, scale, {"top_k_weights", "BSK"});
  }
  return {*weights, *indices};
}

Value RouterProbs(const MoeContext& ctx, const Value& gate_logits) {
  const Value f32 = tr::Cast(ctx.t, gate_logits, DType::kFloat32, {"gate_logits", "BSE"});
  const Value soft = tr::Softmax(ctx.t, f32, {"softmax_probs", "BSE"});
  return tr::Cast(ctx.t, soft, ctx.dtype(), {"softmax_probs", "BSE"});
}

namespace {

// load_balance_loss with either the probabilities (their mean over the sequence taken here,
// after the density, as moe.py orders it) or that mean already taken.
Value LoadBalanceLossImpl(const MoeContext& ctx, const Value& top_k_indices,
                          const Value* softmax_probs, const Value* given_density_prob) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("load_balance_loss");
  const int64_t e = ctx.setup.num_experts;
  const Value mask = tr::OneHot(t, top_k_indices, e, DType::kInt32, {"expert_mask", "BSKE"});
  const Value summed = tr::Sum(t, mask, 2, false, {"summed_expert_mask", "BSE"});
  const Value density = tr::Mean(t, summed, 1, {"density", "BE"});
  const Value density_prob = given_density_prob
                                 ? *given_density_prob
                                 : tr::Mean(t, *softmax_probs, 1, {"density_prob", "BE"});
  // The release divides the density by top-k so that it sums to 1 over the experts; the seed
  // does not. Folded into the scale, which is where the factor lands.
  const bool per_k = ctx.settings().revision.behaviour.lb_loss_density_per_top_k;
  const double k = per_k ? static_cast<double>(ctx.setup.top_k) : 1.0;
  const float scale =
      static_cast<float>(static_cast<double>(e * e) * ctx.settings().load_balance_loss_weight / k);
  return t.Apply(
      {OpKind::kMean,
       "",
       {{"scale", per_k ? "num_experts**2 * load_balance_loss_weight / "
                          "num_experts_per_tok (release: density / top_k)"
                        : "num_experts**2 * load_balance_loss_weight"}}},
      {&density, &density_prob}, {"lb_loss", ""},
      [&](const std::vector<const Array*>& a) {
        const Array m = Mean(Mul(*a[0], *a[1]));
        return Mul(m, Scalar(scale, m.dtype));
      },
      [scale](const Tracer::Args& a, const Tracer::Args&, const Tracer::Args& g) {
        const Array product = Mul(*a[0], *a[1]);
        std::vector<int64_t> all(static_cast<size_t>(product.rank()));
        for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
        const Array dm = Mul(*g[0], Scalar(scale, g[0]->dtype));
        auto [da, db] = MulVjp(*a[0], *a[1], MeanVjp(product, all, false, dm));
        return std::vector<Array>{std::move(da), std::move(db)};
      });
}

}  // namespace

Value LoadBalanceLoss(const MoeContext& ctx, const Value& top_k_indices,
                      const Value& softmax_probs) {
  return LoadBalanceLossImpl(ctx, top_k_indices, &softmax_probs, nullptr);
}

Value LoadBalanceLossFromDensityProb(const MoeContext& ctx, const Value& top_k_indices,
                                     const Value& density_prob) {
  return LoadBalanceLossImpl(ctx, top_k_indices, nullptr, &density_prob);
}

ExpertCounts CountExperts(const MoeContext& ctx, const Value& top_k_indices,
                          const std::vector<std::string>& count_axes) {
  Tracer& t = ctx.t;
  const int64_t e = ctx.setup.num_experts;
  const Value flat =
      tr::Reshape(t, top_k_indices, {top_k_indices.array().size()}, {"flat_indices", "R"});
  ExpertCounts out{tr::Bincount(t, flat, e, {"expert_counts", "E"}), flat.array().size()};
  // The mean load is the counted rows over the experts: this device's, or after the psum
  // every device's of the group (load_balance_updates_from_counts sums the counts).
  if (!count_axes.empty()) {
    const auto cond = t.Condition("expert counts psummed over the batch axes");
    out.counts = t.Psum(out.counts, count_axes, {"expert_counts", "E"});
    out.rows *= t.mesh().Size(count_axes);
  }
  return out;
}

Value BiasUpdatesFromCounts(const MoeContext& ctx, const Value& counts, int64_t rows) {
  Tracer& t = ctx.t;
  const int64_t e = ctx.setup.num_experts;
  const float rate = static_cast<float>(ctx.settings().routed_bias_update_rate);
  const double average = static_cast<double>(rows) / static_cast<double>(e);
  return t.Apply({OpKind::kSign, "", {{"rate", std::to_string(rate)}}}, {&counts},
                 {"bias_updates", "E"}, [&](const std::vector<const Array*>& a) {
                   const Array direction =
                       Sign(Sub(Scalar(static_cast<float>(average), DType::kFloat32), *a[0]));
                   return Mul(direction, Scalar(rate, DType::kFloat32));
                 });
}

Value LoadBalanceUpdates(const MoeContext& ctx, const Value& top_k_indices,
                         const std::vector<std::string>& count_axes) {
  const auto scope = ctx.t.Scope("calculate_load_balance_updates");
  const ExpertCounts counts = CountExperts(ctx, top_k_indices, count_axes);
  return BiasUpdatesFromCounts(ctx, counts.counts, counts.rows);
}

Value ApplyFfnActivation(const MoeContext& ctx, Value layer_w0, Value layer_w1) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("ffn_act");
  const std::string act = ctx.settings().mlp_activations.front();
  const std::string dims = t.trace().tensors[layer_w0.tensor].dims;
  Value out;
  if (ctx.setup.decoder_block == "gpt_oss") {
    const auto cond = t.Condition("decoder_block == gpt_oss");
    const float limit = static_cast<float>(ctx.settings().mlp_activations_limit);
    const Value w0 = tr::Clip(t, layer_w0, std::nullopt, limit, {"layer_w0", dims});
    const Value w1 = tr::Clip(t, layer_w1, -limit, limit, {"layer_w1", dims});
    const Value scaled =
        tr::Binary(t, OpKind::kMul, w0, tr::Constant(t, Scalar(1.702f, w0.dtype()), {"1.702", ""}),
                   {"layer_w0_scaled", dims});
    const Value layer_act = tr::Activation(t, act, scaled, {"layer_act", dims});
    const Value glu = tr::Binary(t, OpKind::kMul, w0, layer_act, {"glu", dims});
    const Value w1p =
        tr::Binary(t, OpKind::kAdd, w1, tr::Constant(t, Scalar(1.0f, w1.dtype()), {"1", ""}),
                   {"layer_w1", dims});
    out = tr::Binary(t, OpKind::kMul, glu, w1p, {"intermediate_layer", dims});
  } else {
    // DeepSeek V4's bounds (moe.py: decoder_block deepseek or deepseek4 with
    // mlp_activations_limit > 0): the same clamps as gpt-oss's, then the plain SwiGLU.
    const double limit = ctx.settings().mlp_activations_limit;
    if ((ctx.setup.decoder_block == "deepseek" || ctx.setup.decoder_block == "deepseek4") &&
        limit > 0.0 && ctx.settings().revision.behaviour.deepseek_swiglu_clamped) {
      const auto cond = t.Condition("decoder_block == deepseek4 and mlp_activations_limit > 0");
      const float bound = static_cast<float>(limit);
      layer_w0 = tr::Clip(t, layer_w0, std::nullopt, bound, {"layer_w0", dims});
      layer_w1 = tr::Clip(t, layer_w1, -bound, bound, {"layer_w1", dims});
    }
    Value layer_act = tr::Activation(t, act, layer_w0, {"layer_act", dims});
    ReleaseData(layer_w0);
    out = tr::Binary(t, OpKind::kMul, layer_act, layer_w1, {"intermediate_layer", dims});
    ReleaseData(layer_act);
    ReleaseData(layer_w1);
  }
  return tr::Cast(t, out, ctx.dtype(), {"intermediate_layer", dims});
}

}  // namespace shardtrace
