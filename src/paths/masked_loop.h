// The masked-loop reference MoE of the PyTorch-to-JAX sparse-MoE port
// (../shared/seeds/sparse-moe-jax-port.md): no sorting and no dynamic shapes; every expert
// runs its MLP on every token, and each expert's output is weighted by the token's routing
// weight and masked to the tokens whose top-k chose it. With plain top-k routing it computes
// exactly what dense_matmul's dropless branch computes, one expert at a time.
#pragma once

#include "paths/moe_context.h"

namespace shardtrace {

PathOutput MaskedLoop(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                      const std::optional<Value>& pre_bias_logits, const ExpertKernels& kernels);

}  // namespace shardtrace
