// OpKind: what a recorded op is, as an enum, so that emitters, tests and later analyses
// (diff, the SPMD cost model) switch on kinds instead of comparing strings, and a typo is
// a compile error rather than a silent miss. ToString gives the name jax/moe.py writes the
// op as ("einsum", "top_k", "all_gather"); the table and JSON outputs print that name.
// Collective ops also carry a CollectiveRecord with their CollectiveKind (collective_kind.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shardtrace {

enum class OpKind {
  // Where tensors come from.
  kInput,     // an activation fed to the block
  kParam,     // a kernel or bias (nnx.Param)
  kConstant,  // a constant the code creates (jnp.arange, a literal)
  kZeros,     // jnp.zeros
  kEmpty,     // jax.lax.empty: uninitialized in JAX (the simulator fills zeros)
  kOnesLike,
  kRandomRandint,  // jax.random.randint (use_random_routing)
  // Layout.
  kAstype,
  kReshape,
  kTranspose,
  kBroadcastTo,
  kSlice,
  kConcatenate,  // jnp.concatenate
  kDynamicSliceInDim,
  kIndex,  // x[e]
  kTake,
  kTakeAlongAxis,
  kScatterSet,  // x.at[...].set(...)
  kRepeat,
  kRoll,  // (experts - roll) % num_experts, the ring-of-experts shift
  kTransformArray,
  // Math.
  kEinsum,
  kGmm,  // grouped matmul (megablox / tokamax / ragged_dot)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kLessEqual,
  kLess,
  kEqual,
  kGreater,
  kFloorDivide,
  kMod,
  kWhere,
  kClip,
  kSign,
  kSum,
  kMean,
  kCumsum,
  kOneHot,
  kTopK,
  kArgsort,
  kBincount,
  kSoftmax,
  kActivation,    // an elementwise activation; OpRecord::function names it ("silu")
  kMaskedWeight,  // the masked-loop reference's per-expert gate weight
  // Markers that keep values.
  kCheckpointName,
  kOptimizationBarrier,
  kShardingConstraint,  // _maybe_shard_with_logical / _maybe_shard_with_pspec
  kShardMapIn,
  kShardMapOut,
  // Inside shard_map.
  kAxisIndex,
  kAllGather,
  kPsum,
  kPsumScatter,
  kRaggedAllToAll,
};

// The op's name as jax/moe.py writes it: "einsum", "all_gather", ... ("activation" for
// kActivation; OpRecord::Name() gives the function instead).
std::string ToString(OpKind kind);

// The elementwise binary ops traced::Binary accepts.
bool IsBinary(OpKind kind);

// An op a fusing compiler computes inside its readers: the binary ops, activations, casts,
// clips, wheres and signs (one output element from the same element of each operand).
bool IsElementwise(OpKind kind);

}  // namespace shardtrace
