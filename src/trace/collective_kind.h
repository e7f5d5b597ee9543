// CollectiveKind and CollectiveOrigin: which collective a CollectiveRecord is, and whether
// the code wrote it (a jax.lax call inside shard_map, kWritten) or XLA's SPMD partitioner
// implies it from sharding constraints (kImplied, added by the cost model). Diff and cost
// analyses switch on these instead of comparing op names.
#pragma once

#include <string>

#include "trace/op_kind.h"

namespace shardtrace {

enum class CollectiveKind {
  kAllGather,       // jax.lax.all_gather
  kPsum,            // jax.lax.psum (an all-reduce)
  kPsumScatter,     // jax.lax.psum_scatter (a reduce-scatter)
  kRaggedAllToAll,  // jax.lax.ragged_all_to_all
};
// "all_gather", "psum", "psum_scatter", "ragged_all_to_all": the jax.lax names.
std::string ToString(CollectiveKind kind);
// The op kind a written collective is recorded as.
OpKind ToOpKind(CollectiveKind kind);

enum class CollectiveOrigin {
  kWritten,  // the traced code calls it
  kImplied,  // XLA inserts it to satisfy the shardings
};
std::string ToString(CollectiveOrigin origin);  // "written" | "implied"

}  // namespace shardtrace
