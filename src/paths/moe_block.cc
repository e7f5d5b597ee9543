#include "paths/moe_block.h"

#include <string_view>

#include "config/config.h"
#include "config/moe_lines.h"
#include "paths/dense_matmul.h"
#include "paths/masked_loop.h"
#include "paths/mlp_block.h"
#include "paths/routing.h"
#include "paths/sparse_matmul.h"
#include "paths/sparse_pipeline.h"
#include "paths/traced_ops.h"
#include "shard/axis_rules.h"
#include "shard/mesh.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace shardtrace {

namespace tr = traced;

Block ParseBlock(const std::string& name) {
  if (name == "moe") return Block::kMoe;
  if (name == "mlp") return Block::kMlp;
  if (name == "shared") return Block::kShared;
  // DeepSeek-V4's first first_num_hash_layers layers (is_hash_routing) take their top-k
  // experts from tid2eid[token ids]: a block trace takes no token ids, so they are named and
  // refused rather than traced as gate routing.
  if (name == "hash")
    Fail(
        "--block hash: DeepSeek-V4's hash-routing layers (the first first_num_hash_layers "
        "layers, is_hash_routing) are not traced: their top-k experts are tid2eid[token ids] "
        "(a replicated float32 table [vocab_size, num_experts_per_tok]) and a block trace takes "
        "no token ids; --block moe traces a later, gate-routed layer and its notes name the hash "
        "layers");
  Fail("--block {}: expected moe, mlp or shared", name);
}

bool UsesSharedExperts(const MoeSetup& s) {
  return (s.decoder_block == "deepseek" || s.decoder_block == "deepseek4" ||
          s.decoder_block == "llama4" || s.decoder_block == "gemma4") &&
         s.shared_hidden > 0;
}

bool HasSharedExpertMlp(const MoeSetup& s) {
  return UsesSharedExperts(s) || (s.qwen3_next_block && s.shared_hidden > 0);
}

