// MoeSettings: every config value the tracer reads, typed and resolved once from a Config,
// so that path code never looks a key up by string in the middle of a trace, a misspelt
// key is a compile error, and a bad value (an unknown dtype, ...) fails before anything is
// traced. Each field is named exactly as its MaxText config key, which is also the name
// messages cite; the few derived values say what they derive from. src/trace/ reads only
// this struct (through MoeSetup::settings), never the Config's key lookups.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/maxtext_revision.h"
#include "numeric/dtype.h"

namespace shardtrace {

class Config;

// The megablox tiling keys of one grouped matmul: <prefix>_batch_seq, _embed_dim, _mlp_dim
// (prefix wi_tile_fwd or wo_tile_fwd).
struct GmmTiling {
  int64_t batch_seq = 0;
  int64_t embed_dim = 0;
  int64_t mlp_dim = 0;
};

struct MoeSettings {
  MaxTextRevision revision;  // whose moe.py semantics (config/maxtext_revision.h)
  // Forward-neutral keys set away from their defaults, one note each (config/moe_keys.h).
  std::vector<std::string> key_notes;

  // Model and dims.
  std::string model_name;
  std::string decoder_block;
  double per_device_batch_size = 0;
  int64_t max_target_length = 0;
  int64_t emb_dim = 0;
  int64_t moe_expert_input_dim = 0;
  int64_t mlp_dim = 0;
  int64_t moe_mlp_dim = 0;
  std::optional<int64_t> padded_base_moe_mlp_dim;  // null in base.yml
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t shared_experts = 0;
  int64_t first_num_dense_layers = 0;
  int64_t first_num_hash_layers = 0;  // DeepSeek-V4: the first layers route by token-id hash
  int64_t interleave_moe_layer_step = 0;

  // Types and the expert MLP.
  DType dtype = DType::kBfloat16;
  DType weight_dtype = DType::kFloat32;
  bool float32_gate_logits = false;
  bool activations_in_float32 = false;
  bool float32_weight_sum = false;
  std::vector<std::string> mlp_activations;
  double mlp_activations_limit = -1;
  bool mlp_bias = false;

  // Routing.
  std::string routed_score_func;
  bool routed_bias = false;
  double routed_bias_update_rate = 0;
  double routed_scaling_factor = 1;
  bool norm_topk_prob = false;
  int64_t n_routing_groups = -1;
  int64_t topk_routing_group = -1;
  bool use_random_routing = false;
  double load_balance_loss_weight = 0;

  // Path selection and kernels.
  std::string attention;
  bool sparse_matmul = true;
  double capacity_factor = -1;
  std::string model_call_mode;
  bool use_ring_of_experts = false;
  // MaxText's num_moe_emb_chunks (main, the release): the ring's token all-gather in chunks
  // of the embed dim.
  int64_t num_moe_emb_chunks = 0;
  // MaxText's num_moe_token_chunks (main, the release): the ring's tokens in sequence chunks,
  // each through the whole ring (1: none).
  int64_t num_moe_token_chunks = 1;
  // The release's defer_small_all_reduces (ring of experts): the layer returns its local
  // expert counts instead of all-reducing them into the bias update.
  bool defer_small_all_reduces = false;
  // Not a MaxText key: the chunk count of shardtrace's model of PR 3981's proposed pipeline
  // (on the seed's moe.py; 0: moe.py's own wrapper).
  int64_t shardtrace_pr3981_emb_chunks = 0;
  double ragged_buffer_factor = -1;
  // The release's keys (moe.py 0.2.5; a base.yml without them reads their defaults, and
  // config/moe_keys.cc refuses them under an older --maxtext-revision).
  // permute takes each expert-ordered row straight from the tokens (argsort // K).
  bool moe_use_direct_token_gather = false;
  // Ring of experts: top-k on the local tokens, then the top-k weights and ids all-gathered
  // instead of the router logits.
  bool moe_topk_before_ep_all_gather = false;
  // dense_matmul's training capacity branch: 'expert' peeled off the dispatch's batch dim
  // (main and the release).
  bool moe_dispatch_no_expert_sharding = false;
  bool megablox = true;
  bool use_tokamax_gmm = false;
  bool use_gmm_v2 = false;  // with use_tokamax_gmm: megablox's gmm on tokamax gmm v2
  GmmTiling wi_tile_fwd;
  GmmTiling wo_tile_fwd;

  // Sharding variants.
  std::string custom_mesh_and_rule;
  bool shard_exp_on_fsdp = false;
  bool use_2d_fsdp_sharding = false;
  bool use_batch_split_schedule = false;
  int64_t batch_split_factor = 1;
  bool moe_fsdp_use_two_stage_all_gather = false;
  std::string shard_mode;

  // fp8 weight storage (weight_dtype float8_e4m3fn, MaxText 0.2.5 and later): the modules
  // common_types.get_weight_dtype keeps in `dtype` (fnmatch patterns), and the scale blocks
  // of weight_block_size as (in, out): an int b is (b, b), [a] is (a, a), [a, b] is (a, b);
  // unset (null) means one scale per tensor (per expert for the routed kernels).
  std::vector<std::string> unquantized_modules;
  std::optional<std::pair<int64_t, int64_t>> weight_block_size;
  bool IsFp8Storage() const { return weight_dtype == DType::kFloat8E4M3Fn; }
  // The dtype get_weight_dtype gives `module` ("gate", "shared_expert_gate", ...):
  // `dtype` when an unquantized_modules pattern matches it under fp8 storage, else
  // weight_dtype.
  DType WeightDtypeOf(const std::string& module) const;

  // Quantization (noted in the trace, not modeled).
  std::string quantization;
  bool use_qwix_quantization = false;

  // routed_bias && routed_bias_update_rate > 0: the layer returns bias updates.
  bool UpdatesLoadBalanceBias() const { return routed_bias && routed_bias_update_rate > 0.0; }
};

// Reads and validates every field (a missing or mistyped key, an unknown dtype: Error
// naming the key).
MoeSettings ResolveMoeSettings(const Config& config);

}  // namespace shardtrace
