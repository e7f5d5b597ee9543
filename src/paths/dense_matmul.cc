#include "paths/dense_matmul.h"

#include <fmt/format.h>

#include <cmath>

#include "config/moe_lines.h"
#include "config/moe_settings.h"
#include "paths/capacity_masks.h"
#include "paths/routing.h"
#include "paths/traced_ops.h"
#include "util/error.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

Value ReshapeAndUpdateWeights(const MoeContext& ctx, const Value& weights, const Value& indices) {
  Tracer& t = ctx.t;
  const auto scope = t.Scope("reshape_and_update_weights");
  const int64_t b = weights.dim(0), s = weights.dim(1), e = ctx.setup.num_experts;
  // moe.py allocates the [B,S,E] zeros first (kUpdateWeightsZeros), then the index helpers.
  const Value zeros = tr::Zeros(t, {b, s, e}, ctx.dtype(), {"update_weights", "BSE"});
  // The index helpers are constrained too; MaxText's dump names them by the caller's variable.
  // The values only in a numeric run: a symbolic one at full size (S up to 2^31) must not
  // materialise an index per token.
  const auto index_helper = [&t](int64_t n, Shape shape) {
    return t.numeric() ? Reshape(Arange(n), shape)
                       : Array::Symbolic(std::move(shape), DType::kInt32);
  };
  Value batch_index = tr::Constant(t, index_helper(b, {b, 1, 1}), {"index_batch", "B11"});
  batch_index = t.ShardWithLogical(batch_index, "index_batch", "B11",
                                   LogicalNames({"activation_batch", nullptr, nullptr}), "");
  Value seq_index = tr::Constant(t, index_helper(s, {s, 1}), {"index_length", "S1"});
  seq_index = t.ShardWithLogical(seq_index, "index_length", "S1",
                                 LogicalNames({"activation_length", nullptr}), "");
  return t.Apply(
      {OpKind::kScatterSet,
       "",
       {{"index", "(arange(B)[:,None,None], arange(S)[:,None], top_k_indices)"}}},
      {&zeros, &indices, &weights}, {"weights", "BSE"},
      [](const Args& a) { return PutAlongAxis(*a[0], *a[1], Cast(*a[2], a[0]->dtype), -1); },
      // The weights land at the indices (distinct per token): their cotangent is
      // read back from there; the zeros they overwrite carry none.
      [](const Args& a, const Args&, const Args& g) {
        return std::vector<Array>{Array{}, Array{},
                                  Cast(TakeAlongAxis(*g[0], *a[1], -1), a[2]->dtype)};
      });
}

