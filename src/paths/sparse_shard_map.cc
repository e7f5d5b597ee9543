#include "paths/sparse_shard_map.h"

#include <fmt/format.h>

#include <algorithm>

#include "config/moe_settings.h"
#include "numeric/activations.h"
#include "numeric/elementwise.h"
#include "numeric/index_ops.h"
#include "numeric/shape_ops.h"
#include "paths/traced_ops.h"
#include "shard/mesh.h"
#include "util/error.h"

namespace shardtrace {

namespace {

// Inside shard_map the wi gmm contracts the tokens' embed dim with the kernels' (w0 dim 1),
// each split by its own in_spec. When the two splits differ (tensor and tensor_transpose both
// > 1: activation_embed spans both axes, embed_tensor_transpose only one), moe.py's gmm gets
// mismatched shapes and MaxText fails at trace time; say why here rather than at the gmm.
void CheckGmmContraction(const MoeContext& ctx, const RoutedShardings& r) {
  const Mesh& mesh = ctx.t.mesh();
  const auto parts = [&](const PartitionSpec& spec, size_t dim) {
    return dim < spec.rank() ? mesh.Size(spec[dim]) : int64_t{1};
  };
  const int64_t tokens = parts(r.input, 2);
  const int64_t kernels = parts(r.w0, 1);
  if (tokens == kernels) return;
  const int64_t m = ctx.setup.emb;
  Fail(
      "sparse_matmul with ici_tensor_parallelism={} and ici_tensor_transpose_parallelism={}: "
      "moe.py ({}) splits the tokens' embed dim by {} (input_partition_pspec {}) but the wi "
      "kernels' by {} (w0_pspec {}), so its gmm contracts {} against {} and MaxText fails here "
      "too; set one of the two to 1",
      ctx.setup.tp, ctx.setup.tp_transpose, ctx.settings().revision.name, tokens,
      r.input.ToString(), kernels, r.w0.ToString(), m / tokens, m / kernels);
}

// Rules that map no mesh axis to the expert dim under expert parallelism (deepseek3-671b-2dfsdp:
// no 'exp' rule) hand every EP shard all E experts, P(None, ...). moe.py's megablox gmm then gets
// rhs of E groups with the shard's E/EP local group sizes and group_offset 0
// (get_gmm_for_local_experts), and reads rhs group j for local group j: shard s multiplies the
// tokens it received for expert s*E/EP+j by expert j's kernel. MaxText lowers and runs this
// (tools/maxtext_oracle/replicated_experts.py measured it on fake CPU devices, case
// shared_2dfsdp_fsdp2_ep2); shardtrace traces it with those semantics (Gmm) and warns. The
// other grouped matmuls are not established there and stay refused.
bool ExpertsReplicatedIntoMegablox(const MoeContext& ctx, const Value& w0) {
  const MoeSetup& s = ctx.setup;
  const MoeSettings& c = ctx.settings();
  return s.ep > 1 && w0.dim(0) == s.num_experts && s.gmm_kernel == "megablox" &&
         !s.ring_of_experts && !c.mlp_bias && !c.shard_exp_on_fsdp && !c.use_2d_fsdp_sharding &&
         !c.use_batch_split_schedule;
}

void WarnWrongExperts(const MoeContext& ctx, const PartitionSpec& w0_spec) {
  const MoeSetup& s = ctx.setup;
  const int64_t local = s.num_experts / s.ep;
  ctx.t.Warn(fmt::format(
      "the logical rules map no mesh axis to 'exp', so sparse_matmul's in_specs ({}) give each "
      "of the {} shards of {} all {} experts and moe.py's megablox gmm (group_offset 0) "
      "multiplies the tokens a shard s receives for its local expert j by expert j's kernel "
      "instead of expert s*{}+j's: with this mesh MaxText computes a different block than on "
      "one device (only the tokens routed to experts 0-{} get their own experts)",
      w0_spec.ToString(), s.ep, PartitionSpec::EntryToString(s.expert_axes), s.num_experts, local,
      local - 1));
  ctx.t.Note(fmt::format(
      "experts replicated into shard_map: every device holds all {} experts' kernels; the gmm "
      "reads groups 0-{} of them, and in the training step megablox's tgmm writes their "
      "gradients only: the weight gradients of experts {}-{} are never written (uninitialized "
      "memory; NaN in shardtrace's numeric gradients, as in Pallas interpret mode)",
      s.num_experts, local - 1, local, s.num_experts - 1));
}

}  // namespace

// get_routed_moe_shardings. The seed resolves these with config.logical_axis_rules (the
// ambient rules only under pipeline parallelism, which are the same rules here).
RoutedShardings GetRoutedMoeShardings(const MoeContext& ctx, bool batch_sharded_by_expert) {
  const MoeSettings& c = ctx.settings();
  auto resolve = [&](const std::optional<LogicalAxes>& axes) {
    return ResolveSpec(*axes, ctx.t.rules(), &ctx.t.mesh());
  };
  RoutedShardings r;
  r.batch_logical_axis = batch_sharded_by_expert ? "activation_batch" : "decode_batch_moe";
  const char* batch = r.batch_logical_axis.c_str();
  if (ctx.setup.tp_transpose > 1) {
    r.input_axes = LogicalNames({batch, "activation_norm_length", "activation_embed"});
    r.w0_bias_axes = r.w1_bias_axes = LogicalNames({"exp", nullptr});
  } else {
    r.input_axes = LogicalNames({batch, "activation_norm_length", nullptr});
    r.w0_bias_axes = r.w1_bias_axes = LogicalNames({"exp", "activation_mlp"});
  }
  r.wo_bias_axes = LogicalNames({"exp", "activation_embed"});
  r.w0_bias = resolve(r.w0_bias_axes);
  r.w1_bias = resolve(r.w1_bias_axes);
  r.wo_bias = resolve(r.wo_bias_axes);
  r.input = resolve(r.input_axes);
  r.gate_axes = LogicalNames({batch, "activation_norm_length", nullptr});
  r.gate_logits = resolve(r.gate_axes);
  if (ctx.setup.deepseek3_routing) r.pre_bias_logits = r.gate_logits;
  if (c.shard_exp_on_fsdp) {
    // The fixed-calibration qwix rule (init axes) needs quantization, which shardtrace does
    // not model; unquantized runs take the dsv3 rule.
    r.w0_axes = r.w1_axes = LogicalNames({"embed_tensor_transpose", nullptr, "mlp_no_fsdp"});
    r.wo_axes = LogicalNames({"embed_tensor_transpose", "mlp_no_fsdp", nullptr});
  } else if (c.use_2d_fsdp_sharding) {
    r.w0_axes = r.w1_axes = r.wo_axes =
        LogicalNames({"embed_tensor_transpose", "mlp_no_fsdp", nullptr});
  } else if (c.revision.behaviour.sparse_kernel_specs == SparseKernelSpecs::kExpWithoutFsdp) {
    // main and the release gather the embed dim and then take 'fsdp' out of the spec wherever
    // the rules put it (remove_mesh_axes_from_partition_spec, below), so an 'exp' on fsdp is
    // gathered too.
    r.w0_axes = r.w1_axes = LogicalNames({"exp", nullptr, "mlp_no_fsdp"});
    r.wo_axes = LogicalNames({"exp", "mlp_no_fsdp", nullptr});
  } else {
    r.w0_axes = r.w1_axes = LogicalNames({"exp", "embed_tensor_transpose", "mlp_no_fsdp"});
    r.wo_axes = LogicalNames({"exp", "mlp_no_fsdp", "embed_tensor_transpose"});
  }
  r.w0 = resolve(r.w0_axes);
  r.w1 = resolve(r.w1_axes);
  r.wo = resolve(r.wo_axes);
  if (c.revision.behaviour.sparse_kernel_specs == SparseKernelSpecs::kExpWithoutFsdp &&
      !c.shard_exp_on_fsdp && !c.use_2d_fsdp_sharding) {
    const auto without_fsdp = [](const PartitionSpec& spec) {
      std::vector<PartitionSpec::Entry> entries;
      for (const PartitionSpec::Entry& e : spec.entries()) {
        PartitionSpec::Entry kept;
        for (const std::string& axis : e)
          if (axis != "fsdp") kept.push_back(axis);
        entries.push_back(kept);
      }
      return PartitionSpec(entries);
    };
    r.w0 = without_fsdp(r.w0);
    r.w1 = without_fsdp(r.w1);
    r.wo = without_fsdp(r.wo);
  }
  r.output_axes = LogicalNames({batch, "activation_norm_length", "activation_embed"});
  r.output = resolve(r.output_axes);
  CheckGmmContraction(ctx, r);
  return r;
}

namespace {

// moe.py builds these pspecs from logical axes (logical_to_mesh_axes) and hands the spec
// to _maybe_shard_with_pspec / shard_map: the record keeps the axes behind it, so a reader
// sees which logical name put each mesh axis there. The debug dump still says "Unknown",
// as MaxText's does.
Value WithAxes(Tracer& t, Value v, const std::optional<LogicalAxes>& axes) {
  if (axes) t.trace().tensors[v.tensor].logical_axes = *axes;
  return v;
}

}  // namespace

// The part of `spec` left when `axes` are removed (used for the all-gathered ring batch).
PartitionSpec WithoutAxes(const PartitionSpec& spec, const std::vector<std::string>& axes) {
  std::vector<PartitionSpec::Entry> entries;
  for (const PartitionSpec::Entry& e : spec.entries()) {
    PartitionSpec::Entry kept;
    for (const std::string& a : e)
      if (std::find(axes.begin(), axes.end(), a) == axes.end()) kept.push_back(a);
    entries.push_back(kept);
  }
  return PartitionSpec(entries);
}

ShardMapOperands EnterSparseShardMap(const MoeContext& ctx, const Value& inputs_in,
                                     const Value& gate_logits_in,
                                     const std::optional<Value>& pre_bias_in,
                                     const ExpertKernels& k_in, const std::string& body_scope,
                                     const std::optional<PartitionSpec>& wi_spec_override) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const MoeSettings& c = ctx.settings();
  RoutedShardings sh = GetRoutedMoeShardings(ctx, s.batch_sharded_by_ep);
  // The chunked pipeline keeps wi_0/wi_1 sharded along the embedding up to and into the
  // shard_map, so both the constraint and the in_spec use its spec.
  if (wi_spec_override) {
    sh.w0 = sh.w1 = *wi_spec_override;
    sh.w0_axes = sh.w1_axes = std::nullopt;  // the proposal writes the spec directly
  }
  t.Note(fmt::format("gmm kernel: {}", s.gmm_kernel));
  ExpertKernels k = k_in;
  if (c.moe_fsdp_use_two_stage_all_gather) {
    const auto cond = t.Condition("moe_fsdp_use_two_stage_all_gather");
    const LogicalAxes wi1 = LogicalNames({"exp_with_fsdp", "embed_tensor_transpose", "mlp"});
    const LogicalAxes wo1 = LogicalNames({"exp_with_fsdp", "mlp", "embed_tensor_transpose"});
    k.w0 = t.ShardWithLogical(k.w0, "w0_kernel", "EMH", wi1);
    k.w1 = t.ShardWithLogical(k.w1, "w1_kernel", "EMH", wi1);
    k.wo = t.ShardWithLogical(k.wo, "wo_kernel", "EHM", wo1);
    k.w0 = t.OptimizationBarrier(k.w0);
    k.w1 = t.OptimizationBarrier(k.w1);
    k.wo = t.OptimizationBarrier(k.wo);
    const LogicalAxes wi2 =
        LogicalNames({"exp_with_fsdp", "embed_tensor_transpose", "mlp_no_fsdp"});
    const LogicalAxes wo2 =
        LogicalNames({"exp_with_fsdp", "mlp_no_fsdp", "embed_tensor_transpose"});
    k.w0 = t.ShardWithLogical(k.w0, "w0_kernel", "EMH", wi2);
    k.w1 = t.ShardWithLogical(k.w1, "w1_kernel", "EMH", wi2);
    k.wo = t.ShardWithLogical(k.wo, "wo_kernel", "EHM", wo2);
  }
  Value inputs = t.ShardWithLogical(inputs_in, "inputs", "BSM", sh.input_axes);
  Value gate_logits = t.ShardWithLogical(gate_logits_in, "gate_logits", "BSE", sh.gate_axes);
  std::optional<Value> pre_bias = pre_bias_in;
  if (pre_bias && s.deepseek3_routing)
    pre_bias = t.ShardWithLogical(*pre_bias, "pre_bias_logits", "BSE", sh.gate_axes);
  // The release constrains kernels and biases inside a local _fsdp_all_gather(w, pspec): its
  // dump entries are all "moe/w".
  const std::optional<std::string> w =
      ctx.settings().revision.behaviour.kernels_constrained_in_fsdp_all_gather
          ? std::optional<std::string>("w")
          : std::nullopt;
  k.w0 = WithAxes(t, t.ShardWithPspec(k.w0, "w0_kernel", "EMH", sh.w0, w), sh.w0_axes);
  k.w1 = WithAxes(t, t.ShardWithPspec(k.w1, "w1_kernel", "EMH", sh.w1, w), sh.w1_axes);
  k.wo = WithAxes(t, t.ShardWithPspec(k.wo, "wo_kernel", "EHM", sh.wo, w), sh.wo_axes);
  if (k.w0_bias) {
    k.w0_bias =
        WithAxes(t, t.ShardWithPspec(*k.w0_bias, "w0_bias", "EH", sh.w0_bias, w), sh.w0_bias_axes);
    k.w1_bias =
        WithAxes(t, t.ShardWithPspec(*k.w1_bias, "w1_bias", "EH", sh.w1_bias, w), sh.w1_bias_axes);
    k.wo_bias =
        WithAxes(t, t.ShardWithPspec(*k.wo_bias, "wo_bias", "EM", sh.wo_bias, w), sh.wo_bias_axes);
  }

