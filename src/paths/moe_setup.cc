#include "paths/moe_setup.h"

#include <fmt/format.h>

#include "config/config.h"
#include "config/moe_lines.h"
#include "config/moe_settings.h"
#include "shard/mesh.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace {

std::string ToString(MoePath path) {
  switch (path) {
    case MoePath::kDenseDropless:
      return "dense_matmul (dropless)";
    case MoePath::kDenseDropping:
      return "dense_matmul (token dropping)";
    case MoePath::kSparse:
      return "sparse_matmul";
    case MoePath::kFusedVllm:
      return "fused_moe_matmul (vllm_rpa)";
  }
  return "?";
}

std::string MoeSetup::PathLabel() const {
  if (path != MoePath::kSparse) return ToString(path);
  std::string variant =
      ring_of_experts ? "ring_of_experts"
      : ep > 1 ? (batch_sharded_by_ep ? "ragged_all_to_all" : "ragged_all_to_all, batch replicated")
               : "no expert parallelism";
  if (ring_of_experts && settings.num_moe_emb_chunks > 0)
    variant += fmt::format(" in {} emb chunks", settings.num_moe_emb_chunks);
  if (token_chunks > 1) variant += fmt::format(" in {} token chunks", token_chunks);
  const std::string pipeline = emb_chunks > 0
                                   ? fmt::format(", route/dispatch/gmm pipeline, {} emb chunk{}",
                                                 emb_chunks, emb_chunks == 1 ? "" : "s")
                                   : "";
  return fmt::format("sparse_matmul/{} (EP={}, TP={}, {}{})", variant, ep, tp, gmm_kernel,
                     pipeline);
}

MoeSetup MakeMoeSetup(const Config& config, const Mesh& mesh) {
  return MakeMoeSetup(ResolveMoeSettings(config), mesh);
}

