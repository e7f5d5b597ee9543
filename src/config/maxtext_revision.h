// Which MaxText revision's moe.py a config runs, and the one table of what differs between
// the revisions shardtrace models: the seed (313890777, 2026-05-04), main of 2026-08-22
// (e591f30, the configs in testdata/maxtext-configs/) and the PyPI release maxtext 0.2.5
// (testdata/maxtext/configs/). A revision is recognised from the keys the loaded base.yml
// defines (its fingerprint, docs/revisions.md), or named with --maxtext-revision; a base.yml
// that matches no fingerprint exactly gets the nearest revision and says so. The tracer reads
// the typed RevisionBehaviour of the revision, never its name, so a difference between
// revisions is one field here and one branch where moe.py differs.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrace {

enum class RevisionId { kSeed, kMain, kRelease };

// How get_routed_moe_shardings writes the sparse path's kernel in_specs when neither
// shard_exp_on_fsdp nor use_2d_fsdp_sharding is set.
enum class SparseKernelSpecs {
  // The seed: w0/w1 ('exp', 'embed_tensor_transpose', 'mlp_no_fsdp'), wo ('exp',
  // 'mlp_no_fsdp', 'embed_tensor_transpose'), as resolved (an 'exp' on fsdp stays on fsdp).
  kExpEmbedTensorTranspose,
  // main and the release: w0/w1 ('exp', None, 'mlp_no_fsdp'), wo ('exp', 'mlp_no_fsdp',
  // None), then remove_mesh_axes_from_partition_spec(..., ('fsdp',)): the embed dim and any
  // fsdp share of 'exp' are gathered before shard_map.
  kExpWithoutFsdp,
};

// The behaviour that differs between revisions, as the tracer reads it.
struct RevisionBehaviour {
  SparseKernelSpecs sparse_kernel_specs = SparseKernelSpecs::kExpEmbedTensorTranspose;
  // load_balance_loss divides the density by num_experts_per_tok (the release).
  bool lb_loss_density_per_top_k = false;
  // sparse_matmul constrains the kernels and biases inside a local _fsdp_all_gather(w, pspec),
  // so MaxText's debug_sharding dump names them all "moe/w" (the release).
  bool kernels_constrained_in_fsdp_all_gather = false;
  // The logical axis of the router kernel's embed dim in RoutedAndSharedMoE, DeepSeek,
  // Llama 4 and Gemma 4: 'embed_moe' (seed, main) or 'embed_router' (the release).
  std::string_view router_embed_axis = "embed_moe";
  // dense_matmul constrains dispatch, layer_w0 and layer_w1 through _maybe_shard_moe_dispatch,
  // whose argument is `inputs`: the dump's name for them (main, the release).
  bool dispatch_constrained_in_helper = false;
  // shardtrace's model of PR 3981's proposed pipeline (the pseudo-key
  // shardtrace_pr3981_emb_chunks) is written against this revision's moe.py: the seed's only.
  bool pr3981_proposal_applies = true;
  // padded_base_moe_mlp_dim pads wo's hidden dim as well as wi_0/wi_1's (the release); the
  // seed and main pad wi_0/wi_1 only, so a padding other than the MLP dim cannot contract.
  bool wo_padded_like_wi = false;
  // get_batchsplit_init_kernel_axes (use_batch_split_schedule): the seed stores wi
  // ('embed_moe', None, 'expert_only') and wo ('embed_moe', 'expert_only', None); main and the
  // release put the experts first, wi ('expert_only', 'embed_moe', None) and wo ('expert_only',
  // None, 'embed_moe').
  bool batch_split_kernels_expert_first = false;
  // With ragged_buffer_factor > 0, local_permute truncates the local group sizes to the
  // ragged buffer (_maybe_truncate_local_group_size: a prefix sum over the received slices
  // clamped at the buffer rows), as get_all_to_all_params truncates the traffic matrix (main,
  // the release). The seed sums them whole, so its grouped matmul counts rows that never
  // arrived and the groups after a dropped one slide onto the next expert's rows.
  bool ragged_buffer_truncates_group_sizes = false;
  // The model_name prefixes whose router runs deepseek_routing (experts by the biased scores,
  // weights from the unbiased ones) and keeps pre_bias_logits: "deepseek3" in the seed;
  // main adds "deepseek4"; the release adds "kimi-k2" as well.
  std::vector<std::string_view> deepseek_routing_models = {"deepseek3"};
  // The sparse path's loss-free bias update counts the experts over the whole batch: permute
  // psums the one-hot counts over the batch axes of the gate logits' spec (the expert axis
  // excluded on the ring, whose logits are gathered over it) before rate * sign(mean - count)
  // (the release). The seed and main count each device's own tokens.
  bool bias_counts_summed_over_batch_axes = false;
  // The sparse path's load-balance loss takes its router probabilities from pre_bias_logits
  // when the routing keeps them (permute: "ensures the router bias does not leak into the
  // auxiliary loss gradient", the release, moe.py:1521-1523); the seed, main and every dense
  // path take them from the biased gate_logits. Equal values while the bias is zero; the
  // bias's gradient tells them apart.
  bool sparse_lb_loss_from_pre_bias_logits = false;
  // num_moe_token_chunks > 1 on the ring: the bias update is one rate * sign(mean - count) of
  // the expert counts summed over the chunks (the release's finalize_bias_updates); main
  // averages the chunks' own updates instead (sum(bias_updates_list) / n_chunks).
  bool token_chunks_sum_bias_counts = false;
  // apply_ffn_activation clamps the deepseek/deepseek4 SwiGLU with mlp_activations_limit > 0
  // (wi_0's output from above, wi_1's both ways), as it clamps gpt-oss's (main, the release);
  // the seed clamps gpt-oss's only.
  bool deepseek_swiglu_clamped = false;
  // gemma4's per_expert_scale multiplies the top-k weights in get_topk (inside the sparse
  // path's shard_map, which reads it replicated) (main, the release); the seed scales the wo
  // kernel by it before the path. The same numbers; the backward psums its gradient.
  bool expert_scale_on_topk_weights = false;
  // With mlp_bias, sparse_matmul zeroes the rows past the routed ones after each bias add:
  // where(arange(rows) < valid_token_count, layer_w0 + b0, 0), likewise layer_w1 and wo's
  // output (gmm_up's `mask`, main and the release); the seed adds the biases unmasked. The
  // padding rows never reach the output, but each where is a buffer the backward masks its
  // cotangent through (gpt-oss at expert 4: four bf16[131072,2880] select_n at the TPU
  // compiler's fullest moment).
  bool mlp_bias_masks_padding_rows = false;
};