namespace {

// What dense_matmul's routing preamble leaves for both branches: the top-k choices, the
// [B,S,E] routing weights (unset for llama4, which scales the inputs instead) and the
// inputs the experts see.
struct DenseRouting {
  TopKOutput top;
  std::optional<Value> weights;
  Value inputs;
};

// The capacity branch's layout: the constrained masks, the einsum equations and the
// logical axes of dispatch and the expert activations. `lead` is "B", or "BN" for the
// inference masks grouped by context partition.
struct DroppingLayout {
  Value dispatch_mask, combine_mask;
  LogicalAxes dispatch_axis, mlp_axis;
  std::string dispatch_eq, up_eq, down_eq, out_eq;
  std::string lead = "B";
  // The release constrains dispatch, layer_w0 and layer_w1 through _maybe_shard_moe_dispatch,
  // whose parameter is `inputs`: MaxText's frame inspection names all three "moe/inputs".
  std::optional<std::string> dispatch_helper_variable;
  // moe_dispatch_no_expert_sharding (training branch only): _maybe_shard_moe_dispatch resolves
  // each logical dim on its own and takes 'expert' off the batch dim (index 1).
  bool peel_expert = false;
};

// _maybe_shard_moe_dispatch(x, axes, peel_expert): without the peel, the whole tuple through
// the rules (the batch dim takes 'expert' from the expert dim, as flax's resolution goes);
// with it, each dim resolved alone, then 'expert' removed from the batch dim, constrained by
// that spec (MaxText's dump: logical "Unknown").
Value ShardDispatch(const MoeContext& ctx, const DroppingLayout& l, const Value& x,
                    const std::string& name, const std::string& dims, const LogicalAxes& axes) {
  Tracer& t = ctx.t;
  if (!l.peel_expert) return t.ShardWithLogical(x, name, dims, axes, l.dispatch_helper_variable);
  std::vector<PartitionSpec::Entry> entries;
  for (size_t i = 0; i < axes.size(); ++i) {
    PartitionSpec::Entry entry;
    if (axes[i]) entry = ResolveSpec({axes[i]}, t.rules(), &t.mesh())[0];
    if (i == 1) std::erase(entry, std::string("expert"));
    entries.push_back(std::move(entry));
  }
  return t.ShardWithPspec(x, name, dims, PartitionSpec(std::move(entries)),
                          l.dispatch_helper_variable);
}

// get_topk, the routing weights, the load-balance loss and bias updates, as dense_matmul
// computes them before either branch.
DenseRouting Route(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                   const std::optional<Value>& pre_bias, PathOutput& result) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const RevisionId rev = s.settings.revision.id;
  DenseRouting r{GetTopK(ctx, gate_logits, pre_bias), std::nullopt, inputs};
  ctx.Capture(Capture::kTopKWeights, r.top.weights.array());
  ctx.Capture(Capture::kTopKIndices, r.top.indices.array());
  t.trace().top_k_indices = r.top.indices.tensor;
  tr::Tag(t, r.top.indices, "moe_routing_maps");  // routing_tag_fn (moe.py:425-434)
  if (s.decoder_block == "llama4") {
    const auto cond = t.Condition("decoder_block == llama4");
    const Value f32 = tr::Cast(t, r.top.weights, DType::kFloat32, {"top_k_weights", "BSK"});
    const Value sig = tr::Activation(t, "sigmoid", f32, {"router_scores", "BSK"});
    const Value scores = tr::Cast(t, sig, s.dtype, {"router_scores", "BSK"});
    ctx.Capture(Capture::kRouterScores, scores.array());
    r.inputs = tr::Binary(t, OpKind::kMul, r.inputs, scores, {"inputs", "BSM"});
  } else {
    r.weights = ReshapeAndUpdateWeights(ctx, r.top.weights, r.top.indices);
  }
  if (!s.inference) {
    // moe.py computes these probabilities whenever it is not inferring (kTrainSoftmax), but only
    // load_balance_loss reads them: a note says so, so they are not mistaken for the
    // softmax_probs generate_masks works on (that is `weights`, kGenerateMasksCall).
    const auto cond = t.Condition("model_call_mode != inference");
    const Value probs = RouterProbs(ctx, gate_logits);
    const bool loss = ctx.settings().load_balance_loss_weight > 0.0;
    t.Annotate(probs,
               fmt::format("{}{}",
                           loss ? fmt::format("read only by load_balance_loss ({})",
                                              MoeRef(rev, {MoeStatement::kLbLossCall}))
                                : fmt::format("unused here: only load_balance_loss reads it ({}), "
                                              "load_balance_loss_weight = 0",
                                              MoeRef(rev, {MoeStatement::kLbLossCall})),
                           s.capacity_factor > 0
                               ? fmt::format("; not the masks' softmax_probs ({})",
                                             MoeRefStart(rev, {MoeStatement::kGenerateMasksCall}))
                               : ""));
    if (loss) {
      const auto cond = t.Condition("load_balance_loss_weight > 0");
      result.lb_loss = LoadBalanceLoss(ctx, r.top.indices, probs);
    }
  }
  if (ctx.settings().UpdatesLoadBalanceBias()) {
    const auto cond = t.Condition("routed_bias && routed_bias_update_rate > 0");
    result.bias_updates = LoadBalanceUpdates(ctx, r.top.indices);
  }
  return r;
}