MoeSetup MakeMoeSetup(MoeSettings settings, const Mesh& mesh) {
  MoeSetup s;
  s.settings = std::move(settings);
  const MoeSettings& k = s.settings;  // the config keys
  s.model_name = k.model_name;
  s.decoder_block = k.decoder_block;
  const double pdbs = k.per_device_batch_size;
  s.batch = CheckedToInt(pdbs * static_cast<double>(mesh.num_devices()),
                         "global batch (per_device_batch_size x devices)", 0, int64_t{1} << 40);
  if (s.batch < 1)
    Fail("per_device_batch_size {} x {} devices gives a global batch of {}; expected at least 1",
         pdbs, mesh.num_devices(), s.batch);
  s.seq = k.max_target_length;
  const int64_t input_dim = k.moe_expert_input_dim;
  s.emb = input_dim <= 0 ? k.emb_dim : input_dim;
  s.num_experts = k.num_experts;
  s.top_k = k.num_experts_per_tok;
  s.mlp_dim = k.mlp_dim;
  const int64_t moe_mlp_dim = k.moe_mlp_dim;
  // mixtral and gpt-oss construct RoutedMoE with intermediate_dim=mlp_dim.
  s.hidden =
      (s.decoder_block == "mixtral" || s.decoder_block == "gpt_oss") ? s.mlp_dim : moe_mlp_dim;
  s.wi_hidden = s.hidden;
  if (k.padded_base_moe_mlp_dim) s.wi_hidden = *k.padded_base_moe_mlp_dim;
  s.wo_hidden = k.revision.behaviour.wo_padded_like_wi ? s.wi_hidden : s.hidden;
  if (s.wi_hidden != s.hidden) {
    // What MaxText itself cannot run is refused by the key, not by the matmul that fails.
    if (s.wo_hidden != s.wi_hidden)
      Fail(
          "padded_base_moe_mlp_dim={} pads wi_0/wi_1 to [E, M, {}], but moe.py at {} keeps wo at "
          "[E, {}, M], so the wo matmul cannot contract them (MaxText fails the same way); "
          "expected padded_base_moe_mlp_dim unset or {} (MaxText 0.2.5 pads wo too)",
          s.wi_hidden, s.wi_hidden, k.revision.name, s.hidden, s.hidden);
    if (k.mlp_bias)
      Fail(
          "padded_base_moe_mlp_dim={} with mlp_bias=true: moe.py keeps the wi biases at [E, {}], "
          "which cannot add to the padded [.., {}] rows (MaxText fails the same way); expected "
          "padded_base_moe_mlp_dim unset or {}, or mlp_bias=false",
          s.wi_hidden, s.hidden, s.wi_hidden, s.hidden);
  }
  const int64_t shared = k.shared_experts;
  s.qwen3_next_block = s.decoder_block == "qwen3_next" || s.decoder_block == "qwen3_5";
  if (s.qwen3_next_block)
    s.shared_hidden = shared > 0 ? moe_mlp_dim : 0;
  else
    s.shared_hidden =
        shared > 0 ? shared * (s.decoder_block == "gemma4" ? s.mlp_dim : moe_mlp_dim) : 0;
  s.dense_layers = k.first_num_dense_layers;

  s.dtype = k.dtype;
  s.weight_dtype = k.weight_dtype;
  s.gate_dtype = k.float32_gate_logits ? DType::kFloat32 : s.dtype;

  s.expert_axes = k.custom_mesh_and_rule == "cp-as-ep"
                      ? std::vector<std::string>{"context", "expert"}
                      : std::vector<std::string>{"expert"};
  s.ep = mesh.Size(s.expert_axes);
  s.tp = mesh.Size("tensor");
  s.tp_transpose = mesh.Size("tensor_transpose");
  s.cp_autoregressive = mesh.Size("context_autoregressive");
  s.ring_of_experts = k.use_ring_of_experts;
  s.batch_sharded_by_ep = s.batch > 1;
  for (const std::string_view prefix : k.revision.behaviour.deepseek_routing_models)
    if (s.model_name.starts_with(prefix)) s.deepseek_routing_prefix = std::string(prefix);
  s.deepseek3_routing = !s.deepseek_routing_prefix.empty();
  s.inference = k.model_call_mode == "inference";
  s.capacity_factor = k.capacity_factor;
  s.emb_chunks = k.shardtrace_pr3981_emb_chunks;

  if (k.attention == "vllm_rpa") {
    s.path = MoePath::kFusedVllm;
    s.path_reasons.push_back("attention == 'vllm_rpa'");
    s.notes.push_back("the fused vLLM kernel lives in tpu_inference and is not simulated");
  } else if (k.sparse_matmul) {
    s.path = MoePath::kSparse;
    s.path_reasons.push_back("attention != 'vllm_rpa'");
    s.path_reasons.push_back("sparse_matmul == True");
  } else {
    s.path = s.capacity_factor > 0 ? MoePath::kDenseDropping : MoePath::kDenseDropless;
    s.path_reasons.push_back("attention != 'vllm_rpa'");
    s.path_reasons.push_back("sparse_matmul == False");
    s.path_reasons.push_back(fmt::format("capacity_factor {} {} 0", s.capacity_factor,
                                         s.capacity_factor > 0 ? ">" : "<="));
    // dense_matmul picks the masks by call mode only when it drops tokens.
    if (s.capacity_factor > 0)
      s.path_reasons.push_back(
          s.inference
              ? "model_call_mode == 'inference': generate_masks_subgroup (tokens grouped by "
                "context-parallel subgroup)"
              : fmt::format("model_call_mode '{}' != 'inference': generate_masks",
                            k.model_call_mode));
    if (s.capacity_factor > 0 && !s.inference && k.moe_dispatch_no_expert_sharding)
      s.path_reasons.push_back(fmt::format(
          "moe_dispatch_no_expert_sharding: dispatch, layer_w0 and layer_w1 constrained with "
          "'expert' taken off their batch dim, each logical dim resolved on its own ({})",
          MoeRef(k.revision.id,
                 {MoeStatement::kDispatchPeelExpert, MoeStatement::kMaybeShardMoeDispatch})));
    // The inference masks' layout: get_context_partition_and_sub_seq falls back to one
    // subgroup when the sequence does not split.
    const int64_t cp = s.seq % std::max<int64_t>(s.cp_autoregressive, 1) == 0
                           ? std::max<int64_t>(s.cp_autoregressive, 1)
                           : 1;
    if (s.capacity_factor > 0 && s.inference)
      s.path_reasons.push_back(
          cp == 1 ? fmt::format("context_autoregressive_parallelism > 0 (always) and cp == 1: "
                                "the layout branch of {}, where the masks' size-1 subgroup dim N "
                                "takes activation_batch_moe and the batch dim "
                                "activation_norm_length_moe",
                                MoeRef(k.revision.id, {MoeStatement::kContextAutoregressiveAxes}))
                  : fmt::format("cp == {} > 1: {} context subgroups of {} tokens, each with "
                                "its own expert slots",
                                cp, cp, s.seq / cp));
  }
  // Both the sparse and the dense paths split the experts over the expert-parallel axes (one
  // message for both, so plan groups the configs it excludes by one reason).
  if (s.path != MoePath::kFusedVllm && s.num_experts > 1 && s.num_experts % s.ep != 0)
    Fail(
        "num_experts {} is not divisible by the expert-parallel size {} (mesh axes {}); set "
        "ici_expert_parallelism to a divisor of {}",
        s.num_experts, s.ep, fmt::join(s.expert_axes, " x "), s.num_experts);
  for (const std::string& note : k.key_notes) s.notes.push_back(note);
  if (k.moe_dispatch_no_expert_sharding && !(s.path == MoePath::kDenseDropping && !s.inference))
    s.notes.push_back(fmt::format(
        "moe_dispatch_no_expert_sharding=True: read only by dense_matmul's training branch "
        "with capacity_factor > 0 ({}); this run ({}{}) does not take it",
        MoeRef(k.revision.id, {MoeStatement::kDispatchPeelExpert}), ToString(s.path),
        s.inference ? ", model_call_mode inference" : ""));
  const std::string quantization = k.quantization;
  if (!quantization.empty() || k.use_qwix_quantization)
    s.notes.push_back(
        fmt::format("quantization '{}' is not modeled: weights are traced unquantized in dtype, "
                    "and --step differentiates that unquantized block (qwix's quantized "
                    "residuals and float8_e5m2 gradient matmuls are not modeled; docs/step.md)",
                    quantization.empty() ? "qwix" : quantization));
  if (k.shard_mode == "explicit")
    s.notes.push_back(
        "shard_mode explicit: every constraint is a jax.sharding.reshard (same specs); the gate "
        "matmul's out_sharding is not recorded separately");
  if (k.shard_exp_on_fsdp)
    s.notes.push_back(
        "shard_exp_on_fsdp: the qwix fixed-calibration weight rule needs quantization; the "
        "unquantized dsv3 shard_map specs are used");
  if (k.use_tokamax_gmm && k.use_gmm_v2)
    s.gmm_kernel = "megablox (tokamax gmm v2)";
  else if (k.use_tokamax_gmm)
    s.gmm_kernel = k.quantization.empty() ? "tokamax ragged_dot" : "megablox (tokamax backend)";
  else if (k.megablox)
    s.gmm_kernel = "megablox";
  else
    s.gmm_kernel = "jax.lax.ragged_dot";
  if (s.path == MoePath::kSparse) {
    s.path_reasons.push_back(fmt::format("gmm kernel {} (megablox={}, use_tokamax_gmm={})",
                                         s.gmm_kernel, k.megablox ? "True" : "False",
                                         k.use_tokamax_gmm ? "True" : "False"));
    if (s.ring_of_experts)
      s.path_reasons.push_back(fmt::format(
          "use_ring_of_experts == True (expert parallelism {}): all-gather + psum_scatter", s.ep));
    else if (s.ep > 1)
      s.path_reasons.push_back(fmt::format(
          "expert parallelism {} > 1 && use_ring_of_experts == False: ragged_all_to_all", s.ep));
    else
      s.path_reasons.push_back("expert parallelism 1: no all-to-all");
    if (s.ep > 1 && !s.ring_of_experts)
      s.path_reasons.push_back(
          s.batch_sharded_by_ep
              ? fmt::format("global batch {} > 1: the batch is sharded by expert", s.batch)
              : "global batch 1 (decode): the batch is not sharded by expert, every device "
                "routes the same tokens");
    if (s.tp > 1)
      s.path_reasons.push_back(fmt::format(
          "tensor parallelism {} > 1: the wo gmm output is psum_scatter'ed over 'tensor'", s.tp));
    if (s.tp_transpose > 1)
      s.path_reasons.push_back(
          fmt::format("tensor_transpose parallelism {} > 1: the wi gmm outputs are psum'ed over "
                      "'tensor_transpose'",
                      s.tp_transpose));
    if (s.ring_of_experts && k.num_moe_emb_chunks > 0)
      s.path_reasons.push_back(fmt::format(
          "num_moe_emb_chunks {} > 0 with use_ring_of_experts: the tokens are all-gathered and "
          "routed one embed-dim chunk at a time, the wi gmms accumulate (moe_emb_chunking)",
          k.num_moe_emb_chunks));
    if (s.ring_of_experts && k.num_moe_token_chunks > 1) {
      s.token_chunks = k.num_moe_token_chunks;
      s.path_reasons.push_back(fmt::format(
          "num_moe_token_chunks {} > 1 with use_ring_of_experts: this device's tokens split "
          "along the sequence into {} chunks, each gathered, routed, computed and "
          "reduce-scattered on its own; the outputs concatenated ({})",
          k.num_moe_token_chunks, k.num_moe_token_chunks,
          MoeRef(k.revision.id, {MoeStatement::kTokenChunkLoop})));
    }
    if (s.ring_of_experts && k.defer_small_all_reduces && k.UpdatesLoadBalanceBias()) {
      s.defer_bias_counts = true;
      s.path_reasons.push_back(fmt::format(
          "defer_small_all_reduces with use_ring_of_experts: the layer returns each shard's "
          "local expert counts [shards, chunks, E] (no all-reduce in the layer); the training "
          "step sums them once after the layer loop and takes one sign ({})",
          MoeRef(k.revision.id, {MoeStatement::kDeferSmallAllReduces})));
    }
    if (s.emb_chunks > 1)
      s.path_reasons.push_back(fmt::format(
          "shardtrace_pr3981_emb_chunks {} > 1: shardtrace's model of PR 3981's chunked "
          "pipeline (a proposal, not a MaxText key; not in moe.py 313890777)",
          s.emb_chunks));
  }
  // get_topk and the gate scores it reads (GateLogit).
  const MoeSettings& c = s.settings;
  using S = MoeStatement;
  const auto lines = [&](std::initializer_list<MoeStatement> statements) {
    return MoeLineList(c.revision.id, statements);
  };
  if (!c.routed_score_func.empty())
    s.routing_reasons.push_back(
        fmt::format("routed_score_func '{}': the gate applies it to the logits ({})",
                    c.routed_score_func, lines({S::kGateScoreFunc})));
  if (c.routed_bias)
    s.routing_reasons.push_back(
        fmt::format("routed_bias: the gate adds a learned bias to the scores that choose the "
                    "experts ({})",
                    lines({S::kGateBias})));
  if (c.use_random_routing) {
    s.routing_reasons.push_back(fmt::format("use_random_routing: experts drawn at random ({})",
                                            lines({S::kRandomRouting})));
  } else if (s.deepseek3_routing) {
    s.routing_reasons.push_back(fmt::format(
        "model_name starts with {}: deepseek_routing ({}): experts by the biased "
        "scores, weights from the unbiased ones",
        s.deepseek_routing_prefix, lines({S::kDeepseekRoutingCall, S::kDeepseekRoutingBody})));
    if (c.n_routing_groups != -1)
      s.routing_reasons.push_back(fmt::format(
          "n_routing_groups {} != -1: expert_group_mask keeps the best topk_routing_group {} "
          "groups ({})",
          c.n_routing_groups, c.topk_routing_group,
          lines({S::kExpertMaskCall, S::kExpertGroupMaskBody})));
  } else if (s.decoder_block == "gemma4") {
    s.routing_reasons.push_back(
        fmt::format("decoder_block gemma4: softmax over all experts, top-k by logit, their "
                    "probabilities ({})",
                    lines({S::kGemma4Routing})));
  } else {
    s.routing_reasons.push_back(
        fmt::format("top_k over the gate logits ({})", lines({S::kTopkPlain})));
  }
  if (!c.use_random_routing) {
    if (s.decoder_block == "deepseek" || s.decoder_block == "deepseek4")
      s.routing_reasons.push_back(
          fmt::format("decoder_block {}: deepseek_scale_weights ({})", s.decoder_block,
                      lines({S::kDeepseekScaleCall, S::kDeepseekScaleWeights})));
    else if (s.decoder_block == "llama4")
      s.routing_reasons.push_back(fmt::format(
          "decoder_block llama4: the top-k logits stay raw; sigmoid router scores scale the "
          "inputs ({} sparse, {} dense)",
          lines({S::kLlama4InputScaleSparse}), lines({S::kLlama4InputScaleDense})));
    else if (s.decoder_block != "gemma4")
      s.routing_reasons.push_back(
          fmt::format("decoder_block {}: softmax over the K chosen logits ({})", s.decoder_block,
                      lines({S::kTopkSoftmaxBranch})));
  }
  if (c.norm_topk_prob)
    s.routing_reasons.push_back(fmt::format("norm_topk_prob: weights divided by their sum ({})",
                                            lines({S::kNormTopkProb})));
  // A note of the trace (path_reasons are printed with it): which layers this block is.
  if (c.first_num_hash_layers > 0)
    s.path_reasons.push_back(
        s.decoder_block == "deepseek4"
            ? fmt::format(
                  "first_num_hash_layers {}: layers 0 to {} (DeepSeek4DecoderLayer "
                  "is_hash_routing) "
                  "take their top-k experts from tid2eid [vocab_size, K] by token id, weights "
                  "from the unbiased scores, with no gate bias, load-balance loss or bias "
                  "update; not traced: this is a later layer's gate routing",
                  c.first_num_hash_layers, c.first_num_hash_layers - 1)
            : fmt::format(
                  "first_num_hash_layers {}: read only by DeepSeek-V4 layers (decoder_block "
                  "deepseek4); no effect on decoder_block {}",
                  c.first_num_hash_layers, s.decoder_block));
  return s;
}

}  // namespace shardtrace