namespace {

PathOutput RoutedMoE(const MoeContext& ctx, const Value& inputs_in, const MoeParams& p,
                     bool shared_wrapper, bool masked_loop) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const MoeSettings& settings = ctx.settings();
  const auto scope = t.Scope("RoutedMoE");
  // RoutedAndSharedMoE always builds its routed block with gate axes ('embed_moe', None); the
  // release gives the router its own logical axis, ('embed_router', None).
  const std::string shared_gate_axis(settings.revision.behaviour.router_embed_axis);
  const LogicalAxes gate_axes = shared_wrapper || s.decoder_block == "deepseek" ||
                                        s.decoder_block == "deepseek4" ||
                                        s.decoder_block == "llama4" || s.decoder_block == "gemma4"
                                    ? LogicalAxes{shared_gate_axis, std::nullopt}
                                    : LogicalAxes{"embed", std::nullopt};
  LogicalAxes wi_axes{"exp", "embed_moe", "mlp_moe"}, wo_axes{"exp", "mlp_moe", "embed_moe"};
  if (settings.shard_exp_on_fsdp) {
    wi_axes = {"embed_moe", std::nullopt, "mlp_moe"};
    wo_axes = {"embed_moe", "mlp_moe", std::nullopt};
  } else if (settings.use_2d_fsdp_sharding) {
    wi_axes = wo_axes = {"embed_moe", "mlp_moe", std::nullopt};
  } else if (settings.use_batch_split_schedule &&
             settings.revision.behaviour.batch_split_kernels_expert_first) {
    wi_axes = {"expert_only", "embed_moe", std::nullopt};
    wo_axes = {"expert_only", std::nullopt, "embed_moe"};
  } else if (settings.use_batch_split_schedule) {
    wi_axes = {"embed_moe", std::nullopt, "expert_only"};
    wo_axes = {"embed_moe", "expert_only", std::nullopt};
  }
  const Value gate_kernel =
      t.Weight({"gate.kernel", "ME"}, p.gate_kernel, gate_axes, "gate_kernel");
  std::optional<Value> gate_bias;
  if (settings.routed_bias) {
    const auto cond = t.Condition("routed_bias");
    gate_bias = t.Weight({"gate.bias", "E"}, *p.gate_bias, LogicalAxes{std::nullopt}, "gate_bias");
  }
  const Value wi_0 = t.Weight({"wi_0", "EMH"}, p.wi_0, wi_axes, "wi_0");
  const Value wi_1 = t.Weight({"wi_1", "EMH"}, p.wi_1, wi_axes, "wi_1");
  const Value wo = t.Weight({"wo", "EHM"}, p.wo, wo_axes, "wo");
  // fp8 storage: each routed kernel's float32 scale is a parameter of its own, sharded like
  // its kernel (moe.py: the kernel axes for a block grid, the expert axis alone for [E]).
  std::optional<Value> wi_0_scale, wi_1_scale, wo_scale;
  if (p.wi_0_scale) {
    const auto cond = t.Condition("weight_dtype == float8_e4m3fn");
    const bool blocks = settings.weight_block_size.has_value();
    const std::string dims = blocks ? "E--" : "E";
    const LogicalAxes wi_scale_axes = blocks ? wi_axes : LogicalAxes{wi_axes.front()};
    const LogicalAxes wo_scale_axes = blocks ? wo_axes : LogicalAxes{wo_axes.front()};
    wi_0_scale = t.Weight({"wi_0_scale", dims}, *p.wi_0_scale, wi_scale_axes, "wi_0_scale");
    wi_1_scale = t.Weight({"wi_1_scale", dims}, *p.wi_1_scale, wi_scale_axes, "wi_1_scale");
    wo_scale = t.Weight({"wo_scale", dims}, *p.wo_scale, wo_scale_axes, "wo_scale");
  }
  std::optional<Value> wi_0_bias, wi_1_bias, wo_bias, per_expert_scale;
  if (settings.mlp_bias) {
    const auto cond = t.Condition("mlp_bias");
    wi_0_bias = t.Weight({"wi_0_bias", "EH"}, *p.wi_0_bias, {"exp", "activation_mlp"}, "wi_0_bias");
    wi_1_bias = t.Weight({"wi_1_bias", "EH"}, *p.wi_1_bias, {"exp", "activation_mlp"}, "wi_1_bias");
    wo_bias = t.Weight({"wo_bias", "EM"}, *p.wo_bias, {"exp", "activation_embed"}, "wo_bias");
  }
  if (s.decoder_block == "gemma4") {
    const auto cond = t.Condition("decoder_block == gemma4");
    per_expert_scale =
        t.Weight({"per_expert_scale", "E"}, *p.per_expert_scale, {"exp"}, "per_expert_scale");
  }

  const Value inputs = tr::Cast(t, inputs_in, s.dtype, {"inputs", "BSM"});
  const GateOutput gate = GateLogit(ctx, inputs, gate_kernel, gate_bias);
  ctx.Capture(Capture::kGateLogits, gate.gate_logits.array());
  if (gate.pre_bias_logits) ctx.Capture(Capture::kPreBiasLogits, gate.pre_bias_logits->array());

