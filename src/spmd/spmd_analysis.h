// The pass that computes, for a finished Trace, what XLA's SPMD partitioner adds to the
// program, as a SpmdResult beside the Trace (which it never changes): a sharding for every
// tensor outside shard_map (explicit, or propagated as documented in
// docs/xla-model.md), the collectives XLA inserts where shardings change or a contraction leaves
// partial sums, and the per-device memory (spmd/spmd_memory_estimate.h). It reads shapes, specs and
// op kinds only, so a symbolic full-size trace and a numeric one get the same answer.
//
// Propagation model: explicit shardings are fixed; a forward sweep gives an op's outputs a
// sharding from its operands (elementwise ops keep it, reshapes carry it to the major dim of
// a split or merge, einsums follow spmd/spmd_einsum_sharding.h); a backward sweep gives tensors
// no operand places (block inputs, constants) the sharding their first user needs; forward
// wins over backward, so a reshard sits at the statement that asks for it. Sweeps repeat
// until nothing changes. What stays unplaced is counted replicated (kUnresolved).
//
// The block's input is not moe.py's to place: MaxText's decoder layers constrain it to
// (activation_batch, activation_norm_length, activation_embed) after the norm and hand it
// over so (the oracle jits the block with that input sharding too). Given that spec, the
// input arrives with it (Placement::kArgument) and whatever moe.py needs differently is an
// implied reshard; without it, the input is placed backward like any unconstrained tensor.
#pragma once

#include <optional>

#include "ir/trace.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// The placement, propagated spec and per-device shape of every tensor, the implied
// collectives of every op and the memory estimate of `trace`. `input_arrival` is
// Trace::input's sharding as handed over; an entry whose devices do not divide its dim is
// dropped, as MaxText's adjust_pspec_for_indivisible_shapes does.
SpmdResult AnalyzeSpmd(const Mesh& mesh, const Trace& trace,
                       const std::optional<PartitionSpec>& input_arrival = std::nullopt);

}  // namespace shardtrace