// generate_masks (training) or generate_masks_subgroup (inference, `cp` context groups,
// which also regroups the inputs [B,N,S/N,M]), then the masks' constraints.
DroppingLayout ConstrainedMasks(const MoeContext& ctx, DenseRouting& r, const Value& gate_logits,
                                int64_t cp) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const RevisionId rev = s.settings.revision.id;
  DroppingLayout l;
  Masks masks;
  LogicalAxes mask_axes;
  const int64_t b = r.inputs.dim(0), seq = r.inputs.dim(1);
  if (!s.inference) {
    if (!r.weights)
      Fail(
          "decoder_block llama4 with capacity_factor > 0: moe.py's dense_matmul has no routing "
          "weights "
          "for generate_masks in this case (weights is unbound); use capacity_factor <= 0");
    masks = GenerateMasks(ctx, r.top.indices, *r.weights, 0);
    mask_axes =
        LogicalNames({"activation_batch_moe", "activation_norm_length_moe", nullptr, nullptr});
    l.dispatch_axis =
        LogicalNames({"activation_exp", "activation_batch_moe", nullptr, "activation_embed_moe"});
    l.mlp_axis =
        LogicalNames({"activation_exp", "activation_batch_moe", nullptr, "activation_mlp"});
    l.peel_expert = ctx.settings().moe_dispatch_no_expert_sharding;
    l.dispatch_eq = "BSM,BSEC -> EBCM";
    l.up_eq = "EBCM,EMH -> EBCH";
    l.down_eq = "EBCH,EHM -> EBCM";
    l.out_eq = "EBCM,BSEC -> BSM";
  } else {
    const auto inf = t.Condition("model_call_mode == inference");
    const Value probs = RouterProbs(ctx, gate_logits);
    // What the combine mask's weights are taken from (the invariants compare them).
    ctx.Capture(Capture::kSoftmaxProbs, probs.array());
    t.Annotate(probs,
               fmt::format("the combine weights: the softmax over all experts, not the top-k "
                           "weights ({})",
                           MoeRef(rev, {MoeStatement::kInferenceSubgroupMasks})));
    if (r.weights)
      t.Annotate(*r.weights, fmt::format("unused in inference: the masks take softmax_probs ({})",
                                         MoeRef(rev, {MoeStatement::kInferenceMasksCall})));
    masks = GenerateMasks(ctx, r.top.indices, probs, cp);
    LogicalAxes input_axis;
    // moe.py tests context_autoregressive size > 0 (always true) and cp == 1.
    if (s.cp_autoregressive > 0 && cp == 1) {
      mask_axes = LogicalNames(
          {"activation_norm_length_moe", "activation_batch_moe", nullptr, nullptr, nullptr});
      input_axis = LogicalNames(
          {"activation_norm_length_moe", "activation_batch_moe", nullptr, "activation_embed_moe"});
    } else {
      mask_axes = LogicalNames(
          {"activation_batch_moe", "activation_norm_length_moe", nullptr, nullptr, nullptr});
      input_axis = LogicalNames(
          {"activation_batch_moe", "activation_norm_length_moe", nullptr, "activation_embed_moe"});
    }
    l.dispatch_axis = LogicalNames(
        {"activation_exp", "activation_batch_moe", nullptr, nullptr, "activation_embed_moe"});
    l.mlp_axis = LogicalNames(
        {"activation_exp", "activation_batch_moe", nullptr, nullptr, "activation_mlp"});
    l.dispatch_eq = "BNSM,BNSEC -> EBNCM";
    l.up_eq = "EBNCM,EMH -> EBNCH";
    l.down_eq = "EBNCH,EHM -> EBNCM";
    l.out_eq = "EBNCM,BNSEC -> BNSM";
    l.lead = "BN";
    r.inputs = tr::Reshape(t, r.inputs, {b, cp, seq / cp, r.inputs.dim(2)}, {"inputs", "BNSM"});
    r.inputs = t.ShardWithLogical(r.inputs, "inputs", "BNSM", input_axis);
  }
  l.dispatch_mask = t.ShardWithLogical(masks.dispatch, "dispatch_mask", l.lead + "SEC", mask_axes);
  l.combine_mask = t.ShardWithLogical(masks.combine, "combine_mask", l.lead + "SEC", mask_axes);
  // Golden cases hold [B,S,E,C] masks; the inference masks' [B,N,S/N,E,C] is the same data.
  auto as_bsec = [&](const Array& mask) {
    return mask.rank() == 5 ? Reshape(mask, {b, seq, mask.shape[3], mask.shape[4]}) : mask;
  };
  ctx.Capture(Capture::kDispatchMask, as_bsec(l.dispatch_mask.array()));
  ctx.Capture(Capture::kCombineMask, as_bsec(l.combine_mask.array()));
  if (l.dispatch_mask.shape().size() == 5) {
    // The page's trees draw the subgroups as the inference path holds them.
    ctx.Capture(Capture::kDispatchMaskSubgroups, l.dispatch_mask.array());
    ctx.Capture(Capture::kCombineMaskSubgroups, l.combine_mask.array());
  }
  t.trace().dispatch_mask = l.dispatch_mask.tensor;
  t.trace().combine_mask = l.combine_mask.tensor;
  if (ctx.settings().revision.behaviour.dispatch_constrained_in_helper)
    l.dispatch_helper_variable = "inputs";
  return l;
}