  // ---- shard_map(wrapper) ----
  const auto body = t.Scope(body_scope);
  ShardMapOperands op;
  op.shardings = sh;
  op.x = WithAxes(t, t.ShardMapIn(inputs, "x", "BSM", sh.input), sh.input_axes);
  op.logits = WithAxes(t, t.ShardMapIn(gate_logits, "logits", "BSE", sh.gate_logits), sh.gate_axes);
  if (pre_bias && sh.pre_bias_logits)
    op.pre_bias_logits = WithAxes(
        t, t.ShardMapIn(*pre_bias, "pre_bias_logits", "BSE", *sh.pre_bias_logits), sh.gate_axes);
  // gemma4's per_expert_scale, read by get_topk inside the body: closed over, so replicated.
  if (ctx.topk_scale_outside)
    ctx.topk_scale = t.ShardMapIn(*ctx.topk_scale_outside, "per_expert_scale", "E",
                                  PartitionSpec::Replicated(1));
  op.w0 = WithAxes(t, t.ShardMapIn(k.w0, "w0", "EMH", sh.w0), sh.w0_axes);
  op.w1 = WithAxes(t, t.ShardMapIn(k.w1, "w1", "EMH", sh.w1), sh.w1_axes);
  op.wo = WithAxes(t, t.ShardMapIn(k.wo, "wo", "EHM", sh.wo), sh.wo_axes);
  if (k.w0_bias) {
    op.w0_bias =
        WithAxes(t, t.ShardMapIn(*k.w0_bias, "w0_bias", "EH", sh.w0_bias), sh.w0_bias_axes);
    op.w1_bias =
        WithAxes(t, t.ShardMapIn(*k.w1_bias, "w1_bias", "EH", sh.w1_bias), sh.w1_bias_axes);
    op.wo_bias =
        WithAxes(t, t.ShardMapIn(*k.wo_bias, "wo_bias", "EM", sh.wo_bias), sh.wo_bias_axes);
  }
  // The gmm needs every local expert's kernel on the device: E/EP of them.
  const int64_t local_experts = s.num_experts / s.ep;
  op.experts_replicated =
      op.w0.dim(0) != local_experts && ExpertsReplicatedIntoMegablox(ctx, op.w0);
  if (op.experts_replicated)
    WarnWrongExperts(ctx, sh.w0);
  else if (op.w0.dim(0) != local_experts)
    Fail(
        "sparse_matmul: w0 enters shard_map as {} per device ({} of the {} experts) but expert "
        "parallelism {} over {} needs {} local experts; the logical rules shard 'exp' as {}{}",
        ShapeToString(op.w0.shape()), op.w0.dim(0), s.num_experts, s.ep,
        PartitionSpec::EntryToString(s.expert_axes), local_experts, sh.w0.ToString(),
        c.use_batch_split_schedule
            ? " (with use_batch_split_schedule MaxText runs the DeepSeek batch-split layer, not "
              "sparse_matmul)"
        : c.shard_exp_on_fsdp || c.use_2d_fsdp_sharding
            ? fmt::format(" ({}=True: moe.py's in_specs put no mesh axis on the experts, and its "
                          "ragged_dot fails the same way)",
                          c.shard_exp_on_fsdp ? "shard_exp_on_fsdp" : "use_2d_fsdp_sharding")
            : "");
  t.EnterShardMapBody();
  return op;
}

