// RoutedMoE.dense_matmul: both branches. capacity_factor > 0 builds dispatch/combine masks
// (generate_masks in training, generate_masks_subgroup with context partitions in
// inference) and runs the EBCM einsums; capacity_factor <= 0 sends every token through
// every expert and takes the routing-weighted sum. Every _maybe_shard_with_logical of
// moe.py is recorded in order, as are the EP weight constraints. The body follows moe.py's
// own steps: routing (get_topk, weights, losses), masks, dispatch, expert compute and
// combine (or the dropless experts and weight sum).
#pragma once

#include "paths/moe_context.h"

namespace shardtrace {

PathOutput DenseMatmul(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                       const std::optional<Value>& pre_bias_logits, const ExpertKernels& kernels);

// reshape_and_update_weights: the K routing weights scattered into a [B,S,E] array.
Value ReshapeAndUpdateWeights(const MoeContext& ctx, const Value& weights, const Value& indices);

}  // namespace shardtrace
