// The MoE constraints pyconfig enforces that need no mesh: top-k within the expert
// count, device-limited routing groups that divide the experts, a positive moe_mlp_dim
// for an MoE model, base_mlp_dim == base_moe_mlp_dim for a fully-MoE model (except
// gemma4), routed-bias updates only for deepseek, dropless-only dense GPT-OSS; and the
// attention and tokenizer keys the release's config validation requires of some MoE model
// files (DeepSeek-V4, the sparse indexer, engram layers). Run after
// the derived values are in place; each failure is one Error naming the keys.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "config/config_value.h"

namespace shardtrace::config_internal {

// The largest model dim, sequence length or layer count accepted (also after
// global_parameter_scale): far above any real model, and small enough that the products the
// tracer forms from a few of them (tokens x experts x dims) are checked, never wrapped.
inline constexpr int64_t kMaxConfigDim = int64_t{1} << 31;

// The integer keys the tracer divides by or sizes with (max_target_length, base_*_dim,
// num_experts_per_tok, shared_experts, layer counts, num_moe_emb_chunks, gmm tiles, ...) are
// within the range MaxText gives them meaning in. Run before the derived values.
void CheckIntKeys(const LayeredValues& values);

// dtype and weight_dtype are floating dtypes; mlp_activations is a non-empty list of known
// activations.
void CheckDtypeKeys(const LayeredValues& values);

void CheckMoeConstraints(const LayeredValues& values);

// The attention and tokenizer constraints MaxText's config validation puts on the release's
// MoE model files: decoder_block deepseek4 and use_indexer need attention=dot_product (or
// flash with use_tokamax_splash), and engram_layers need hf_access_token and tokenizer_path.
// Keys the loaded base.yml lacks (an older revision) are not checked.
void CheckAttentionConstraints(const LayeredValues& values);

// MaxText's validate_ragged_buffer_factor (main, the release): ragged_buffer_factor or
// eval_ragged_buffer_factor > 0 with use_ring_of_experts needs use_ragged_sort. Not checked
// where the loaded base.yml itself has no use_ragged_sort (the seed).
void CheckRaggedBufferConstraints(const LayeredValues& values, bool base_has_ragged_sort);

// The release's validation of its MoE knobs (types.py): moe_topk_before_ep_all_gather needs
// sparse_matmul and use_ring_of_experts; moe_use_direct_token_gather refuses
// use_gather_mosaic_kernel; num_moe_emb_chunks > 0 needs use_gmm_v2, use_ring_of_experts and
// moe_x_sorted remat; use_gmm_v2 needs use_tokamax_gmm. Keys the loaded base.yml lacks are not
// checked.
void CheckReleaseMoeKnobs(const LayeredValues& values,
                          const std::set<std::string, std::less<>>& base_keys);

// The float keys shardtrace turns into sizes or float32 factors (per_device_batch_size,
// capacity_factor, ragged_buffer_factor, ...) are finite and within what it can honour.
void CheckFloatKeys(const LayeredValues& values);

}  // namespace shardtrace::config_internal
