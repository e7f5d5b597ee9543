// RoutedMoE.sparse_matmul: get_routed_moe_shardings, the pre-shard_map constraints
// (including moe_fsdp_use_two_stage_all_gather with its optimization barriers), and the
// shard_map `wrapper` run on every simulated device: permute, expert parallelism over
// ragged_all_to_all (batch sharded by EP, or replicated for global batch 1), ring of
// experts, local_permute, gmm up/down with the tensor-parallel psum/psum_scatter, the
// reverse all-to-all and unpermute.
#pragma once

#include "paths/moe_context.h"

namespace shardtrace {

PathOutput SparseMatmul(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                        const std::optional<Value>& pre_bias_logits, const ExpertKernels& kernels);

}  // namespace shardtrace
