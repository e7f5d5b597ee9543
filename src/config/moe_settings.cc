#include "config/moe_settings.h"

#include <fnmatch.h>

#include <utility>

#include "config/config.h"
#include "config/moe_keys.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// A key only newer base.yml files define: its value, or `fallback` (the key's default) where
// the loaded base.yml lacks it.
bool BoolOr(const Config& c, const std::string& key, bool fallback) {
  return c.Has(key) ? c.Bool(key) : fallback;
}

GmmTiling Tiling(const Config& c, const std::string& prefix) {
  return {c.Int(prefix + "_batch_seq"), c.Int(prefix + "_embed_dim"), c.Int(prefix + "_mlp_dim")};
}

// The keys of MaxText's fp8 weight storage. The seed's MaxText has none of them: it has no fp8
// storage to model.
void ResolveFp8Storage(const Config& c, MoeSettings* s) {
  if (!c.Has("weight_block_size") || !c.Has("unquantized_modules"))
    Fail(
        "weight_dtype: float8_e4m3fn weight storage needs MaxText 0.2.5 or later (its base.yml "
        "has weight_block_size and unquantized_modules); {} has no fp8 weight storage",
        s->revision.Title());
  s->unquantized_modules = c.StrList("unquantized_modules");
  const bool prefuse = c.Has("prefuse_moe_weights") && c.Bool("prefuse_moe_weights");
  // Both change which fp8 leaves exist (one fused wi and wi_scale; no scales at all in serve
  // mode), which is not modelled: refused rather than reported with other bytes.
  if (prefuse)
    Fail(
        "prefuse_moe_weights=true with weight_dtype float8_e4m3fn: the fused wi kernel and its "
        "wi_scale are not modelled");
  if (!c.Str("quantization").empty())
    Fail(
        "quantization '{}' with weight_dtype float8_e4m3fn: the quantized serving path's fp8 "
        "parameters are not modelled",
        c.Str("quantization"));
  const ConfigValue& block = c.Get("weight_block_size");
  const auto positive = [](const ConfigValue& v) {
    return v.type == ConfigValue::Type::kInt && v.i > 0;
  };
  if (block.type == ConfigValue::Type::kNull) return;
  if (positive(block)) {
    s->weight_block_size = std::make_pair(block.i, block.i);
  } else if (block.type == ConfigValue::Type::kList && !block.list.empty() &&
             block.list.size() <= 2 && positive(block.list.front()) &&
             positive(block.list.back())) {
    s->weight_block_size = std::make_pair(block.list.front().i, block.list.back().i);
  } else {
    Fail(
        "weight_block_size: expected null, a positive integer or a list of one or two positive "
        "integers (the fp8 scale block), got {}",
        block.ToString());
  }
}

}  // namespace

DType MoeSettings::WeightDtypeOf(const std::string& module) const {
  if (!IsFp8Storage()) return weight_dtype;
  // get_weight_dtype fnmatches the module's name and its last dotted part (Python's fnmatch:
  // *, ?, [...], no escapes); the MoE block's modules have one part.
  for (const std::string& pattern : unquantized_modules)
    if (fnmatch(pattern.c_str(), module.c_str(), FNM_NOESCAPE) == 0) return dtype;
  return weight_dtype;
}