// One row of the revision table.
struct RevisionInfo {
  RevisionId id;
  std::string_view name;     // "313890777", "e591f30", "0.2.5": what outputs print
  std::string_view aliases;  // other --maxtext-revision spellings, comma-separated
  std::string_view label;    // "the seed revision", ...
  std::string_view moe_py;   // moe.py's path in that revision's tree
  int moe_py_lines = 0;      // how long it is (`wc -l`): a moe.py:NNN beyond this is a bug
  // Keys only this revision's base.yml defines among the three (docs/revisions.md).
  std::vector<std::string_view> fingerprint;
  RevisionBehaviour behaviour;
};

// The revisions, oldest first.
const std::vector<RevisionInfo>& Revisions();

struct MaxTextRevision {
  RevisionId id = RevisionId::kSeed;
  std::string name;  // RevisionInfo::name
  std::string why;   // one line: how the revision was decided
  RevisionBehaviour behaviour;

  const RevisionInfo& info() const;
  // "MaxText 0.2.5 (the PyPI release)": how outputs name it.
  std::string Title() const;
  // "`maxtext/layers/moe.py` at MaxText 0.2.5 (the PyPI release)": a page's source line; the
  // page's `moe.py:NNN` references cite that file (config/moe_lines.h).
  std::string MoePySource() const;
};

// The revision whose fingerprint `base_keys` (the keys the loaded base.yml defines) matches;
// none or several exactly: the one with the largest share of its fingerprint present, newest
// first on a tie, with `why` saying it is the nearest. `base_name` names the file in `why`.
MaxTextRevision DetectRevision(const std::set<std::string, std::less<>>& base_keys,
                               std::string_view base_name);

// --maxtext-revision NAME: a name or alias from the table (Error listing them otherwise).
MaxTextRevision NamedRevision(std::string_view name);

}  // namespace shardtrace