// dispatch = einsum(inputs, dispatch_mask), constrained.
Value Dispatch(const MoeContext& ctx, const DroppingLayout& l, const Value& inputs, int64_t cp) {
  Tracer& t = ctx.t;
  const std::string e_lead = "E" + l.lead;
  const auto sc = t.Scope("dispatch");
  Value dispatch = tr::Einsum(t, l.dispatch_eq, inputs, l.dispatch_mask, inputs.dtype(),
                              {"dispatch", e_lead + "CM"});
  if (cp > 1) {
    const auto c2 = t.Condition("cp > 1");
    dispatch = t.ShardWithLogical(
        dispatch, "dispatch", e_lead + "CM",
        LogicalNames({nullptr, "activation_batch_moe", "activation_norm_length_moe", nullptr,
                      "activation_embed_moe"}));
  }
  return ShardDispatch(ctx, l, dispatch, "dispatch", e_lead + "CM", l.dispatch_axis);
}

// The experts on the dispatched slots: wi_0 and wi_1 (EP all-gathered kernels), the
// activation, wo; returns the constrained intermediate_layer [E,B(,N),C,M].
Value DroppingExperts(const MoeContext& ctx, const DroppingLayout& l, const Value& dispatch,
                      const ExpertKernels& kernels) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const bool f32_acts = ctx.settings().activations_in_float32;
  const bool mlp_bias = ctx.settings().mlp_bias;
  const std::string e_lead = "E" + l.lead;
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
    Value out = tr::Einsum(t, l.up_eq, dispatch, k, s.dtype, {name, e_lead + "CH"});
    if (mlp_bias) {
      const auto c3 = t.Condition("mlp_bias");
      const Value b4 = tr::Reshape(t, *bias, {bias->dim(0), 1, 1, bias->dim(1)}, {"bias", "E11H"});
      out = tr::Binary(t, OpKind::kAdd, out, b4, {name, e_lead + "CH"});
    }
    if (f32_acts) {
      const auto c3 = t.Condition("activations_in_float32");
      out = tr::Cast(t, out, DType::kFloat32, {name, e_lead + "CH"});
    }
    out = ShardDispatch(ctx, l, out, name, e_lead + "CH", l.mlp_axis);
    const bool w0 = name == std::string("layer_w0");
    return tr::CheckpointName(t, out, w0 ? "moe_mlpwi_0" : "moe_mlpwi_1",
                              w0 ? "mlpwi_0" : "mlpwi_1");
  };
  const Value layer_w0 = up("wi_0", "w0_kernel", kernels.w0, kernels.w0_bias);
  const Value layer_w1 = up("wi_1", "w1_kernel", kernels.w1, kernels.w1_bias);
  const Value layer_multiply = ApplyFfnActivation(ctx, layer_w0, layer_w1);
  const auto sc = t.Scope("wo");
  Value k = kernels.wo;
  if (s.ep > 1) {
    const auto c2 = t.Condition("expert parallelism > 1");
    k = t.ShardWithLogical(k, "wo_kernel", "EHM", LogicalNames({"exp", "mlp", nullptr}), "kernel");
  }
  Value intermediate =
      tr::Einsum(t, l.down_eq, layer_multiply, k, s.dtype, {"intermediate_layer", e_lead + "CM"});
  if (mlp_bias) {
    const auto c3 = t.Condition("mlp_bias");
    const Value b4 =
        tr::Reshape(t, *kernels.wo_bias, {kernels.wo_bias->dim(0), 1, 1, kernels.wo_bias->dim(1)},
                    {"bias", "E11M"});
    intermediate =
        tr::Binary(t, OpKind::kAdd, intermediate, b4, {"intermediate_layer", e_lead + "CM"});
  }
  if (f32_acts) {
    const auto c3 = t.Condition("activations_in_float32");
    intermediate =
        tr::Cast(t, intermediate, DType::kFloat32, {"intermediate_layer", e_lead + "CM"});
  }
  if (!s.inference)
    intermediate = t.ShardWithLogical(
        intermediate, "intermediate_layer", e_lead + "CM",
        LogicalNames({"activation_exp", "activation_batch_moe", nullptr, "activation_embed_moe"}));
  return tr::CheckpointName(t, intermediate, "moe_mlpwo", "mlpwo");
}

// output = einsum(intermediate_layer, combine_mask), back to [B,S,M].
Value Combine(const MoeContext& ctx, const DroppingLayout& l, const Value& intermediate) {
  Tracer& t = ctx.t;
  const auto sc = t.Scope("combine");
  const DType out_dtype = PromoteTypes(intermediate.dtype(), l.combine_mask.dtype());
  Value output =
      tr::Einsum(t, l.out_eq, intermediate, l.combine_mask, out_dtype, {"output", l.lead + "SM"});
  if (output.shape().size() == 4)
    output = tr::Reshape(t, output, {output.dim(0), output.dim(1) * output.dim(2), output.dim(3)},
                         {"output", "BSM"});
  return output;
}

