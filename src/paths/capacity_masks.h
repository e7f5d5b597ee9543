// Capacity masks of dense_matmul's token-dropping branch: generate_masks (training, [B,S,E,C])
// and generate_masks_subgroup (inference, [B,N,S/N,E,C] with N context groups), with the
// capacity formula C = int(max(ceil(S*K/E) * capacity_factor, capacity_factor)) per batch
// row (S per context group), priority in flattened (token, k) order, and dispatch = combine
// != 0. Numeric runs add the capacity and the choices dropped per expert as facts.
#pragma once

#include "paths/moe_context.h"

namespace shardtrace {

struct Masks {
  Value dispatch, combine;
  int64_t capacity = 0;
};

// The capacity formula of generate_masks / generate_masks_subgroup.
int64_t Capacity(int64_t tokens_per_batch, int64_t num_experts, double capacity_factor);

// `groups` = 0: generate_masks over [B,S]; > 0: generate_masks_subgroup over `groups`
// context partitions. `probs` is the [B,S,E] weight array the masks carry.
Masks GenerateMasks(const MoeContext& ctx, const Value& top_k_indices, const Value& probs,
                    int64_t groups);

}  // namespace shardtrace
