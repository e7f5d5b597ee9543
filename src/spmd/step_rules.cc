#include "spmd/step_rules.h"

#include "shard/sharding.h"
#include "spmd/spmd_reshard.h"

namespace shardtrace {

// Ops whose output is no value the loss can be differentiated through (comparisons, index
// maps, constants): their outputs carry no cotangent.
bool NonDifferentiable(OpKind k) {
  switch (k) {
    case OpKind::kInput:
    case OpKind::kParam:
    case OpKind::kConstant:
    case OpKind::kZeros:
    case OpKind::kEmpty:
    case OpKind::kOnesLike:
    case OpKind::kRandomRandint:
    case OpKind::kLessEqual:
    case OpKind::kLess:
    case OpKind::kEqual:
    case OpKind::kGreater:
    case OpKind::kFloorDivide:
    case OpKind::kMod:
    case OpKind::kSign:
    case OpKind::kOneHot:
    case OpKind::kArgsort:
    case OpKind::kBincount:
    case OpKind::kAxisIndex:
    case OpKind::kRoll:
      return true;
    default:
      return false;
  }
}

// The operand positions a cotangent flows into (a gather's indices and a ragged all-to-all's
// sizes take none; a where's condition is boolean, so no cotangent reaches it anyway).
bool DifferentiableOperand(const OpRecord& op, size_t k) {
  switch (op.kind) {
    case OpKind::kTake:
    case OpKind::kTakeAlongAxis:
    case OpKind::kDynamicSliceInDim:
    case OpKind::kIndex:
    case OpKind::kRaggedAllToAll:
      return k == 0;
    case OpKind::kScatterSet:
      return k != 1;
    default:
      return true;
  }
}

// What XLA:CPU compiles a collective of `kind` to, with the bytes each device sends and the
// result's bytes, from the per-device block before (`in`) and after (`out`) it.
void SetXlaCpu(StepCollective& c, const Shape& in, const Shape& out) {
  const DType cpu = XlaCpuCollectiveDType(c.dtype);
  const int64_t n = c.participants;
  const int64_t in_bytes = TensorBytes(in, cpu), out_bytes = TensorBytes(out, cpu);
  switch (c.kind) {
    case CollectiveKind::kPsumScatter:
      if (c.written) {  // jax.lax.psum_scatter lowers to an HLO reduce-scatter
        c.xla_cpu_op = "reduce-scatter";
        c.xla_cpu_bytes_per_device = in_bytes * (n - 1) / n;
        c.xla_cpu_result_bytes = out_bytes;
      } else {  // GSPMD on XLA:CPU: an all-reduce of the whole block and a local slice
        c.xla_cpu_op = "all-reduce";
        c.xla_cpu_bytes_per_device = 2 * in_bytes * (n - 1) / n;
        c.xla_cpu_result_bytes = in_bytes;
      }
      return;
    case CollectiveKind::kPsum:
      c.xla_cpu_op = "all-reduce";
      c.xla_cpu_bytes_per_device = 2 * in_bytes * (n - 1) / n;
      c.xla_cpu_result_bytes = in_bytes;
      return;
    case CollectiveKind::kAllGather:
      c.xla_cpu_op = "all-gather";
      c.xla_cpu_bytes_per_device = in_bytes * (n - 1);
      c.xla_cpu_result_bytes = out_bytes;
      return;
    default:
      c.xla_cpu_op = HloName(c.kind);
      c.xla_cpu_bytes_per_device =
          c.bytes_per_device * ByteSize(cpu) / std::max<int64_t>(1, ByteSize(c.dtype));
      c.xla_cpu_result_bytes = out_bytes;
      return;
  }
}

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (const int64_t d : s) n *= d;
  return n;
}

// The kinds of the transposed collective.
CollectiveKind Transposed(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather:
      return CollectiveKind::kPsumScatter;
    case CollectiveKind::kPsumScatter:
      return CollectiveKind::kAllGather;
    default:
      return k;
  }
}

}  // namespace shardtrace