PathOutput ExitSparseShardMap(const MoeContext& ctx, const RoutedShardings& shardings,
                              const Value& output, const PermuteOutput& routing,
                              const PartitionSpec& routed_batch_spec, int64_t routed_batch_rows) {
  Tracer& t = ctx.t;
  ctx.topk_scale = ctx.topk_scale_outside;
  // Routing captured as global arrays for golden checks, from the batch rows alone.
  const auto batch_rows = [&](const Value& v) {
    if (routed_batch_rows <= 0 || !v.per_device || v.dim(0) == routed_batch_rows) return v;
    Value rows{-1, {}, true};
    for (const Array& shard : v.shards)
      rows.shards.push_back(Slice(shard, 0, 0, routed_batch_rows));
    return rows;
  };
  ctx.Capture(Capture::kTopKIndices,
              t.Assemble(batch_rows(routing.top_k_indices), routed_batch_spec));
  t.trace().top_k_indices = routing.top_k_indices.tensor;
  traced::Tag(t, routing.top_k_indices, "moe_routing_maps");  // routing_tag_fn (moe.py:425-434)
  const Array weights = t.Assemble(batch_rows(routing.weights), routed_batch_spec);
  ctx.Capture(Capture::kTopKWeights, weights);
  // Llama 4's top-k "weights" are logits; permute scales each input by their sigmoid in
  // float32 (ScaleByRouterScores), which the routing tree shows beside them.
  if (ctx.setup.decoder_block == "llama4" && weights.numeric())
    ctx.Capture(Capture::kRouterScores, Sigmoid(Cast(weights, DType::kFloat32)));
  // A replicated batch (decode) leaves every device the whole output: the invariants check
  // that the copies agree (small: the batch is one sequence).
  if (!ctx.setup.batch_sharded_by_ep)
    ctx.CapturePerDevice(Capture::kOutputPerDevice, output.shards);
  t.ExitShardMapBody();
  PathOutput result;
  result.output =
      WithAxes(t, t.ShardMapOut(output, "output", "BSM", shardings.output), shardings.output_axes);
  if (routing.lb_loss)
    result.lb_loss = t.ShardMapOut(*routing.lb_loss, "lb_loss", "", PartitionSpec());
  if (routing.bias_updates)
    result.bias_updates =
        t.ShardMapOut(*routing.bias_updates, "bias_updates", "E", PartitionSpec());
  return result;
}

}  // namespace shardtrace
