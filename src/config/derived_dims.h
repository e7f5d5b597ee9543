// The values pyconfig computes rather than reads (maxtext-facts.md section 1.5):
// global_parameter_scale = 2^L splits into (q, r) = divmod(L, 3), giving
// mlp/head scale q + (r > 0), emb scale q + (r > 1) and layer scale q; then
// emb_dim = 2^emb_scale * base_emb_dim, mlp_dim and moe_mlp_dim = 2^mlp_scale * base_*,
// heads and num_decoder_layers likewise; using_pipeline_parallelism from the pipeline
// knobs; and the qwen3_moe rule that copies base_moe_mlp_dim into base_mlp_dim for a
// fully-MoE model. num_experts, num_experts_per_tok and moe_expert_input_dim are never
// scaled (moe_expert_input_dim <= 0 is resolved to emb_dim by the tracer).
#pragma once

#include <cstdint>

#include "config/config_value.h"

namespace shardtrace::config_internal {

struct ParameterScales {
  int emb = 0;
  int mlp = 0;  // also the head scale
  int layer = 0;
};

// Throws unless `global_parameter_scale` is a power of two >= 1.
ParameterScales ScalesFor(int64_t global_parameter_scale);

// True when every decoder layer is an MoE layer (no dense prefix, no interleave, no
// inhomogeneous cycle): the case where MaxText requires base_mlp_dim == base_moe_mlp_dim.
bool IsFullyMoe(const LayeredValues& values);

// Writes the derived keys into `values` (as ints, using_pipeline_parallelism as bool).
void ApplyDerivedValues(LayeredValues& values);

}  // namespace shardtrace::config_internal