MoeSettings ResolveMoeSettings(const Config& c) {
  MoeSettings s;
  s.revision = c.revision();
  s.key_notes = AccountMoeKeys(c);

  s.model_name = c.Str("model_name");
  s.decoder_block = c.Str("decoder_block");
  s.per_device_batch_size = c.Float("per_device_batch_size");
  s.max_target_length = c.Int("max_target_length");
  s.emb_dim = c.Int("emb_dim");
  s.moe_expert_input_dim = c.Int("moe_expert_input_dim");
  s.mlp_dim = c.Int("mlp_dim");
  s.moe_mlp_dim = c.Int("moe_mlp_dim");
  if (c.Has("padded_base_moe_mlp_dim") &&
      c.Get("padded_base_moe_mlp_dim").type != ConfigValue::Type::kNull)
    s.padded_base_moe_mlp_dim = c.Int("padded_base_moe_mlp_dim");
  s.num_experts = c.Int("num_experts");
  s.num_experts_per_tok = c.Int("num_experts_per_tok");
  s.shared_experts = c.Int("shared_experts");
  s.first_num_dense_layers = c.Int("first_num_dense_layers");
  s.first_num_hash_layers = c.Int("first_num_hash_layers");
  s.interleave_moe_layer_step = c.Int("interleave_moe_layer_step");

  s.dtype = ParseDType(c.Str("dtype"), "dtype");
  s.weight_dtype = ParseDType(c.Str("weight_dtype"), "weight_dtype");
  s.float32_gate_logits = c.Bool("float32_gate_logits");
  s.activations_in_float32 = c.Bool("activations_in_float32");
  s.float32_weight_sum = c.Bool("float32_weight_sum");
  s.mlp_activations = c.StrList("mlp_activations");
  s.mlp_activations_limit = c.Float("mlp_activations_limit");
  s.mlp_bias = c.Bool("mlp_bias");

  s.routed_score_func = c.Str("routed_score_func");
  s.routed_bias = c.Bool("routed_bias");
  s.routed_bias_update_rate = c.Float("routed_bias_update_rate");
  s.routed_scaling_factor = c.Float("routed_scaling_factor");
  s.norm_topk_prob = c.Bool("norm_topk_prob");
  s.n_routing_groups = c.Int("n_routing_groups");
  s.topk_routing_group = c.Int("topk_routing_group");
  s.use_random_routing = c.Bool("use_random_routing");
  s.load_balance_loss_weight = c.Float("load_balance_loss_weight");

  s.attention = c.Str("attention");
  s.sparse_matmul = c.Bool("sparse_matmul");
  s.capacity_factor = c.Float("capacity_factor");
  s.model_call_mode = c.Str("model_call_mode");
  s.use_ring_of_experts = c.Bool("use_ring_of_experts");
  s.num_moe_emb_chunks = c.Int("num_moe_emb_chunks");
  s.num_moe_token_chunks = c.Has("num_moe_token_chunks") ? c.Int("num_moe_token_chunks") : 1;
  s.defer_small_all_reduces = BoolOr(c, "defer_small_all_reduces", false);
  s.shardtrace_pr3981_emb_chunks = c.Int("shardtrace_pr3981_emb_chunks");
  if (s.shardtrace_pr3981_emb_chunks > 0 && !s.revision.behaviour.pr3981_proposal_applies)
    Fail(
        "shardtrace_pr3981_emb_chunks={}: shardtrace's model of PR 3981's proposed pipeline "
        "is a proposal against moe.py 313890777, not {}'s moe.py; use --maxtext-revision seed "
        "(num_moe_emb_chunks is MaxText's own key, another thing)",
        s.shardtrace_pr3981_emb_chunks, s.revision.Title());
  s.ragged_buffer_factor = c.Float("ragged_buffer_factor");
  s.moe_use_direct_token_gather = BoolOr(c, "moe_use_direct_token_gather", false);
  s.moe_topk_before_ep_all_gather = BoolOr(c, "moe_topk_before_ep_all_gather", false);
  s.moe_dispatch_no_expert_sharding = BoolOr(c, "moe_dispatch_no_expert_sharding", false);
  s.megablox = c.Bool("megablox");
  s.use_tokamax_gmm = c.Bool("use_tokamax_gmm");
  s.use_gmm_v2 = c.Bool("use_gmm_v2");
  s.wi_tile_fwd = Tiling(c, "wi_tile_fwd");
  s.wo_tile_fwd = Tiling(c, "wo_tile_fwd");

  s.custom_mesh_and_rule = c.Str("custom_mesh_and_rule");
  s.shard_exp_on_fsdp = c.Bool("shard_exp_on_fsdp");
  s.use_2d_fsdp_sharding = c.Bool("use_2d_fsdp_sharding");
  s.use_batch_split_schedule = c.Bool("use_batch_split_schedule");
  s.batch_split_factor = c.Int("batch_split_factor");
  s.moe_fsdp_use_two_stage_all_gather = c.Bool("moe_fsdp_use_two_stage_all_gather");
  s.shard_mode = c.Str("shard_mode");

  if (s.IsFp8Storage()) ResolveFp8Storage(c, &s);

  s.quantization = c.Str("quantization");
  s.use_qwix_quantization = c.Bool("use_qwix_quantization");
  return s;
}

}  // namespace shardtrace
