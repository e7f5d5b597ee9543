// Resharding as GSPMD does it: the collectives that take one array from one sharding to
// another on a mesh. Pure arithmetic on specs and shapes, no Trace: the propagation pass
// (spmd/spmd_analysis.h) calls it at every transition it finds.
//
// A mesh axis that leaves a dim is an all-gather, one that moves between dims an
// all-to-all, one that enters a dim whole on every device a local slice (free), and mesh
// axes holding partial sums are reduced: a reduce-scatter into the dim the target shards
// on that axis where it lands minor to the dim's current axes, else an all-reduce (the block
// then moves like any other). Steps run in the order that moves the fewest bytes:
// reductions, slices, all-to-alls, then all-gathers.
#pragma once

#include <string>
#include <vector>

#include "numeric/array.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"
#include "spmd/xla_spmd.h"

namespace shardtrace {

// One array's sharding during the analysis: a spec plus the mesh axes over which each
// device holds partial sums (a contraction over a dim sharded on them, not yet reduced).
struct ShardState {
  PartitionSpec spec;
  std::vector<std::string> partial;
};

// Per-device shape of `shape` under `spec` (padded: ceil division), ignoring size-1 axes.
Shape LocalShapeOf(const Shape& shape, const PartitionSpec& spec, const Mesh& mesh);

// The collectives from `from` to `to` (same rank as `shape`); empty when nothing changes.
// `tensor` and `reason` are left for the caller. With `regroup`, a dim held on one axis that
// the target holds on a smaller one (a divisor) is re-tiled by a collective-permute and an
// all-gather over the old blocks of one new block, as the compiled steps reshard a gradient
// into its parameter's sharding; without it the dim is gathered whole and sliced, as GSPMD's
// dot handler gathers an einsum operand (the forward cases' gate kernel).
std::vector<ImpliedCollective> PlanReshard(const Shape& shape, DType dtype, const ShardState& from,
                                           const PartitionSpec& to, const Mesh& mesh,
                                           bool regroup = false);

// `spec` padded with None (or cut) to `rank` dims: P() on a rank-2 array is P(None, None).
PartitionSpec WithRank(const PartitionSpec& spec, size_t rank);

}  // namespace shardtrace