// capacity_factor <= 0: every token through every expert; returns intermediate_layer
// [B,S,E,M].
Value DroplessExperts(const MoeContext& ctx, const Value& inputs, const ExpertKernels& kernels) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const bool f32_acts = ctx.settings().activations_in_float32;
  const bool mlp_bias = ctx.settings().mlp_bias;
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
    const bool w0 = name == std::string("layer_w0");
    return tr::CheckpointName(t, out, w0 ? "moe_mlpwi_0" : "moe_mlpwi_1",
                              w0 ? "mlpwi_0" : "mlpwi_1");
  };
  const Value layer_w0 = up("wi_0", "layer_w0", kernels.w0, kernels.w0_bias);
  const Value layer_w1 = up("wi_1", "layer_w1", kernels.w1, kernels.w1_bias);
  const Value layer_multiply = ApplyFfnActivation(ctx, layer_w0, layer_w1);
  const auto sc = t.Scope("wo");
  Value intermediate = tr::Einsum(t, "BSEH,EHM -> BSEM", layer_multiply, kernels.wo, s.dtype,
                                  {"intermediate_layer", "BSEM"});
  if (mlp_bias) {
    const auto c3 = t.Condition("mlp_bias");
    intermediate =
        tr::Binary(t, OpKind::kAdd, intermediate, *kernels.wo_bias, {"intermediate_layer", "BSEM"});
  }
  if (f32_acts) {
    const auto c3 = t.Condition("activations_in_float32");
    intermediate = tr::Cast(t, intermediate, DType::kFloat32, {"intermediate_layer", "BSEM"});
  }
  return tr::CheckpointName(t, intermediate, "moe_mlpwo", "mlpwo");
}

// The routing-weighted sum over experts of the dropless branch (llama4: weights of one).
Value WeightSum(const MoeContext& ctx, const DenseRouting& r, Value intermediate) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto sc = t.Scope("weight_sum");
  std::optional<Value> weights = r.weights;
  if (s.decoder_block == "llama4") {
    const Value ones = t.Apply(
        {OpKind::kOnesLike, "", {}}, {&r.top.weights}, {"top_k_weights", "BSK"},
        [](const Args& a) { return FullLike(*a[0], 1.0f, a[0]->dtype); },
        [](const Args&, const Args&, const Args&) { return std::vector<Array>{Array{}}; });
    weights = ReshapeAndUpdateWeights(ctx, ones, r.top.indices);
  }
  Value w = *weights;
  // The [B,S,E] weights the sum uses (the routing tree of the dropless page reads them).
  ctx.Capture(Capture::kWeights, w.array());
  if (ctx.settings().float32_weight_sum) {
    const auto c3 = t.Condition("float32_weight_sum");
    intermediate = tr::Cast(t, intermediate, DType::kFloat32, {"intermediate_layer", "BSEM"});
    w = tr::Cast(t, w, DType::kFloat32, {"weights", "BSE"});
  }
  const DType sum_dtype = PromoteTypes(intermediate.dtype(), w.dtype());
  const Value output =
      tr::Einsum(t, "BSEM,BSE -> BSM", intermediate, w, sum_dtype, {"output", "BSM"});
  return tr::Cast(t, output, s.dtype, {"output", "BSM"});
}

}  // namespace

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
  PathOutput result;
  DenseRouting routing = Route(ctx, inputs_in, gate_logits, pre_bias, result);
  int64_t cp = s.cp_autoregressive;
  if (routing.inputs.dim(1) % cp != 0) cp = 1;

  if (s.capacity_factor > 0) {
    const auto cond = t.Condition("capacity_factor > 0");
    const DroppingLayout layout = ConstrainedMasks(ctx, routing, gate_logits, cp);
    const Value dispatch = Dispatch(ctx, layout, routing.inputs, cp);
    const Value intermediate = DroppingExperts(ctx, layout, dispatch, kernels);
    result.output = Combine(ctx, layout, intermediate);
    return result;
  }
  const auto cond = t.Condition("capacity_factor <= 0");
  const Value inputs = t.ShardWithLogical(
      routing.inputs, "inputs", "BSM",
      LogicalNames({"activation_batch_moe", "activation_norm_length_moe", "activation_embed_moe"}));
  const Value intermediate = DroplessExperts(ctx, inputs, kernels);
  result.output = WeightSum(ctx, routing, intermediate);
  return result;
}

}  // namespace shardtrace
