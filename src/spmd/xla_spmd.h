// The value types of what XLA's SPMD partitioner adds to a traced program: where a tensor's
// sharding comes from (a statement moe.py wrote, a shard_map block, or sharding propagation),
// the collectives XLA inserts between the shardings the code fixes (implied: shown as `⇄ xla`,
// never confused with the collectives moe.py writes), and the per-device memory of the
// program. The SPMD analysis (spmd/spmd_analysis.h) returns them in a SpmdResult beside the
// Trace (spmd/spmd_result.h); emitters only read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/collective_kind.h"
#include "numeric/array.h"
#include "shard/partition_spec.h"

namespace shardtrace {

// Where a tensor's per-device shape comes from.
enum class Placement {
  kExplicit,       // kernel_axes, a sharding constraint or a shard_map out_spec fixed it
  kShardMapBlock,  // inside shard_map: the record is already one device's block
  kPropagated,     // no statement: shardtrace's model of XLA's sharding propagation
  kArgument,       // the block's input as the decoder layer hands it over (not moe.py's own)
  kUnresolved,     // propagation reached no sharding: counted replicated (an upper bound)
};
std::string ToString(
    Placement placement);  // "explicit", "shard_map", "propagated", "argument", ...

// A collective XLA inserts (the code does not write it: CollectiveOrigin::kImplied).
// Kinds: kAllGather (a mesh axis leaves a dim), kPsumScatter (a reduce-scatter of partial
// sums into the dim the target shards on the axis), kPsum (an all-reduce of partial sums),
// kAllToAll (an axis moves between dims), kSlice (an axis enters a dim held whole: free).
struct ImpliedCollective {
  CollectiveKind kind = CollectiveKind::kAllGather;
  int tensor = -1;                // the tensor whose data moves
  std::vector<std::string> axes;  // mesh axes it runs over
  int64_t participants = 1;       // devices per group
  int64_t groups = 1;             // independent groups on the mesh
  // Bytes each device sends (= receives), counted as XLA's ring algorithms move them:
  // all-gather (n-1) input blocks, reduce-scatter and all-to-all (n-1)/n of the input,
  // all-reduce 2(n-1)/n; a local slice moves nothing.
  int64_t bytes_per_device = 0;
  DType dtype = DType::kFloat32;  // the data moved, as TPU moves it
  // The same collective as XLA:CPU compiles it on fake devices: its float normalization
  // widens 16-bit floats to float32 before a collective (a CPU artifact, twice the bytes).
  int64_t xla_cpu_bytes_per_device = 0;
  Shape local_before, local_after;  // the tensor's per-device shape around the collective
  PartitionSpec from, to;           // its sharding before and after (partial sums not shown)
  std::string reason;  // "sharding constraint", "einsum operand", "partial sums over 'E'", ...
  // All-reduces XLA's combiner sends as one op share this number (spmd/all_reduce_combiner.h);
  // -1 for a collective sent on its own.
  int combined_group = -1;
  // The last op that reads the moved copy when later ops need the same tensor moved the
  // same way (XLA's CSE keeps this one collective for all of them); -1: only this op.
  int last_reader_op = -1;
};

// XLA:CPU runs collectives on 16-bit floats in float32 (float normalization); TPU moves
// them as they are. The dtype a collective of `dtype` data runs in on XLA:CPU.
DType XlaCpuCollectiveDType(DType dtype);

// One buffer in the memory breakdown.
struct MemoryHolder {
  int tensor = -1;
  int64_t bytes = 0;
};

// Per-device memory of the traced forward pass, XLA-style: arguments (parameters at their
// kernel_axes sharding and the block's inputs) plus temporaries (every other buffer, live
// from the op that writes it to the last op that reads it or any alias of it).
struct MemoryEstimate {
  std::vector<std::pair<DType, int64_t>> parameter_bytes_by_dtype;  // kernel_axes records
  int64_t parameter_bytes = 0;
  int64_t input_bytes = 0;  // the block's input activations
  int64_t peak_temporary_bytes = 0;
  int peak_op = -1;                   // the op during which the peak is reached
  std::vector<MemoryHolder> at_peak;  // the largest buffers live at the peak, largest first
  std::vector<MemoryHolder> largest;  // the largest temporaries of the whole program
  int64_t gathered_weight_bytes = 0;  // weight copies (casts, gathers) live at the peak
  int64_t unresolved_bytes = 0;       // of the peak, from tensors counted replicated
  // fused[t]: XLA computes t inside a loop fusion and never writes it (EstimateMemory's rule).
  std::vector<bool> fused;
  int64_t peak_bytes() const { return parameter_bytes + input_bytes + peak_temporary_bytes; }
};

}  // namespace shardtrace
