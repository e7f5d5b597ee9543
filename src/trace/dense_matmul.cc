#include "trace/dense_matmul.h"

#include <fmt/format.h>

#include <cmath>

#include "config/moe_settings.h"
#include "trace/capacity_masks.h"
#include "trace/routing.h"
#include "trace/traced_ops.h"
#include "util/error.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

Value ReshapeAndUpdateWeights(const MoeContext& ctx, const Value& weights, const Value& indices) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("reshape_and_update_weights");
  const int64_t b = weights.dim(0), s = weights.dim(1), e = ctx.setup.num_experts;
  // The index helpers are constrained too; MaxText's dump names them by the caller's variable.
  Value batch_index = tr::Constant(t, Reshape(Arange(b), {b, 1, 1}), {"index_batch", "B11"});
  batch_index = t.ShardWithLogical(batch_index, "index_batch", "B11",
                                   LogicalNames({"activation_batch", nullptr, nullptr}), "");
  Value seq_index = tr::Constant(t, Reshape(Arange(s), {s, 1}), {"index_length", "S1"});
  seq_index = t.ShardWithLogical(seq_index, "index_length", "S1",
                                 LogicalNames({"activation_length", nullptr}), "");
  const Value zeros = tr::Zeros(t, {b, s, e}, ctx.dtype(), {"update_weights", "BSE"});
  return t.Apply({OpKind::kScatterSet,
                  "",
                  {{"index", "(arange(B)[:,None,None], arange(S)[:,None], top_k_indices)"}}},
                 {&zeros, &indices, &weights}, {"weights", "BSE"}, [](const Args& a) {
                   return PutAlongAxis(*a[0], *a[1], Cast(*a[2], a[0]->dtype), -1);
                 });
}