  ExpertKernels k;
  if (wo_scale) {
    // fp8 kernels are dequantized to dtype before the path sees them (moe.py's
    // _maybe_native_gmm_weight without native gmm: dequantize_weight).
    const auto cond = t.Condition("weight_dtype == float8_e4m3fn");
    k.wo = tr::Dequantize(t, wo, *wo_scale, s.dtype, {"wo_kernel", "EHM"});
    k.w0 = tr::Dequantize(t, wi_0, *wi_0_scale, s.dtype, {"w0_kernel", "EMH"});
    k.w1 = tr::Dequantize(t, wi_1, *wi_1_scale, s.dtype, {"w1_kernel", "EMH"});
  } else {
    k.wo = tr::Cast(t, wo, s.dtype, {"wo_kernel", "EHM"});
    k.w0 = tr::Cast(t, wi_0, s.dtype, {"w0_kernel", "EMH"});
    k.w1 = tr::Cast(t, wi_1, s.dtype, {"w1_kernel", "EMH"});
  }
  if (per_expert_scale && settings.revision.behaviour.expert_scale_on_topk_weights) {
    ctx.topk_scale = ctx.topk_scale_outside = *per_expert_scale;
  } else if (per_expert_scale) {
    const auto cond = t.Condition("decoder_block == gemma4");
    const Value scale = tr::Cast(t, *per_expert_scale, s.dtype, {"per_expert_scale", "E"});
    k.wo = t.Apply(
        {OpKind::kMul, "", {{"broadcast", "per_expert_scale[:, None, None]"}}}, {&k.wo, &scale},
        {"wo_kernel", "EHM"},
        [](const std::vector<const Array*>& a) {
          return Mul(*a[0], Reshape(*a[1], {a[1]->shape[0], 1, 1}));
        },
        [](const Tracer::Args& a, const Tracer::Args&, const Tracer::Args& g) {
          auto [dw, ds] = MulVjp(*a[0], Reshape(*a[1], {a[1]->shape[0], 1, 1}), *g[0]);
          return std::vector<Array>{std::move(dw), ds.WithShape(a[1]->shape)};
        });
  }
  if (wi_0_bias) {
    const auto cond = t.Condition("mlp_bias");
    k.w0_bias = tr::Cast(t, *wi_0_bias, s.dtype, {"w0_bias", "EH"});
    k.w1_bias = tr::Cast(t, *wi_1_bias, s.dtype, {"w1_bias", "EH"});
    k.wo_bias = tr::Cast(t, *wo_bias, s.dtype, {"wo_bias", "EM"});
  }
  if (masked_loop) return MaskedLoop(ctx, inputs, gate.gate_logits, gate.pre_bias_logits, k);
  switch (s.path) {
    case MoePath::kFusedVllm:
      Fail(
          "attention=vllm_rpa: the fused tpu_inference MoE kernel is not simulated; unset "
          "attention");
    case MoePath::kSparse:
      if (settings.shardtrace_pr3981_emb_chunks > 0)
        return SparsePipeline(ctx, inputs, gate.gate_logits, gate.pre_bias_logits, k);
      return SparseMatmul(ctx, inputs, gate.gate_logits, gate.pre_bias_logits, k);
    case MoePath::kDenseDropless:
    case MoePath::kDenseDropping:
      return DenseMatmul(ctx, inputs, gate.gate_logits, gate.pre_bias_logits, k);
  }
  Fail("unknown MoE path");
}

// Qwen3NextSparseMoeBlock.__call__ after its routed experts: the shared expert (an MlpBlock
// of width moe_mlp_dim) on every token, scaled per token by the sigmoid of a DenseGeneral
// gate [M, 1] with kernel axes ('embed', None), computed in dtype; added to `routed`.
Value SharedExpertGated(const MoeContext& ctx, const Value& inputs, const MoeParams& p,
                        const Value& routed) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const Value shared_out = MlpBlock(t, s.settings, inputs, *p.shared, "shared_expert", "shared_");
  Value gate_out;
  {
    const auto scope = t.Scope("shared_expert_gate");
    const Value kernel = t.Weight({"shared_expert_gate.kernel", "M1"}, *p.shared_expert_gate,
                                  LogicalAxes{"embed", std::nullopt}, "shared_expert_gate");
    const Value x = tr::Cast(t, inputs, s.dtype, {"inputs", "BSM"});
    const Value k = tr::Cast(t, kernel, s.dtype, {"shared_expert_gate.kernel", "M1"});
    gate_out = tr::Einsum(t, "BSM,MO -> BSO", x, k, s.dtype, {"shared_gate_output", "BS1"});
  }
  const Value gate = tr::Activation(t, "sigmoid", gate_out, {"shared_gate", "BS1"});
  const Value scaled =
      tr::Binary(t, OpKind::kMul, gate, shared_out, {"shared_expert_output", "BSM"});
  const Value output = tr::Binary(t, OpKind::kAdd, routed, scaled, {"output", "BSM"});
  // The parts of output == routed + sigmoid(gate) * shared.
  ctx.Capture(Capture::kRoutedExpertsOutput, routed.array());
  ctx.Capture(Capture::kSharedExpertOutput, shared_out.array());
  ctx.Capture(Capture::kSharedExpertGateOutput, gate_out.array());
  return output;
}

