#include "config/maxtext_revision.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ranges>

#include "util/error.h"

namespace shardtrace {

const std::vector<RevisionInfo>& Revisions() {
  // Facts: each revision's base.yml (src/config/maxtext/, testdata/maxtext-configs/,
  // testdata/maxtext/configs/) and moe.py; docs/revisions.md says where each field comes from.
  static const std::vector<RevisionInfo> kTable = {
      {.id = RevisionId::kSeed,
       .name = "313890777",
       .aliases = "seed",
       .label = "the seed revision",
       .moe_py = "src/MaxText/layers/moe.py",
       .moe_py_lines = 2276,
       .fingerprint = {"ici_tensor_transpose_parallelism", "enable_nnx"},
       .behaviour = {}},
      {.id = RevisionId::kMain,
       .name = "e591f30",
       .aliases = "main",
       .label = "main of 2026-08-22",
       .moe_py = "src/maxtext/layers/moe.py",
       .moe_py_lines = 3476,
       .fingerprint = {"num_moe_token_chunks", "moe_dispatch_no_expert_sharding", "enable_nnx"},
       .behaviour = {.sparse_kernel_specs = SparseKernelSpecs::kExpWithoutFsdp,
                     .dispatch_constrained_in_helper = true,
                     .pr3981_proposal_applies = false,
                     .batch_split_kernels_expert_first = true,
                     .ragged_buffer_truncates_group_sizes = true,
                     .deepseek_routing_models = {"deepseek3", "deepseek4"},
                     .deepseek_swiglu_clamped = true,
                     .expert_scale_on_topk_weights = true,
                     .mlp_bias_masks_padding_rows = true}},
      {.id = RevisionId::kRelease,
       .name = "0.2.5",
       .aliases = "release",
       .label = "the PyPI release",
       .moe_py = "maxtext/layers/moe.py",
       .moe_py_lines = 4955,
       .fingerprint = {"moe_x_sorted", "moe_use_direct_token_gather",
                       "moe_topk_before_ep_all_gather", "shard_embed_moe_on_fsdp",
                       "moe_mlp_tp_size", "log_required_ragged_buffer_factor"},
       .behaviour = {.sparse_kernel_specs = SparseKernelSpecs::kExpWithoutFsdp,
                     .lb_loss_density_per_top_k = true,
                     .kernels_constrained_in_fsdp_all_gather = true,
                     .router_embed_axis = "embed_router",
                     .dispatch_constrained_in_helper = true,
                     .pr3981_proposal_applies = false,
                     .wo_padded_like_wi = true,
                     .batch_split_kernels_expert_first = true,
                     .ragged_buffer_truncates_group_sizes = true,
                     .deepseek_routing_models = {"deepseek3", "deepseek4", "kimi-k2"},
                     .bias_counts_summed_over_batch_axes = true,
                     .sparse_lb_loss_from_pre_bias_logits = true,
                     .token_chunks_sum_bias_counts = true,
                     .deepseek_swiglu_clamped = true,
                     .expert_scale_on_topk_weights = true,
                     .mlp_bias_masks_padding_rows = true}},
  };
  return kTable;
}

const RevisionInfo& MaxTextRevision::info() const {
  for (const RevisionInfo& r : Revisions())
    if (r.id == id) return r;
  return Revisions().front();
}

std::string MaxTextRevision::Title() const {
  return fmt::format("MaxText {} ({})", name, info().label);
}

std::string MaxTextRevision::MoePySource() const {
  // Every `moe.py:NNN` of a page goes through this revision's line table (config/moe_lines.h).
  return fmt::format("`{}` at {}", info().moe_py, Title());
}

namespace {

MaxTextRevision FromInfo(const RevisionInfo& r, std::string why) {
  return {r.id, std::string(r.name), std::move(why), r.behaviour};
}

}  // namespace

MaxTextRevision DetectRevision(const std::set<std::string, std::less<>>& base_keys,
                               std::string_view base_name) {
  const RevisionInfo* best = nullptr;
  double best_share = -1;
  int exact = 0;
  for (const RevisionInfo& r : Revisions()) {
    size_t present = 0;
    for (const std::string_view key : r.fingerprint) present += base_keys.contains(key) ? 1 : 0;
    const double share = static_cast<double>(present) / static_cast<double>(r.fingerprint.size());
    if (present == r.fingerprint.size()) ++exact;
    // Newest first on a tie: the table is oldest first.
    if (share >= best_share) {
      best = &r;
      best_share = share;
    }
  }
  if (exact == 1 && best_share == 1.0)
    return FromInfo(*best,
                    fmt::format("{} defines {}", base_name, fmt::join(best->fingerprint, ", ")));
  return FromInfo(*best,
                  fmt::format("{} matches {} revision's fingerprint; nearest: {} ({:.0f}% of "
                              "{}); --maxtext-revision picks another",
                              base_name, exact == 0 ? "no" : "more than one", best->name,
                              100 * best_share, fmt::join(best->fingerprint, ", ")));
}

MaxTextRevision NamedRevision(std::string_view name) {
  std::vector<std::string> known;
  for (const RevisionInfo& r : Revisions()) {
    if (name == r.name) return FromInfo(r, "--maxtext-revision " + std::string(name));
    // A plain loop, not std::views::split: clang 14 (make test-asan) cannot compile libstdc++
    // 12's split view.
    const std::string_view aliases = r.aliases;
    for (size_t start = 0; start <= aliases.size();) {
      const size_t end = std::min(aliases.find(',', start), aliases.size());
      if (name == aliases.substr(start, end - start))
        return FromInfo(r, "--maxtext-revision " + std::string(name));
      start = end + 1;
    }
    known.push_back(fmt::format("{} ({})", r.name, r.aliases));
  }
  Fail("unknown MaxText revision '{}' (--maxtext-revision): expected one of {}", name,
       fmt::join(known, ", "));
}

}  // namespace shardtrace
