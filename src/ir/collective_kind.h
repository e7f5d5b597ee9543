// CollectiveKind and CollectiveOrigin: which collective a CollectiveRecord is, and whether
// the code wrote it (a jax.lax call inside shard_map, kWritten) or XLA's SPMD partitioner
// implies it from sharding constraints (kImplied, added by the cost model). Diff and cost
// analyses switch on these instead of comparing op names.
#pragma once

#include <string>

#include "ir/op_kind.h"

namespace shardtrace {

enum class CollectiveKind {
  kAllGather,       // jax.lax.all_gather
  kPsum,            // jax.lax.psum (an all-reduce)
  kPsumScatter,     // jax.lax.psum_scatter (a reduce-scatter)
  kRaggedAllToAll,  // jax.lax.ragged_all_to_all
  // Only XLA inserts these (spmd/spmd_reshard.h):
  kAllToAll,  // a mesh axis moves between dims
  kSlice,     // a mesh axis enters a dim each device holds whole: a local slice, free
  // A dim's mesh axis swapped for another of the same size: each device's new block is
  // another device's old one, sent whole (HLO collective-permute).
  kCollectivePermute,
};
// "all_gather", "psum", "psum_scatter", "ragged_all_to_all": the jax.lax names;
// "all_to_all", "slice", "ppermute".
std::string ToString(CollectiveKind kind);
// XLA's HLO name: "all-gather", "all-reduce" (psum), "reduce-scatter" (psum_scatter),
// "ragged-all-to-all", "all-to-all", "slice", "collective-permute".
std::string HloName(CollectiveKind kind);
// The op kind a written collective is recorded as. REQUIRES a kind code can write.
OpKind ToOpKind(CollectiveKind kind);

enum class CollectiveOrigin {
  kWritten,  // the traced code calls it
  kImplied,  // XLA inserts it to satisfy the shardings
};
std::string ToString(CollectiveOrigin origin);  // "written" | "implied"

}  // namespace shardtrace
