// The expert-parallel routing block every sparse path shares, the seed's monolithic
// `wrapper` (sparse_matmul.cc) and the refactored route/dispatch/gmm pipeline
// (sparse_pipeline.cc): which expert shard this device is, the ring's expert roll, the
// per-shard group sizes and the forward ragged_all_to_all plan (all-gathered group sizes,
// offsets, receive buffer), and the return of the expert outputs to the rows' home shards.
// Each path calls these pieces in moe.py's order for that path; the ops they record are the
// same on both.
#pragma once

#include <cstdint>
#include <optional>

#include "paths/moe_context.h"
#include "paths/permute.h"

namespace shardtrace {

struct EpRouting {
  Value expert_shard_id;
  std::optional<Value> reshaped_group_sizes;    // [EP] this shard's rows per expert shard
  std::optional<Value> all_shards_group_sizes;  // [EP(src), EP(dst)], batch sharded by EP
  std::optional<AllToAllParams> forward;        // dispatch's ragged_all_to_all parameters
  int64_t buffer_rows = 0;                      // get_ragged_buffer_size (reported bound)
  // Rows each device's receive buffer holds: symbolic, the bound; numeric, the most rows any
  // device receives, capped by the bound (rows past it are dropped either way), so the
  // worst case is reported without being allocated and zero-filled on every device.
  int64_t allocated_rows = 0;
  std::optional<Value> local_sorted_indices;  // local_permute order of the received rows
};

// jax.lax.axis_index over the expert axes (a constant 0 without expert parallelism).
Value ExpertShardId(const MoeContext& ctx);

// Ring of experts: num_experts_per_shard * expert_shard_id, the id routing rolls by.
Value RollToExpertId(const MoeContext& ctx, const Value& expert_shard_id);

// Ring of experts, numeric: captures what each device's permute sorted for the page's tree
// (MoeContext::CapturePerDevice, [D, ...]): "ring sorted_selected_experts per device" and
// "ring sorted_experts per device" (the rolled ids the rows are sorted by), "ring
// roll_to_expert_id per device", "ring group_sizes per device" (the local experts' sizes,
// [D, L]) and "ring token sources per device" [D, T, 2]: for each all-gathered token
// T = b*S+s, the device it was gathered from and that device's own token index (the
// all-gather over the expert axes concatenates the group's batches in axis-index order).
void CaptureRingRows(const MoeContext& ctx, const PermuteOutput& routing, const Value& roll,
                     const Value& local_group_sizes, int64_t local_batch, int64_t sequence_length);

// Numeric runs: each device's per-row max |value| of `rows` [R, ...] (as [devices, R]), so the
// invariants can see which rows the ring's mask zeroed without keeping the rows themselves.
void CaptureRowMagnitudes(const MoeContext& ctx, const Value& rows, Capture id);

// Expert parallelism > 1: group_sizes summed per expert shard; when the batch is sharded by
// expert, the all-gathered [EP, EP] sizes, the forward all-to-all offsets and the receive
// buffer of `rows` routed rows (recorded as the fact "ragged buffer rows").
void PlanForwardAllToAll(const MoeContext& ctx, const Value& group_sizes, int64_t rows,
                         EpRouting& ep);

// Expert parallelism > 1: the expert outputs back to the shards that routed their rows,
// [batch*seq*top_k, M/TP] in routing order (local rows unsorted, then the reverse
// ragged_all_to_all; batch replicated: the all-to-all with the reshaped sizes). A numeric
// run captures where each returned row came from as "intermediate_output row sources per
// device" [D, R] (sender * sender's operand rows + sender's row, -1 for a row nobody sent).
Value ReturnFromExperts(const MoeContext& ctx, const Value& expert_output, const EpRouting& ep,
                        int64_t original_rows);

}  // namespace shardtrace
