// The refactored sparse_matmul of MaxText PR 3981, in its end state: route() computes the
// embedding-independent routing (RouteOutput) and the expert-parallel communication state
// (RouteMetadata) once; dispatch() moves a block of the embedding to the experts;
// gmm_up(), maybe_tp_reduce(), gmm_down() and unpermute() finish the block. With
// shardtrace_pr3981_emb_chunks = n > 1 the input and wi_0/wi_1 are split along the embedding into n
// chunks: each chunk's wi slice is all-gathered over the fsdp axes inside shard_map (so the
// all-gather of chunk c+1 can overlap the matmul of chunk c), the chunk is dispatched on its
// own, and the gmm_up partial products are accumulated before the activation. Selected by
// shardtrace_pr3981_emb_chunks >= 1 (1 = the refactored pipeline, unchunked); 0 keeps the seed
// wrapper.
#pragma once

#include "paths/moe_context.h"

namespace shardtrace {

PathOutput SparsePipeline(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                          const std::optional<Value>& pre_bias_logits,
                          const ExpertKernels& kernels);

}  // namespace shardtrace