// The training step's reverse pass over what the tracer recorded on `tape`: the loss
// sum(float32(output) * cotangent) + lb_loss, seeded with the cotangent (rounded to the
// output's dtype, as the VJP of the float32 cast does) and 1 for lb_loss.
Gradients StepGradients(Tracer& t, const Tape& tape, const Array& cotangent,
                        std::string_view source, const Captures& captures,
                        const std::optional<Value>& lb_loss) {
  const Trace& trace = t.trace();
  const TensorRecord& out = trace.tensors[trace.output];
  if (cotangent.shape != out.shape)
    Fail("{}array 'cotangent' has shape {}, expected the block output's {}",
         source.empty() ? "" : fmt::format("{}: ", source), ShapeToString(cotangent.shape),
         ShapeToString(out.shape));
  const Array* output = captures.Find(Capture::kOutput);
  SHARDTRACE_CHECK(output != nullptr);
  double loss = 0;
  for (size_t i = 0; i < cotangent.values().size(); ++i)
    loss += static_cast<double>(output->values()[i]) * cotangent.values()[i];
  std::map<int, Shards> seeds = {{trace.output, {Cast(cotangent, out.dtype)}}};
  if (lb_loss) {
    loss += lb_loss->array().values()[0];
    seeds[lb_loss->tensor] = {Array::Filled({}, lb_loss->dtype(), 1.0f)};
  }
  std::vector<int> wanted = {trace.input};
  for (const auto& [name, id] : trace.parameters) wanted.push_back(id);
  const std::map<int, Shards> cotangents = tape.Backward(std::move(seeds), wanted);
  Gradients g;
  g.loss = Array::FromData({}, DType::kFloat32, {static_cast<float>(loss)});
  auto gradient = [&](int id) {
    const auto found = cotangents.find(id);
    const TensorRecord& record = trace.tensors[id];
    if (found == cotangents.end() || !found->second.front().numeric())
      return Array::Filled(record.shape, DType::kFloat32, 0.0f);
    return Cast(found->second.front(), DType::kFloat32);
  };
  g.arrays["inputs"] = gradient(trace.input);
  for (const auto& [name, id] : trace.parameters) g.arrays[name] = gradient(id);
  return g;
}

}  // namespace

BlockRun RunBlock(const Config& config, const Mesh& mesh, const MoeSetup& setup,
                  const MoeParams& params, Block block, bool numeric, bool masked_loop) {
  RunOptions options;
  options.numeric = numeric;
  options.masked_loop = masked_loop;
  return RunBlock(config, mesh, setup, params, block, options);
}

