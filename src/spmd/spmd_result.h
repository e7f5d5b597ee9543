// What the SPMD model (spmd/spmd_analysis.h) says about one Trace, as a value beside it: the
// Trace keeps what the code wrote (TensorRecord::partition_spec, the shard_map blocks) and this
// result holds what XLA's SPMD partitioner would add. Per tensor id: where its per-device
// shape comes from, the spec propagation gives a tensor no statement placed, and its
// per-device shape and bytes; per op id the collectives XLA inserts there; and the per-device
// memory of the forward pass. Readers (emitters, totals, checks, pages) take it beside the
// Trace and say which spec is written and which propagated; nothing writes it back.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "numeric/array.h"
#include "shard/partition_spec.h"
#include "spmd/xla_spmd.h"

namespace shardtrace {

struct TensorRecord;

// One tensor as the SPMD model places it.
struct TensorSpmd {
  Placement placement = Placement::kUnresolved;
  // The spec propagation gave it (kPropagated, kArgument; replicated for kUnresolved);
  // nullopt when a statement wrote one (TensorRecord::partition_spec) or inside shard_map.
  std::optional<PartitionSpec> propagated_spec;
  Shape local_shape;  // per device, under the written or propagated spec
  int64_t bytes_per_device = 0;
};

struct SpmdResult {
  std::vector<TensorSpmd> tensors;                      // by TensorRecord::id
  std::vector<std::vector<ImpliedCollective>> implied;  // by OpRecord::id
  MemoryEstimate memory;

  const TensorSpmd& tensor(int id) const { return tensors[static_cast<size_t>(id)]; }
  const std::vector<ImpliedCollective>& implied_at(int op) const {
    return implied[static_cast<size_t>(op)];
  }
  // The sharding `t` has: its written spec, else the propagated one; nullptr for neither.
  const PartitionSpec* SpecOf(const TensorRecord& t) const;
};

}  // namespace shardtrace