PathOutput DenseMatmul(const MoeContext& ctx, const Value& inputs_in, const Value& gate_logits_in,
                       const std::optional<Value>& pre_bias_in, const ExpertKernels& kernels) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto scope = t.Scope("dense_matmul");
  const Value gate_logits =
      t.ShardWithLogical(gate_logits_in, "gate_logits", "BSE",
                         LogicalNames({"activation_batch_moe", "activation_length_moe", nullptr}));
  std::optional<Value> pre_bias = pre_bias_in;
  if (s.deepseek3_routing && pre_bias)
    pre_bias = t.ShardWithLogical(
        *pre_bias, "pre_bias_logits", "BSE",
        LogicalNames({"activation_batch_moe", "activation_length_moe", nullptr}));
  const TopKOutput top = GetTopK(ctx, gate_logits, pre_bias);
  ctx.Capture("top_k_weights", top.weights.array());
  ctx.Capture("top_k_indices", top.indices.array());
  t.trace().top_k_indices = top.indices.tensor;
  const bool llama4 = s.decoder_block == "llama4";
  Value inputs = inputs_in;
  std::optional<Value> weights;
  if (llama4) {
    const auto cond = t.Condition("decoder_block == llama4");
    const Value f32 = tr::Cast(t, top.weights, DType::kFloat32, {"top_k_weights", "BSK"});
    const Value sig = tr::Activation(t, "sigmoid", f32, {"router_scores", "BSK"});
    const Value scores = tr::Cast(t, sig, s.dtype, {"router_scores", "BSK"});
    inputs = tr::Binary(t, OpKind::kMul, inputs, scores, {"inputs", "BSM"});
  } else {
    weights = ReshapeAndUpdateWeights(ctx, top.weights, top.indices);
  }
  PathOutput result;
  if (!s.inference) {
    // moe.py computes these probabilities outside inference, but only load_balance_loss
    // reads them; the condition says so, so they are not mistaken for generate_masks' input.
    const auto reads =
        t.Condition("load_balance_loss_weight > 0: only load_balance_loss reads softmax_probs");
    const Value probs = RouterProbs(ctx, gate_logits);
    if (ctx.settings().load_balance_loss_weight > 0.0) {
      const auto cond = t.Condition("load_balance_loss_weight > 0");
      result.lb_loss = LoadBalanceLoss(ctx, top.indices, probs);
    }
  }
  if (ctx.settings().UpdatesLoadBalanceBias()) {
    const auto cond = t.Condition("routed_bias && routed_bias_update_rate > 0");
    result.bias_updates = LoadBalanceUpdates(ctx, top.indices);
  }
  const int64_t b = inputs.dim(0), seq = inputs.dim(1);
  int64_t cp = s.cp_autoregressive;
  if (seq % cp != 0) cp = 1;
  const int64_t sub_seq = seq / cp;
  const bool f32_acts = ctx.settings().activations_in_float32;
  const bool mlp_bias = ctx.settings().mlp_bias;

  if (s.capacity_factor > 0) {
    const auto cond = t.Condition("capacity_factor > 0");
    Masks masks;
    LogicalAxes mask_axes, dispatch_axis, mlp_axis;
    std::string dispatch_eq, up_eq, down_eq, out_eq;
    std::string lead = "B";
    if (!s.inference) {
      if (!weights)
        Fail(
            "decoder_block llama4 with capacity_factor > 0: moe.py's dense_matmul has no routing "
            "weights "
            "for generate_masks in this case (weights is unbound); use capacity_factor <= 0");
      masks = GenerateMasks(ctx, top.indices, *weights, 0);
      mask_axes =
          LogicalNames({"activation_batch_moe", "activation_norm_length_moe", nullptr, nullptr});
      dispatch_axis =
          LogicalNames({"activation_exp", "activation_batch_moe", nullptr, "activation_embed_moe"});
      mlp_axis =
          LogicalNames({"activation_exp", "activation_batch_moe", nullptr, "activation_mlp"});
      dispatch_eq = "BSM,BSEC -> EBCM";
      up_eq = "EBCM,EMH -> EBCH";
      down_eq = "EBCH,EHM -> EBCM";
      out_eq = "EBCM,BSEC -> BSM";
    } else {
      const auto inf = t.Condition("model_call_mode == inference");
      const Value probs = RouterProbs(ctx, gate_logits);
      masks = GenerateMasks(ctx, top.indices, probs, cp);
      LogicalAxes input_axis;
      // moe.py tests context_autoregressive size > 0 (always true) and cp == 1.
      if (s.cp_autoregressive > 0 && cp == 1) {
        mask_axes = LogicalNames(
            {"activation_norm_length_moe", "activation_batch_moe", nullptr, nullptr, nullptr});
        input_axis = LogicalNames({"activation_norm_length_moe", "activation_batch_moe", nullptr,
                                   "activation_embed_moe"});
      } else {
        mask_axes = LogicalNames(
            {"activation_batch_moe", "activation_norm_length_moe", nullptr, nullptr, nullptr});
        input_axis = LogicalNames({"activation_batch_moe", "activation_norm_length_moe", nullptr,
                                   "activation_embed_moe"});
      }
      dispatch_axis = LogicalNames(
          {"activation_exp", "activation_batch_moe", nullptr, nullptr, "activation_embed_moe"});
      mlp_axis = LogicalNames(
          {"activation_exp", "activation_batch_moe", nullptr, nullptr, "activation_mlp"});
      dispatch_eq = "BNSM,BNSEC -> EBNCM";
      up_eq = "EBNCM,EMH -> EBNCH";
      down_eq = "EBNCH,EHM -> EBNCM";
      out_eq = "EBNCM,BNSEC -> BNSM";
      lead = "BN";
      inputs = tr::Reshape(t, inputs, {b, cp, sub_seq, inputs.dim(2)}, {"inputs", "BNSM"});
      inputs = t.ShardWithLogical(inputs, "inputs", "BNSM", input_axis);
    }
    const std::string e_lead = "E" + lead;
    const Value dispatch_mask =
        t.ShardWithLogical(masks.dispatch, "dispatch_mask", lead + "SEC", mask_axes);
    const Value combine_mask =
        t.ShardWithLogical(masks.combine, "combine_mask", lead + "SEC", mask_axes);
    // Golden cases hold [B,S,E,C] masks; the inference masks' [B,N,S/N,E,C] is the same data.
    auto as_bsec = [&](const Array& mask) {
      return mask.rank() == 5 ? Reshape(mask, {b, seq, mask.shape[3], mask.shape[4]}) : mask;
    };
    ctx.Capture("dispatch_mask", as_bsec(dispatch_mask.array()));
    ctx.Capture("combine_mask", as_bsec(combine_mask.array()));
    t.trace().dispatch_mask = dispatch_mask.tensor;
    t.trace().combine_mask = combine_mask.tensor;
    // The release constrains dispatch, layer_w0 and layer_w1 through _maybe_shard_moe_dispatch,
    // whose parameter is `inputs`: MaxText's frame inspection names all three "moe/inputs".
    const std::optional<std::string> dispatch_helper_variable =
        ctx.settings().revision.semantics == MoeSemantics::kRelease
            ? std::optional<std::string>("inputs")
            : std::nullopt;
    Value dispatch;
    {
      const auto sc = t.Scope("dispatch");
      dispatch = tr::Einsum(t, dispatch_eq, inputs, dispatch_mask, inputs.dtype(),
                            {"dispatch", e_lead + "CM"});
      if (cp > 1) {
        const auto c2 = t.Condition("cp > 1");
        dispatch = t.ShardWithLogical(
            dispatch, "dispatch", e_lead + "CM",
            LogicalNames({nullptr, "activation_batch_moe", "activation_norm_length_moe", nullptr,
                          "activation_embed_moe"}));
      }
      dispatch = t.ShardWithLogical(dispatch, "dispatch", e_lead + "CM", dispatch_axis,
                                    dispatch_helper_variable);
    }
    auto up = [&](const char* scope_name, const char* kernel_name, const Value& kernel,
                  const std::optional<Value>& bias) {
      const auto sc = t.Scope(scope_name);
      Value k = kernel;
      if (s.ep > 1) {
        const auto c2 = t.Condition("expert parallelism > 1");
        // Constrained inside maybe_all_gather_kernel_weight_in_expert_parallelism, whose
        // local variable is `kernel`: that is the name MaxText's dump records.
        k = t.ShardWithLogical(k, kernel_name, "EMH", LogicalNames({"exp", nullptr, "mlp"}),
                               "kernel");
      }
      const std::string name = scope_name == std::string("wi_0") ? "layer_w0" : "layer_w1";
      Value out = tr::Einsum(t, up_eq, dispatch, k, s.dtype, {name, e_lead + "CH"});
      if (mlp_bias) {
        const auto c3 = t.Condition("mlp_bias");
        const Value b4 =
            tr::Reshape(t, *bias, {bias->dim(0), 1, 1, bias->dim(1)}, {"bias", "E11H"});
        out = tr::Binary(t, OpKind::kAdd, out, b4, {name, e_lead + "CH"});
      }
      if (f32_acts) {
        const auto c3 = t.Condition("activations_in_float32");
        out = tr::Cast(t, out, DType::kFloat32, {name, e_lead + "CH"});
      }
      out = t.ShardWithLogical(out, name, e_lead + "CH", mlp_axis, dispatch_helper_variable);
      return tr::CheckpointName(t, out,
                                name == std::string("layer_w0") ? "moe_mlpwi_0" : "moe_mlpwi_1");
    };
    const Value layer_w0 = up("wi_0", "w0_kernel", kernels.w0, kernels.w0_bias);
    const Value layer_w1 = up("wi_1", "w1_kernel", kernels.w1, kernels.w1_bias);
    const Value layer_multiply = ApplyFfnActivation(ctx, layer_w0, layer_w1);
    Value intermediate;
    {
      const auto sc = t.Scope("wo");
      Value k = kernels.wo;
      if (s.ep > 1) {
        const auto c2 = t.Condition("expert parallelism > 1");
        k = t.ShardWithLogical(k, "wo_kernel", "EHM", LogicalNames({"exp", "mlp", nullptr}),
                               "kernel");
      }
      intermediate =
          tr::Einsum(t, down_eq, layer_multiply, k, s.dtype, {"intermediate_layer", e_lead + "CM"});
      if (mlp_bias) {
        const auto c3 = t.Condition("mlp_bias");
        const Value b4 =
            tr::Reshape(t, *kernels.wo_bias,
                        {kernels.wo_bias->dim(0), 1, 1, kernels.wo_bias->dim(1)}, {"bias", "E11M"});
        intermediate =
            tr::Binary(t, OpKind::kAdd, intermediate, b4, {"intermediate_layer", e_lead + "CM"});
      }
      if (f32_acts) {
        const auto c3 = t.Condition("activations_in_float32");
        intermediate =
            tr::Cast(t, intermediate, DType::kFloat32, {"intermediate_layer", e_lead + "CM"});
      }
      if (!s.inference)
        intermediate = t.ShardWithLogical(intermediate, "intermediate_layer", e_lead + "CM",
                                          LogicalNames({"activation_exp", "activation_batch_moe",
                                                        nullptr, "activation_embed_moe"}));
      intermediate = tr::CheckpointName(t, intermediate, "moe_mlpwo");
    }
    {
      const auto sc = t.Scope("combine");
      const DType out_dtype = PromoteTypes(intermediate.dtype(), combine_mask.dtype());
      Value output =
          tr::Einsum(t, out_eq, intermediate, combine_mask, out_dtype, {"output", lead + "SM"});
      if (output.shape().size() == 4)
        output =
            tr::Reshape(t, output, {output.dim(0), output.dim(1) * output.dim(2), output.dim(3)},
                        {"output", "BSM"});
      result.output = output;
    }
    return result;
  }

  const auto cond = t.Condition("capacity_factor <= 0");
  inputs = t.ShardWithLogical(
      inputs, "inputs", "BSM",
      LogicalNames({"activation_batch_moe", "activation_norm_length_moe", "activation_embed_moe"}));
  auto up = [&](const char* scope_name, const char* name, const Value& kernel,
                const std::optional<Value>& bias) {
    const auto sc = t.Scope(scope_name);
    Value out = tr::Einsum(t, "BSM,EMH -> BSEH", inputs, kernel, s.dtype, {name, "BSEH"});
    if (mlp_bias) {
      const auto c3 = t.Condition("mlp_bias");
      out = tr::Binary(t, OpKind::kAdd, out, *bias, {name, "BSEH"});
    }
    if (f32_acts) {
      const auto c3 = t.Condition("activations_in_float32");
      out = tr::Cast(t, out, DType::kFloat32, {name, "BSEH"});
    }
    return tr::CheckpointName(t, out,
                              name == std::string("layer_w0") ? "moe_mlpwi_0" : "moe_mlpwi_1");
  };
  const Value layer_w0 = up("wi_0", "layer_w0", kernels.w0, kernels.w0_bias);
  const Value layer_w1 = up("wi_1", "layer_w1", kernels.w1, kernels.w1_bias);
  const Value layer_multiply = ApplyFfnActivation(ctx, layer_w0, layer_w1);
  Value intermediate;
  {
    const auto sc = t.Scope("wo");
    intermediate = tr::Einsum(t, "BSEH,EHM -> BSEM", layer_multiply, kernels.wo, s.dtype,
                              {"intermediate_layer", "BSEM"});
    if (mlp_bias) {
      const auto c3 = t.Condition("mlp_bias");
      intermediate = tr::Binary(t, OpKind::kAdd, intermediate, *kernels.wo_bias,
                                {"intermediate_layer", "BSEM"});
    }
    if (f32_acts) {
      const auto c3 = t.Condition("activations_in_float32");
      intermediate = tr::Cast(t, intermediate, DType::kFloat32, {"intermediate_layer", "BSEM"});
    }
    intermediate = tr::CheckpointName(t, intermediate, "moe_mlpwo");
  }
  {
    const auto sc = t.Scope("weight_sum");
    if (llama4) {
      const Value ones =
          t.Apply({OpKind::kOnesLike, "", {}}, {&top.weights}, {"top_k_weights", "BSK"},
                  [](const Args& a) { return FullLike(*a[0], 1.0f, a[0]->dtype); });
      weights = ReshapeAndUpdateWeights(ctx, ones, top.indices);
    }
    Value w = *weights;
    if (ctx.settings().float32_weight_sum) {
      const auto c3 = t.Condition("float32_weight_sum");
      intermediate = tr::Cast(t, intermediate, DType::kFloat32, {"intermediate_layer", "BSEM"});
      w = tr::Cast(t, w, DType::kFloat32, {"weights", "BSE"});
    }
    const DType sum_dtype = PromoteTypes(intermediate.dtype(), w.dtype());
    const Value output =
        tr::Einsum(t, "BSEM,BSE -> BSM", intermediate, w, sum_dtype, {"output", "BSM"});
    result.output = tr::Cast(t, output, s.dtype, {"output", "BSM"});
  }
  return result;
}

}  // namespace shardtrace
