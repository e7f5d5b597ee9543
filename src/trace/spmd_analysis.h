// The pass that adds to a finished Trace what XLA's SPMD partitioner adds to the program:
// a sharding for every tensor outside shard_map (explicit, or propagated as documented in
// the README's "What XLA adds"), the collectives XLA inserts where shardings change or a
// contraction leaves partial sums (OpRecord::implied), and the per-device memory
// (Trace::memory, trace/spmd_memory_estimate.h). It reads shapes, specs and op kinds only, so a
// symbolic full-size trace and a numeric one get the same answer.
//
// Propagation model: explicit shardings are fixed; a forward sweep gives an op's outputs a
// sharding from its operands (elementwise ops keep it, reshapes carry it to the major dim of
// a split or merge, einsums follow trace/spmd_einsum_sharding.h); a backward sweep gives tensors
// no operand places (block inputs, constants) the sharding their first user needs; forward
// wins over backward, so a reshard sits at the statement that asks for it. Sweeps repeat
// until nothing changes. What stays unplaced is counted replicated (kUnresolved).
#pragma once

#include "shard/mesh.h"
#include "trace/trace.h"

namespace shardtrace {

// Fills placement/propagated_spec/local_shape/bytes_per_device of tensors outside shard_map,
// OpRecord::implied and Trace::memory. Idempotent.
void AnalyzeSpmd(const Mesh& mesh, Trace* trace);

}  // namespace shardtrace