BlockRun RunBlock(const Config& config, const Mesh& mesh, const MoeSetup& setup,
                  const MoeParams& params, Block block, const RunOptions& options) {
  const bool masked_loop = options.masked_loop;
  // Every simulated device holds its shards: the budget counts them before any is made.
  if (options.numeric) CheckNumericSize(setup, mesh.num_devices(), options.budget_bytes);
  Tracer t(mesh, config.logical_axis_rules(), options.numeric);
  // Symbolic runs compute nothing worth a thread.
  std::optional<ThreadPool> pool;
  if (options.numeric && options.threads != 1) {
    pool.emplace(options.threads);
    t.set_pool(&*pool);
  }
  t.set_summaries(options.summaries);
  t.set_progress(options.progress);
  // A training step records the forward pass on a tape for the reverse pass below.
  std::optional<Tape> tape;
  if (options.numeric && options.cotangent != nullptr) {
    tape.emplace();
    t.set_tape(&*tape);
  }
  std::optional<Value> lb_loss;  // what the step's loss adds to the output's part
  BlockRun run;
  t.trace().maxtext_revision = setup.settings.revision.Title();
  t.trace().maxtext_revision_why = setup.settings.revision.why;
  t.trace().revision = setup.settings.revision.id;
  MoeContext ctx{setup, t, run.captures, std::nullopt, std::nullopt};
  const bool shared = UsesSharedExperts(setup);
  if (block == Block::kMlp) {
    t.trace().block = "mlp";
    t.trace().path = "MlpBlock (dense layer, intermediate mlp_dim)";
    const Value inputs = t.Input({"inputs", "BSM"}, params.inputs);
    const Value out = MlpBlock(t, setup.settings, inputs, *params.dense, "MlpBlock", "mlp_");
    ctx.Capture(Capture::kOutput, out.array());
    t.trace().input = inputs.tensor;
    t.trace().output = out.tensor;
  } else if (block == Block::kShared) {
    if (!HasSharedExpertMlp(setup))
      Fail(
          "--block shared: decoder_block {} with shared_experts={} has no shared experts "
          "(RoutedAndSharedMoE is used by deepseek, llama4 and gemma4, Qwen3NextSparseMoeBlock "
          "by qwen3_next and qwen3_5, with shared_experts > 0)",
          setup.decoder_block, setup.settings.shared_experts);
    t.trace().block = "shared";
    t.trace().path = shared ? "RoutedAndSharedMoE.shared_experts (MlpBlock)"
                            : "Qwen3NextSparseMoeBlock.shared_expert (MlpBlock)";
    const Value inputs = t.Input({"inputs", "BSM"}, params.inputs);
    const Value out = MlpBlock(t, setup.settings, inputs, *params.shared,
                               shared ? "shared_experts" : "shared_expert", "shared_");
    ctx.Capture(Capture::kOutput, out.array());
    t.trace().input = inputs.tensor;
    t.trace().output = out.tensor;
  } else {
    if (setup.num_experts <= 1)
      Fail(
          "num_experts={}: the model has no MoE layers (model_name={}); set num_experts or use "
          "--block mlp",
          setup.num_experts, setup.model_name);
    // DeepSeekMoELayer.__call__ never calls RoutedAndSharedMoE under the batch-split schedule
    // (every revision): tracing the block would report a forward MaxText does not run.
    if (setup.decoder_block == "deepseek" && setup.settings.use_batch_split_schedule)
      Fail(
          "use_batch_split_schedule=true: MaxText's DeepSeekMoELayer runs the batch-split "
          "schedule of models/deepseek_batchsplit.py instead of RoutedAndSharedMoE's forward, "
          "which is not modelled (MaxText 0.2.5's own forward of it does not lower on fake CPU "
          "devices: with expert=1 its shard_map in_specs P('expert', 'fsdp', None) for a "
          "routed kernel meet the state's P(None, 'fsdp', None); with expert>1 its moe shard_map's "
          "out_specs "
          "do not match batch_split_factor {})",
          setup.settings.batch_split_factor);
    t.trace().block = "moe";
    t.trace().path = masked_loop
                         ? "masked_loop (reference: every expert on every token, masked by top-k)"
                         : setup.PathLabel();
    t.trace().reference_path = masked_loop;
    t.trace().routing = setup.routing_reasons;
    if (shared)
      t.Note(
          fmt::format("path: the decoder layer builds RoutedAndSharedMoE (shared_experts {} > 0, "
                      "decoder_block {}): the routed experts plus a shared linears.MlpBlock, added "
                      "({})",
                      setup.settings.shared_experts, setup.decoder_block,
                      MoeRef(setup.settings.revision.id, {MoeStatement::kRoutedAndSharedMoeBody})));
    const bool qwen3_next_shared = setup.qwen3_next_block && setup.shared_hidden > 0;
    if (setup.qwen3_next_block)
      t.Note(fmt::format(
          "path: decoder_block {} builds qwen3.py's Qwen3NextSparseMoeBlock: {}",
          setup.decoder_block,
          qwen3_next_shared
              ? "routed_experts (RoutedMoE) + sigmoid(shared_expert_gate(x)) * shared_expert(x), "
                "a shared linears.MlpBlock of width moe_mlp_dim and a DenseGeneral gate [M, 1]"
              : "shared_experts 0, so routed_experts (RoutedMoE) alone"));
    if (!masked_loop) {
      for (const std::string& r : setup.path_reasons) t.Note("path: " + r);
      for (const std::string& n : setup.notes) t.Note(n);
    }
    const auto scope = t.Scope(shared                   ? "RoutedAndSharedMoE"
                               : setup.qwen3_next_block ? "Qwen3NextSparseMoeBlock"
                                                        : "");
    const Value inputs = t.Input({"inputs", "BSM"}, params.inputs);
    PathOutput routed = RoutedMoE(ctx, inputs, params, shared, masked_loop);
    Value output = routed.output;
    if (qwen3_next_shared) {
      output = SharedExpertGated(ctx, inputs, params, routed.output);
    } else if (shared) {
      const Value shared_out =
          MlpBlock(t, setup.settings, inputs, *params.shared, "shared_experts", "shared_");
      output = tr::Binary(t, OpKind::kAdd, routed.output, shared_out, {"output", "BSM"});
      // The two addends, for the invariant output == routed + shared.
      ctx.Capture(Capture::kRoutedExpertsOutput, routed.output.array());
      ctx.Capture(Capture::kSharedExpertsOutput, shared_out.array());
    }
    ctx.Capture(Capture::kOutput, output.array());
    t.trace().input = inputs.tensor;
    t.trace().output = output.tensor;
    if (const Array* indices = run.captures.Find(Capture::kTopKIndices)) {
      // Every path reports the routing load: (token, k) choices per expert, whole batch.
      const Array counts = Bincount(Reshape(*indices, {indices->size()}), setup.num_experts);
      // The golden format's group_sizes is this whole-batch count, on every path.
      run.captures.PutIfAbsent(Capture::kGroupSizes, counts);
      t.AddFact({FactKind::kTokensPerExpert,
                 "",
                 "RoutedMoE",
                 {setup.num_experts},
                 std::vector<double>(counts.values().begin(), counts.values().end()),
                 {}});
    }
    if (routed.lb_loss) ctx.Capture(Capture::kLbLoss, routed.lb_loss->array());
    lb_loss = routed.lb_loss;
    if (routed.bias_updates) ctx.Capture(Capture::kBiasUpdates, routed.bias_updates->array());
  }
  if (tape)
    run.gradients = StepGradients(t, *tape, *options.cotangent, options.cotangent_source,
                                  run.captures, lb_loss);
  run.trace = std::move(t).Finish();
  return run;
}

std::vector<Block> ModelBlocks(const MoeSetup& setup) {
  const bool moe = setup.num_experts > 1;
  const bool dense_layers =
      !moe || setup.dense_layers > 0 || setup.settings.interleave_moe_layer_step > 1;
  std::vector<Block> blocks;
  if (dense_layers) blocks.push_back(Block::kMlp);
  if (moe) {
    blocks.push_back(Block::kMoe);
    if (HasSharedExpertMlp(setup)) blocks.push_back(Block::kShared);
  }
  return blocks;
}

}  // namespace shardtrace
