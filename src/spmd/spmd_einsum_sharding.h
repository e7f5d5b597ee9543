// How GSPMD partitions a two-operand einsum, simplified: which sharding each operand is
// brought to, the output's sharding, and the mesh axes over which the output holds partial
// sums. The rules (docs/xla-model.md):
// - a dim in both operands and the output (batch) keeps a sharding they agree on; an
//   unsharded side is sliced for free; on a conflict the smaller operand follows the larger;
// - a contracted dim sharded the same way in both operands gives partial sums over those
//   axes; sharded in one only, the cheaper of gathering that operand or slicing the other
//   (then partial sums, reduced at ~2x the output) wins — the FSDP weight all-gather when
//   the activation already uses the axis elsewhere;
// - a mesh axis may shard one output dim only: on a clash the axis stays on the letter a
//   sharding constraint right after the einsum puts it on (GSPMD propagates that
//   constraint back into the einsum's output), else on the larger operand's letter.
// - when that constrained output and the operands share no partitioning (GSPMD's base and
//   grouping cases all fail) and the output is split over all devices on one class of dims,
//   the einsum is computed in the output's sharding (GSPMD's fallback).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "numeric/array.h"
#include "numeric/einsum.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"

namespace shardtrace {

struct EinsumPlan {
  std::vector<PartitionSpec> operands;  // the sharding each operand is computed in
  PartitionSpec output;
  std::vector<std::string> partial;  // mesh axes of partial sums in the output
};

// REQUIRES two operands whose ranks match the equation; specs of matching rank.
// `constrained_output` is the spec of a sharding constraint every reader of the output
// applies, if there is one.
EinsumPlan PlanEinsum(const ParsedEinsum& equation, const std::vector<Shape>& shapes,
                      const std::vector<DType>& dtypes, const std::vector<PartitionSpec>& specs,
                      DType out_dtype, const Mesh& mesh,
                      const std::optional<PartitionSpec>& constrained_output = std::nullopt);

}  // namespace shardtrace
