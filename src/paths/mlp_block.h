// linears.MlpBlock: MaxText's dense feed-forward block, used for dense decoder layers
// (intermediate mlp_dim) and for the shared experts of RoutedAndSharedMoE (intermediate
// shared_experts x moe_mlp_dim). Kernels wi_0..wi_{n-1} [M,F] with kernel axes
// ('embed','mlp') and wo [F,M] with ('mlp','embed'); one activation constraint on the
// gated product: ('activation_batch','activation_length','activation_mlp'), which
// MaxText's debug dump calls linears/x.
#pragma once

#include <string>

#include "paths/moe_params.h"
#include "paths/tracer.h"

namespace shardtrace {

struct MoeSettings;

// Records the kernels as weights and runs the block on `inputs` [B,S,M]; returns [B,S,M].
// `param_prefix` names the kernels' golden-format arrays: "mlp_" (a dense layer: mlp_wi_0,
// mlp_wo) or "shared_" (shared experts: shared_wi_0, shared_wo).
Value MlpBlock(Tracer& t, const MoeSettings& settings, const Value& inputs, const MlpParams& params,
               const std::string& scope, const std::string& param_prefix);

}  // namespace shardtrace
