// The MoE constraints pyconfig enforces that need no mesh: top-k within the expert
// count, device-limited routing groups that divide the experts, a positive moe_mlp_dim
// for an MoE model, base_mlp_dim == base_moe_mlp_dim for a fully-MoE model (except
// gemma4), routed-bias updates only for deepseek, dropless-only dense GPT-OSS. Run after
// the derived values are in place; each failure is one Error naming the keys.
#pragma once

#include "config/config_value.h"

namespace shardtrace::config_internal {

void CheckMoeConstraints(const ValueMap& values);

// The float keys shardtrace turns into sizes or float32 factors (per_device_batch_size,
// capacity_factor, ragged_buffer_factor, ...) are finite and within what it can honour.
void CheckFloatKeys(const ValueMap& values);

}  // namespace shardtrace::config_internal
