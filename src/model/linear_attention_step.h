// One linear-attention layer (Qwen3-Next's gated delta net, MaxText 0.2.5
// models/qwen3.py Qwen3NextGatedDeltaNet) in a whole-model training step: what the forward
// keeps for the backward, what its rematerialized forward writes again for its backward, the
// backward's temporaries at their peak, and its weights' collectives, per device, from
// shapes and the config's logical axis rules alone. The layer projects the tokens (qkvz, ba),
// runs a causal depthwise conv over q, k and v, and the chunked gated delta rule: a
// triangular solve per chunk of gdn_chunk_size tokens in float32, then a scan over the
// chunks carrying a float32 [batch, value heads, key dim, value dim] state, whose backward
// reads that state at every chunk. The layer names none of its values for jax.checkpoint, so
// a wrapped policy keeps none of them.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "config/remat_policy.h"
#include "model/attention_step.h"
#include "shard/mesh.h"

namespace shardtrace::model_internal {

// `tpu`: a chunk's [chunk, chunk] float32 matrices take whole 128-lane rows (chunk 64
// holds 128), as TPU lays them out.
BlockFigures LinearAttentionLayer(const Config& config, const Mesh& mesh, const RematPolicy& policy,
                                  const LayerWeights& weights, int64_t batch, bool tpu);

}  // namespace shardtrace::model_internal
