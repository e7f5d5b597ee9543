// The token-sorting helpers of sparse_matmul, per device inside shard_map: permute (route,
// repeat each token K times, stable-sort the rows by expert, group sizes), unpermute
// (inverse sort and K-weighted sum), local_permute (re-sort received rows by local expert,
// plain and is_offset forms), get_all_to_all_params (batch-sharded and replicated forms),
// get_ragged_buffer_size, transform_bias, and gmm (Megablox / tokamax / ragged_dot: the
// same math, recorded with the kernel, tiling and row padding the config selects).
#pragma once

#include <optional>

#include "paths/moe_context.h"

namespace shardtrace {

struct PermuteOutput {
  Value sorted_inputs;            // [R, M] rows grouped by expert
  Value sorted_selected_experts;  // [R] the sort permutation
  Value weights;                  // [B, S, K] routing weights
  Value group_size;               // [E] rows per expert
  Value sorted_experts;           // [R] expert id of each sorted row
  Value top_k_indices;            // [B, S, K]
  std::optional<Value> lb_loss;
  std::optional<Value> bias_updates;
  // The release's chunked ring (num_moe_token_chunks > 1): the chunk's expert counts, psummed
  // but not yet turned into an update (the chunks' counts are summed first), over `bias_rows`
  // rows; bias_updates is then unset.
  std::optional<Value> bias_counts;
  int64_t bias_rows = 0;
};

// The embedding-independent half of permute: top-k, losses, the expert-sorted order of the
// (token, k) rows and the group sizes. sorted_inputs is left empty.
PermuteOutput RouteTokens(const MoeContext& ctx, const Value& gate_logits,
                          const std::optional<Value>& pre_bias_logits,
                          const std::optional<Value>& roll_to_expert_id);
// The embedding half: [B,S,M'] -> rows repeated K times in the routed order, [R, M'].
Value SortRows(const MoeContext& ctx, const Value& inputs, const PermuteOutput& routing);

// What the release's ring computes before its all-gather under moe_topk_before_ep_all_gather:
// the gathered top-k weights and ids [B,S,K] and, with a load-balance loss, the gathered
// per-sequence mean router probabilities [B,E] (permute's precomputed_topk and
// precomputed_density_prob).
struct PrecomputedTopK {
  Value weights, indices;
  std::optional<Value> density_prob;
};

// `roll_to_expert_id`: ring of experts rotates ids by -(E/EP)*shard so local experts come
// first; it is a per-device value (nullopt: no roll). `bias_count_axes`: the mesh axes the
// bias update's expert counts are psummed over (none: each device's own). `precomputed`:
// top-k already taken (the gate logits are then unused).
PermuteOutput Permute(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                      const std::optional<Value>& pre_bias_logits,
                      const std::optional<Value>& roll_to_expert_id,
                      const std::vector<std::string>& bias_count_axes = {},
                      const std::optional<PrecomputedTopK>& precomputed = std::nullopt);

Value Unpermute(const MoeContext& ctx, const Value& intermediate,
                const Value& sorted_selected_experts, const Value& weights, int64_t batch_size,
                int64_t sequence_length);

struct LocalPermuteOutput {
  Value sorted_inputs, sorted_indices, local_group_size, sorted_experts_ids;
};
// local_permute's sort order, local group sizes and local expert ids for `rows` received
// rows; with `inputs`, also sorted_inputs, taken where moe.py takes it (before the ids),
// else sorted_inputs is left empty. A numeric run captures each device's order for the
// pages' trees: "local_permute sorted_indices per device", "local_permute
// sorted_experts_ids per device", "local_group_size per device", "expert_shard_id per
// device".
LocalPermuteOutput LocalSortOrder(const MoeContext& ctx, int64_t rows, const std::string& row_dim,
                                  const Value& global_group_sizes, int64_t local_expert_size,
                                  const Value& shard_index, bool is_offset,
                                  const std::optional<Value>& global_sorted_experts,
                                  const Value* inputs = nullptr);
// global_group_sizes [shards, E]; is_offset: inputs are the replicated globally sorted rows.
LocalPermuteOutput LocalPermute(const MoeContext& ctx, const Value& inputs,
                                const Value& global_group_sizes, int64_t local_expert_size,
                                const Value& shard_index, bool is_offset,
                                const std::optional<Value>& global_sorted_experts);

struct AllToAllParams {
  Value input_offsets, send_sizes, output_offsets, recv_sizes;
};
// Records each device's four parameter arrays of the ragged_all_to_all that produces
// `output` ("x", "intermediate_output") as captures "<output> <param> per device" [D, peers]
// (numeric runs), which the pages draw as a table.
void CaptureAllToAllParams(const MoeContext& ctx, Exchange exchange, const AllToAllParams& p);
AllToAllParams GetAllToAllParams(const MoeContext& ctx, const Value& all_shards_group_sizes,
                                 const Value& shard_id, int64_t num_expert_parallelism,
                                 bool is_batch_sharded);

int64_t RaggedBufferSize(int64_t local_batch, int64_t ep_degree, int64_t global_experts,
                         int64_t top_k, double ragged_buffer_factor);

// gmm(inputs [R,K'], kernel [G,K',N], group_sizes [G]) -> [R,N] in dtype. With
// `rhs_holds_all_experts` (EnterSparseShardMap's experts_replicated: megablox only) the kernel
// holds every expert and the gmm reads groups 0..G-1 of it, as megablox does with group_offset 0.
Value Gmm(const MoeContext& ctx, const Value& inputs, const Value& kernel, const Value& group_sizes,
          const std::string& name, bool wo_tiles, bool rhs_holds_all_experts = false);

// transform_bias: each row's bias, bias[expert_ids] (indices clamped as jnp indexing does).
Value TransformBias(const MoeContext& ctx, const Value& expert_ids, const Value& bias,
                    const std::string& name);

// Ring of experts: rows at or past sum(group_sizes) (tokens routed to other shards'
// experts) set to zero.
Value MaskRowsPastGroups(const MoeContext& ctx, const Value& rows, const Value& group_sizes,
                         const std::string& name);

// Numeric facts about the local expert groups: rows per device and local expert, and the
// load imbalance across devices (max/mean rows).
void AddGroupSizeFacts(const MoeContext& ctx, const Value& group_sizes);

}  // namespace shardtrace
