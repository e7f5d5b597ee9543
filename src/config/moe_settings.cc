#include "config/moe_settings.h"

#include "config/config.h"
#include "config/moe_keys.h"

namespace shardtrace {
namespace {

GmmTiling Tiling(const Config& c, const std::string& prefix) {
  return {c.Int(prefix + "_batch_seq"), c.Int(prefix + "_embed_dim"), c.Int(prefix + "_mlp_dim")};
}

}  // namespace

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
  s.ragged_buffer_factor = c.Float("ragged_buffer_factor");
  s.megablox = c.Bool("megablox");
  s.use_tokamax_gmm = c.Bool("use_tokamax_gmm");
  s.wi_tile_fwd = Tiling(c, "wi_tile_fwd");
  s.wo_tile_fwd = Tiling(c, "wo_tile_fwd");

  s.custom_mesh_and_rule = c.Str("custom_mesh_and_rule");
  s.shard_exp_on_fsdp = c.Bool("shard_exp_on_fsdp");
  s.use_2d_fsdp_sharding = c.Bool("use_2d_fsdp_sharding");
  s.use_batch_split_schedule = c.Bool("use_batch_split_schedule");
  s.moe_fsdp_use_two_stage_all_gather = c.Bool("moe_fsdp_use_two_stage_all_gather");
  s.shard_mode = c.Str("shard_mode");

  s.quantization = c.Str("quantization");
  s.use_qwix_quantization = c.Bool("use_qwix_quantization");
  return s;
}

}  // namespace shardtrace
