#include "config/key_defaults.h"

#include <array>
#include <utility>

namespace shardtrace::config_internal {
namespace {

// Written as YAML so the values go through the same scalar typing as base.yml and their
// YAML types become the expected types. Keys present in a loaded base.yml win over these.
constexpr std::string_view kFallbackYaml = R"yaml(
# MaxText defaults that live in types.py, not base.yml.
emb_dim: null
mlp_dim: null
moe_mlp_dim: null
num_query_heads: null
num_kv_heads: null
num_decoder_layers: null
using_pipeline_parallelism: False
padded_base_moe_mlp_dim: null
prefuse_moe_weights: False
enable_dp_attention: False
fuse_expert_scales: False
ragged_sort_use_single_sparsecore: False
override_model_config: False
vision_encoder_block: null
# pyconfig's include directive (config/base_config_chain.h); inert in a model file.
base_config: null
log_moe_bias_norms: False

# maxtext-facts.md section 1.4: seed-era value, or the HEAD value for HEAD-only keys.
num_experts: 1
num_experts_per_tok: 1
base_emb_dim: 2048
base_mlp_dim: 7168
base_moe_mlp_dim: -1
global_parameter_scale: 1
moe_expert_input_dim: -1
capacity_factor: -1.0
sparse_matmul: True
megablox: True
use_tokamax_gmm: False
use_gmm_v2: False
use_ring_of_experts: False
ragged_buffer_factor: -1.0
num_moe_token_chunks: 1
moe_chunk_barrier: False
num_moe_emb_chunks: 0
# Not MaxText's: the chunk count of shardtrace's model of PR 3981's pipeline (seed only).
shardtrace_pr3981_emb_chunks: 0
use_ragged_sort: False
moe_dispatch_no_expert_sharding: False
routed_bias: False
routed_bias_update_rate: 0.0
routed_score_func: ''
routed_scaling_factor: 1.0
n_routing_groups: -1
topk_routing_group: -1
norm_topk_prob: False
load_balance_loss_weight: 0.0
use_random_routing: False
first_num_hash_layers: 0
mlp_activations: ['silu', 'linear']
mlp_activations_limit: -1.0
mlp_bias: False
shared_experts: 0
first_num_dense_layers: 0
interleave_moe_layer_step: 1
inhomogeneous_layer_cycle_interval: 1
shard_exp_on_fsdp: False
use_2d_fsdp_sharding: False
use_batch_split_schedule: False
batch_split_factor: 1
moe_fsdp_use_two_stage_all_gather: False
merge_gating_gmm: False
check_vma: False
float32_weight_sum: True
float32_gate_logits: False
activations_in_float32: False
dtype: 'bfloat16'
weight_dtype: 'float32'
matmul_precision: 'default'
quantization: ''
use_qwix_quantization: False
model_call_mode: ''
model_name: 'default'
decoder_block: 'llama2'
attention: 'autoselected'
shard_mode: 'auto'
custom_mesh_and_rule: ''
override_logical_axis_rules: False
debug_sharding: False
use_custom_sort_vjp: True
remove_size_one_mesh_axis_from_type: True
shardy: True
per_device_batch_size: 12.0
max_target_length: 2048
dropout_rate: 0.0
vocab_size: 32000
wi_tile_fwd_batch_seq: 512
wi_tile_fwd_embed_dim: 1024
wi_tile_fwd_mlp_dim: 1024
wi_tile_dlhs_batch_seq: 512
wi_tile_dlhs_embed_dim: 1024
wi_tile_dlhs_mlp_dim: 1024
wi_tile_drhs_batch_seq: 512
wi_tile_drhs_embed_dim: 1024
wi_tile_drhs_mlp_dim: 1024
wo_tile_fwd_batch_seq: 512
wo_tile_fwd_embed_dim: 1024
wo_tile_fwd_mlp_dim: 1024
wo_tile_dlhs_batch_seq: 512
wo_tile_dlhs_embed_dim: 1024
wo_tile_dlhs_mlp_dim: 1024
wo_tile_drhs_batch_seq: 512
wo_tile_drhs_embed_dim: 1024
wo_tile_drhs_mlp_dim: 1024
ici_diloco_parallelism: 1
ici_data_parallelism: 1
ici_pipeline_parallelism: 1
ici_fsdp_parallelism: -1
ici_fsdp_transpose_parallelism: 1
ici_sequence_parallelism: 1
ici_context_parallelism: 1
ici_context_usp_ulysses_parallelism: 1
ici_context_autoregressive_parallelism: 1
ici_tensor_parallelism: 1
ici_tensor_transpose_parallelism: 1
ici_tensor_sequence_parallelism: 1
ici_expert_parallelism: 1
ici_autoregressive_parallelism: 1
dcn_diloco_parallelism: 1
dcn_data_parallelism: -1
dcn_pipeline_parallelism: 1
dcn_fsdp_parallelism: 1
dcn_fsdp_transpose_parallelism: 1
dcn_sequence_parallelism: 1
dcn_context_parallelism: 1
dcn_context_usp_ulysses_parallelism: 1
dcn_context_autoregressive_parallelism: 1
dcn_tensor_parallelism: 1
dcn_tensor_transpose_parallelism: 1
dcn_tensor_sequence_parallelism: 1
dcn_expert_parallelism: 1
dcn_autoregressive_parallelism: 1
num_slices: -1
hardware: 'tpu'
allow_split_physical_axes: False
custom_mesh: ''
)yaml";

// Derived key -> the key a user sets instead.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kDerivedOnly = {{
    {"emb_dim", "base_emb_dim"},
    {"mlp_dim", "base_mlp_dim"},
    {"moe_mlp_dim", "base_moe_mlp_dim"},
    {"num_query_heads", "base_num_query_heads"},
    {"num_kv_heads", "base_num_kv_heads"},
    {"num_decoder_layers", "base_num_decoder_layers"},
    {"using_pipeline_parallelism", "ici_pipeline_parallelism / dcn_pipeline_parallelism"},
}};

constexpr std::array<std::string_view, 1> kUntyped = {"image_size_for_vit"};

}  // namespace

std::vector<YamlEntry> FallbackDefaults(ParsedYamlCache* cache) {
  return ParseConfigYaml(kFallbackYaml, "built-in defaults (key_defaults.cc)", nullptr, cache);
}

bool IsUntypedKey(std::string_view key) {
  for (const std::string_view untyped : kUntyped) {
    if (untyped == key) return true;
  }
  return false;
}

bool IsDerivedOnlyKey(std::string_view key) {
  for (const auto& [derived, source] : kDerivedOnly) {
    if (derived == key) return true;
  }
  return false;
}

std::string DerivedSourceKey(std::string_view key) {
  for (const auto& [derived, source] : kDerivedOnly) {
    if (derived == key) return std::string(source);
  }
  return {};
}

}  // namespace shardtrace::config_internal
