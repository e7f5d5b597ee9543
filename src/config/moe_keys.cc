#include "config/moe_keys.h"

#include <fmt/format.h>

#include <optional>

#include "config/config.h"
#include "util/error.h"

namespace shardtrace {
namespace {

constexpr MoeKeyStatus M = MoeKeyStatus::kModelled;
constexpr MoeKeyStatus N = MoeKeyStatus::kForwardNeutral;
constexpr MoeKeyStatus R = MoeKeyStatus::kNotModelled;

// Facts: the release's base.yml (testdata/maxtext/configs/base.yml, lines 243-394 and the
// remat block) and where its moe.py reads each key. Order: base.yml's.
std::vector<MoeKeyEntry> MakeTable() {
  return {
      {"num_experts", "1", M, "E: every expert dim, the router's output", "16"},
      {"num_experts_per_tok", "1", M, "K: top-k, the routed rows", "4"},
      {"megablox", "True", M, "the grouped-matmul kernel named in the trace", "False"},
      {"sparse_matmul", "True", M, "selects the path (sparse_matmul or dense_matmul)", "False"},
      {"capacity_factor", "-1.0", M, "expert capacity: token dropping, the capacity dim C", "2.0",
       "sparse_matmul=false"},
      {"num_moe_token_chunks", "1", M,
       "ring of experts: this device's tokens split along the sequence into N chunks, each "
       "through the whole ring (its own token and logit all-gathers, routing, grouped matmuls "
       "and psum_scatter; XLA may overlap them), the outputs concatenated; the load-balance "
       "loss is the chunks' mean, the bias update one sign of the chunks' summed expert counts "
       "(e591f30: the mean of the chunks' updates); with num_moe_emb_chunks each chunk's body "
       "runs in embed-dim chunks",
       "2", "use_ring_of_experts=true", RevisionId::kMain},
      {"moe_chunk_barrier", "False", N,
       "an optimization_barrier between token chunks: the same values, and only with "
       "num_moe_token_chunks > 1",
       "True"},
      {"moe_log_max_load_ratio", "False", N, "logs the ring path's load ratio", "True"},
      {"ragged_buffer_factor", "-1.0", M, "the ragged all-to-all buffer rows", "2.0"},
      {"eval_ragged_buffer_factor", "-1.0", N, "ragged_buffer_factor for evaluation steps only",
       "2.0"},
      {"moe_dropless_fallback", "None", R,
       "'layer' reruns an overflowing layer dropless inside the forward pass; 'step' reruns the "
       "step",
       "layer"},
      {"retry_dropless_first_steps", "0", N, "the training loop's dropless retries", "2"},
      {"first_phase_ragged_buffer_factor", "0.0", N,
       "the ragged buffer of the first retried steps (training loop)", "2.0"},
      {"log_required_ragged_buffer_factor", "False", N,
       "logs the smallest ragged_buffer_factor that drops nothing", "True"},
      {"log_step_diagnostics", "False", N, "logs gradient and bias diagnostics per step", "True"},
      {"moe_expert_input_dim", "-1", M, "the experts' input dim M when it differs from emb_dim",
       "256"},
      {"base_moe_mlp_dim", "-1", M, "H: the experts' hidden dim", "512"},
      {"load_balance_loss_weight", "0.0", M, "adds the load-balance loss and its collectives",
       "0.01"},
      {"moe_use_megatron_seq_aux_loss", "False", R,
       "Megatron's sequence-wise aux loss for sigmoid routers, computed after the layer", "True",
       "routed_score_func=sigmoid"},
      {"use_random_routing", "False", M,
       "random top-k in place of the router's (expert parallelism 1 only; refused above)", "True"},
      {"use_custom_sort_vjp", "True", N, "the sort's backward only", "False"},
      {"router_topk_matmul_vjp", "False", N, "the top-k gather's backward only", "True"},
      {"use_ring_of_experts", "False", M,
       "the ring path: all-gather tokens over EP, local experts, reduce-scatter", "True"},
      {"moe_topk_before_ep_all_gather", "False", M,
       "ring of experts: top-k on the local tokens, then the [B,S,K] top-k weights and ids "
       "(and the per-sequence mean router probabilities [B,E] for the load-balance loss) "
       "all-gathered over the expert axes instead of the [B,S,E] logits",
       "True", "use_ring_of_experts=true", RevisionId::kRelease},
      {"te_moe_block", "False", R, "TransformerEngine's MoEBlock in place of moe.py's", "True"},
      {"te_ep_overflow_check_every_n_steps", "20", N,
       "a host check interval of TransformerEngine's block", "10"},
      {"te_gmm_quantization", "''", R, "quantizes TransformerEngine's grouped matmuls", "te_mxfp8"},
      {"moe_quantize_token_all_gather", "False", R,
       "quantizes the tokens before the expert-parallel all-gather", "True"},
      {"moe_quantize_combine_bwd_method", "''", N, "quantizes the combine's backward only", "fp8"},
      {"num_moe_emb_chunks", "0", M,
       "ring of experts: the tokens all-gathered and routed one chunk of the embed dim at a "
       "time (embed_dim // N columns each), each chunk's wi gmm added to gmm v2's running "
       "partial sum; routing is chunk 0's. Not the chunk count of shardtrace's model of PR "
       "3981's proposed pipeline: that is the pseudo-key shardtrace_pr3981_emb_chunks below",
       "2", "use_ring_of_experts=true use_tokamax_gmm=true use_gmm_v2=true", RevisionId::kMain},
      {"moe_dispatch_no_expert_sharding", "False", M,
       "dense_matmul's training branch with capacity_factor > 0: dispatch, layer_w0 and "
       "layer_w1 constrained with 'expert' taken off their batch dim (the expert dim keeps it), "
       "so XLA moves the dispatched tokens with all-to-alls instead of all-gathering the expert "
       "kernels over 'expert'; elsewhere a note says the run does not read it",
       "True", "sparse_matmul=false capacity_factor=1.0", RevisionId::kMain},
      {"use_ragged_sort", "False", N, "a Pallas kernel for the same permutation", "True"},
      {"moe_use_direct_token_gather", "False", M,
       "permute gathers each expert-ordered row from the tokens (argsort // K) instead of "
       "repeating every token K times and sorting the copies: no replicated_inputs_2d",
       "True", "", RevisionId::kRelease},
      {"use_gather_mosaic_kernel", "False", N, "a Mosaic kernel for the same token gather", "True"},
      {"ragged_gather_fallback", "False", N, "the JAX reference of the same gather", "True"},
      {"ragged_gather_reduce_fallback", "False", N, "the JAX reference of the same reduce", "True"},
      {"ragged_gather_cost_estimate_flops", "-1", N, "a kernel cost estimate for XLA", "100"},
      {"ragged_gather_reduce_cost_estimate_flops", "-1", N, "a kernel cost estimate for XLA",
       "100"},
      {"ragged_gather_cost_estimate_bytes_accessed", "-1", N, "a kernel cost estimate for XLA",
       "100"},
      {"ragged_gather_reduce_cost_estimate_bytes_accessed", "-1", N,
       "a kernel cost estimate for XLA", "100"},
      {"moe_pin_sparse_core_all_gathers", "False", N,
       "runs the same all-gathers on TPU SparseCores", "True"},
      {"moe_pin_sparse_core_ep_all_gathers", "False", N,
       "runs the same expert-parallel all-gathers on TPU SparseCores", "True"},
      {"moe_pin_sparse_core_fsdp_all_gathers", "False", N,
       "runs the same fsdp weight all-gathers on TPU SparseCores", "True"},
      {"moe_pin_sparse_core_fsdp_all_gathers_fwd_only", "False", N,
       "SparseCore placement of the fsdp all-gathers, forward only", "True"},
      {"moe_fsdp_all_gather_sparse_core_id", "0", N, "which SparseCore", "1"},
      {"moe_ep_all_gather_sparse_core_id", "1", N, "which SparseCore", "0"},
      {"wi_tile_fwd_batch_seq", "512", M, "the wi gmm's tiling (the megablox note)", "256"},
      {"wi_tile_fwd_embed_dim", "1024", M, "the wi gmm's tiling (the megablox note)", "512"},
      {"wi_tile_fwd_mlp_dim", "1024", M, "the wi gmm's tiling (the megablox note)", "512"},
      {"eval_wi_tile_fwd_batch_seq", "512", N, "the wi gmm's tiling in evaluation steps", "256"},
      {"eval_wi_tile_fwd_embed_dim", "1024", N, "the wi gmm's tiling in evaluation steps", "512"},
      {"eval_wi_tile_fwd_mlp_dim", "1024", N, "the wi gmm's tiling in evaluation steps", "512"},
      {"wi_tile_dlhs_batch_seq", "512", N, "the wi gmm's backward tiling", "256"},
      {"wi_tile_dlhs_embed_dim", "1024", N, "the wi gmm's backward tiling", "512"},
      {"wi_tile_dlhs_mlp_dim", "1024", N, "the wi gmm's backward tiling", "512"},
      {"wi_tile_drhs_batch_seq", "512", N, "the wi gmm's backward tiling", "256"},
      {"wi_tile_drhs_embed_dim", "1024", N, "the wi gmm's backward tiling", "512"},
      {"wi_tile_drhs_mlp_dim", "1024", N, "the wi gmm's backward tiling", "512"},
      {"wo_tile_fwd_batch_seq", "512", M, "the wo gmm's tiling (the megablox note)", "256"},
      {"wo_tile_fwd_embed_dim", "1024", M, "the wo gmm's tiling (the megablox note)", "512"},
      {"wo_tile_fwd_mlp_dim", "1024", M, "the wo gmm's tiling (the megablox note)", "512"},
      {"eval_wo_tile_fwd_batch_seq", "512", N, "the wo gmm's tiling in evaluation steps", "256"},
      {"eval_wo_tile_fwd_embed_dim", "1024", N, "the wo gmm's tiling in evaluation steps", "512"},
      {"eval_wo_tile_fwd_mlp_dim", "1024", N, "the wo gmm's tiling in evaluation steps", "512"},
      {"wo_tile_dlhs_batch_seq", "512", N, "the wo gmm's backward tiling", "256"},
      {"wo_tile_dlhs_embed_dim", "1024", N, "the wo gmm's backward tiling", "512"},
      {"wo_tile_dlhs_mlp_dim", "1024", N, "the wo gmm's backward tiling", "512"},
      {"wo_tile_drhs_batch_seq", "512", N, "the wo gmm's backward tiling", "256"},
      {"wo_tile_drhs_embed_dim", "1024", N, "the wo gmm's backward tiling", "512"},
      {"wo_tile_drhs_mlp_dim", "1024", N, "the wo gmm's backward tiling", "512"},
      {"merge_gating_gmm", "False", N,
       "read only by the DeepSeek batch-split layer (refused), never by moe.py", "True"},
      {"use_tokamax_gmm", "False", M, "the grouped-matmul kernel named in the trace", "True"},
      {"use_gmm_v2", "False", M,
       "the grouped-matmul kernel named in the trace (tokamax gmm v2 through megablox's gmm; "
       "the values are the same matmul's)",
       "True", "use_tokamax_gmm=true"},
      {"use_gmm_v2_heuristic_tiling", "False", N, "tiling of the same grouped matmul", "True"},
      {"norm_topk_prob", "False", M, "renormalises the top-k weights", "True"},
      {"return_routed_experts", "False", N,
       "read only by fused_moe_matmul (attention=vllm_rpa: tpu_inference's fused kernel, which "
       "shardtrace refuses), where it keeps the top-k expert ids as an nnx.Intermediate for "
       "router replay; sparse_matmul and dense_matmul never read it",
       "True", "", RevisionId::kRelease},
      {"moe_fsdp_use_two_stage_all_gather", "False", M,
       "two kernel constraints with a barrier between them", "True"},
      {"shard_exp_on_fsdp", "False", M, "the kernels' expert dim on fsdp (the kernel specs)",
       "True"},
      {"shard_embed_moe_on_fsdp", "False", R,
       "acts only through qwix's fixed-calibration gmm rule (quantization=fp8_full with "
       "use_qwix_quantization): the sparse path's kernels enter shard_map with embed_moe still "
       "on fsdp and the tokamax gmm all-gathers their fp8 values; shardtrace traces weights "
       "unquantized. Without quantization and a fixed weight calibration MaxText's config "
       "validation refuses it, and so does shardtrace",
       "True", "", RevisionId::kRelease},
      {"use_2d_fsdp_sharding", "False", M, "2-D fsdp kernel specs", "True"},
      {"first_num_dense_layers", "0", M, "which layers are dense (dump, diff)", "1"},
      {"shared_experts", "0", M, "RoutedAndSharedMoE's shared MlpBlock", "1",
       "decoder_block=deepseek"},
      {"routed_scaling_factor", "1.0", M, "scales DeepSeek's top-k weights", "2.0",
       "decoder_block=deepseek"},
      {"routed_score_func", "''", M, "the router's score function", "sigmoid"},
      {"routed_bias", "False", M, "the routing bias added before top-k", "True"},
      {"routed_bias_update_rate", "0.0", M, "the bias updates the layer returns", "0.01",
       "routed_bias=true"},
      {"defer_small_all_reduces", "False", M,
       "ring of experts with loss-free bias updates: no all-reduce of the expert counts in the "
       "layer; its bias_updates output is each shard's local counts [shards, token chunks, E] "
       "(sharded over the batch axes the psum would have used), which the training step sums "
       "once after the layer loop before the one sign",
       "True",
       "use_ring_of_experts=true model_name=deepseek3-tiny override_model_config=true "
       "routed_bias_update_rate=0.01",
       RevisionId::kRelease},
      {"mlp_bias", "False", M, "expert biases", "True"},
      {"n_routing_groups", "-1", M, "DeepSeek-V3 group routing", "2",
       "model_name=deepseek3-tiny override_model_config=true topk_routing_group=1"},
      {"first_num_hash_layers", "0", M,
       "DeepSeek-V4's first layers route by token-id hash; the trace is a later layer's (noted)",
       "1"},
      {"topk_routing_group", "-1", M, "DeepSeek-V3 group routing", "2",
       "model_name=deepseek3-tiny override_model_config=true n_routing_groups=4 "
       "topk_routing_group=1"},
      {"use_batch_split_schedule", "False", M,
       "MaxText runs the DeepSeek batch-split layer instead (the trace says so or refuses)",
       "True"},
      {"batch_split_factor", "1", N, "only with use_batch_split_schedule", "2"},
      {"use_lineage", "False", R, "Lineage DeepSeek-V3 execution", "True"},
      {"inhomogeneous_layer_cycle_interval", "1", N, "which decoder layers are MoE (layer layout)",
       "2"},
      {"moe_mlpwi_0", "'remat'", N, "what the backward keeps: trace --step (docs/step.md)",
       "device"},
      {"moe_mlpwi_1", "'remat'", N, "what the backward keeps: trace --step (docs/step.md)",
       "device"},
      {"moe_mlpwo", "'remat'", N, "what the backward keeps: trace --step (docs/step.md)", "device"},
      {"moe_x_sorted", "'remat'", N, "what the backward keeps: trace --step (docs/step.md)",
       "device"},
      {"moe_routing_maps", "'remat'", N, "what the backward keeps: trace --step (docs/step.md)",
       "device"},
      {"moe_mlp_tp_size", "1", N,
       "read by the vLLM rollout's weight converter, never by moe.py's forward", "2"},
      {"use_stream_chunking", "None", N,
       "an input-pipeline key (raw text datasets), not read by moe.py", "True"},
  };
}

// "MaxText 0.2.5 (the PyPI release)", as MaxTextRevision::Title() names a revision.
std::string RevisionTitle(RevisionId id) {
  for (const RevisionInfo& r : Revisions())
    if (r.id == id) return fmt::format("MaxText {} ({})", r.name, r.label);
  return "?";
}

}  // namespace

const std::vector<MoeKeyEntry>& MoeKeyTable() {
  static const std::vector<MoeKeyEntry> kTable = MakeTable();
  return kTable;
}

std::string_view ToString(MoeKeyStatus status) {
  switch (status) {
    case MoeKeyStatus::kModelled:
      return "modelled";
    case MoeKeyStatus::kForwardNeutral:
      return "forward-neutral";
    case MoeKeyStatus::kNotModelled:
      return "not modelled";
  }
  return "";
}

std::vector<std::string> AccountMoeKeys(const Config& config) {
  std::vector<std::string> notes;
  const RevisionId revision = config.revision().id;
  for (const MoeKeyEntry& e : MoeKeyTable()) {
    const std::optional<std::string> set = AwayFromDefault(config, e.key, e.default_value);
    if (!set) continue;
    const std::string& value = *set;
    // The enum is oldest first, as Revisions() is. A base.yml without the key refuses it as
    // unknown already; this is a newer base.yml run under an older --maxtext-revision (or the
    // seed, where num_moe_emb_chunks is only a built-in fallback).
    if (revision < e.since)
      Fail(
          "{}={}: the moe.py of {} has no such key (it reads it from {} on); expected {} or "
          "another --maxtext-revision{} (docs/maxtext-keys.md)",
          e.key, value, config.revision().Title(), RevisionTitle(e.since), e.default_value,
          e.key == "num_moe_emb_chunks"
              ? "; shardtrace's model of PR 3981's pipeline is shardtrace_pr3981_emb_chunks"
              : "");
    if (e.status == MoeKeyStatus::kModelled) continue;
    if (e.status == MoeKeyStatus::kNotModelled)
      Fail("{}={} is not modelled by shardtrace ({}: {}); expected {} (docs/maxtext-keys.md)",
           e.key, value, config.revision().Title(), e.what, e.default_value);
    notes.push_back(fmt::format("{}={}: forward-neutral, not traced: {}", e.key, value, e.what));
  }
  return notes;
}

std::string MoeKeyTableMarkdown() {
  std::string out =
      "<!-- Generated from src/config/moe_keys.cc; a test checks this file against it "
      "(UPDATE_GOLDEN=1 rewrites it). -->\n"
      "# MaxText MoE keys and what shardtrace does with them\n\n"
      "Every MoE key of the release's `base.yml` (MaxText 0.2.5, "
      "`testdata/maxtext/configs/base.yml`), in its order. **modelled**: the trace follows the "
      "key. **forward-neutral**: it changes only the backward pass, remat, logging, evaluation "
      "steps or which TPU kernel runs the same computation; set away from its default, the "
      "trace carries a note saying so. **not modelled**: set away from its default, every "
      "command refuses the config in one line naming the key (exit 2). A key set away from "
      "its default is never silently ignored. `tests/moe_keys_test.cc` sets each key to the "
      "example value below and checks exactly that.\n\n"
      "| key | default | status | what it does | example |\n|---|---|---|---|---|\n";
  for (const MoeKeyEntry& e : MoeKeyTable())
    out += fmt::format("| `{}` | `{}` | {} | {} | `{}={}`{} |\n", e.key, e.default_value,
                       ToString(e.status), e.what, e.key, e.example,
                       e.needs.empty() ? "" : fmt::format(" with `{}`", e.needs));
  out +=
      "\n## Not a MaxText key: `shardtrace_pr3981_emb_chunks`\n\n"
      "shardtrace's model of the chunked route / dispatch / gmm pipeline proposed in MaxText PR "
      "3981 (a proposal, in no MaxText revision; the page "
      "`visualizations/moe_pipeline_chunked.md`) "
      "reads its chunk count from shardtrace's own pseudo-key `shardtrace_pr3981_emb_chunks` "
      "(default 0: moe.py's own sparse_matmul; N >= 1: the pipeline, N > 1 chunks of the embed "
      "dim with a wi all-gather each). It is accepted only under the seed revision (313890777), "
      "whose moe.py the proposal was written against. It used to be spelt `num_moe_emb_chunks`, "
      "which is MaxText's own key from main (e591f30) on and means another thing (the row above); "
      "under the seed revision `num_moe_emb_chunks` is now refused by name.\n";
  return out;
}

}  // namespace shardtrace
