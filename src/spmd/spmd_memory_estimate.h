// Per-device memory of a traced forward pass, from the tensors' per-device bytes (the
// SpmdResult AnalyzeSpmd is building) and program order: arguments (kernel_axes parameters by
// dtype, the block's inputs) plus the peak of live temporaries. A buffer is live from the op that
// writes it to the last op that reads it or any alias of it; ops that write no new buffer in XLA
// (reshape, checkpoint_name, optimization_barrier, a sharding constraint or shard_map
// boundary that moves nothing, ragged_all_to_all into its `output` operand) alias their
// operand. Operands an einsum gathers (SpmdResult::implied) are live during that op.
// `fused[t]` marks tensors XLA computes inside a fusion and never writes to memory (an
// elementwise result whose only reader is another elementwise op of the same shape).
#pragma once

#include <vector>

#include "ir/trace.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// Reads `spmd`'s tensors and implied collectives (its memory is what this computes).
MemoryEstimate EstimateMemory(const Trace& trace, const SpmdResult& spmd,
                              const std::vector<bool>& fused = {});

}  // namespace shardtrace
