#include "ir/op_kind.h"

namespace shardtrace {

std::string ToString(OpKind kind) {
  switch (kind) {
    case OpKind::kInput:
      return "input";
    case OpKind::kParam:
      return "param";
    case OpKind::kConstant:
      return "constant";
    case OpKind::kZeros:
      return "zeros";
    case OpKind::kEmpty:
      return "empty";
    case OpKind::kOnesLike:
      return "ones_like";
    case OpKind::kRandomRandint:
      return "random_randint";
    case OpKind::kAstype:
      return "astype";
    case OpKind::kReshape:
      return "reshape";
    case OpKind::kTranspose:
      return "transpose";
    case OpKind::kBroadcastTo:
      return "broadcast_to";
    case OpKind::kSlice:
      return "slice";
    case OpKind::kConcatenate:
      return "concatenate";
    case OpKind::kDynamicSliceInDim:
      return "dynamic_slice_in_dim";
    case OpKind::kIndex:
      return "index";
    case OpKind::kTake:
      return "take";
    case OpKind::kTakeAlongAxis:
      return "take_along_axis";
    case OpKind::kScatterSet:
      return "scatter_set";
    case OpKind::kRepeat:
      return "repeat";
    case OpKind::kRoll:
      return "roll";
    case OpKind::kTransformArray:
      return "transform_array";
    case OpKind::kEinsum:
      return "einsum";
    case OpKind::kGmm:
      return "gmm";
    case OpKind::kAdd:
      return "add";
    case OpKind::kSub:
      return "sub";
    case OpKind::kMul:
      return "mul";
    case OpKind::kDiv:
      return "div";
    case OpKind::kLessEqual:
      return "less_equal";
    case OpKind::kLess:
      return "less";
    case OpKind::kEqual:
      return "equal";
    case OpKind::kGreater:
      return "greater";
    case OpKind::kFloorDivide:
      return "floor_divide";
    case OpKind::kMod:
      return "mod";
    case OpKind::kWhere:
      return "where";
    case OpKind::kClip:
      return "clip";
    case OpKind::kSign:
      return "sign";
    case OpKind::kSum:
      return "sum";
    case OpKind::kMean:
      return "mean";
    case OpKind::kCumsum:
      return "cumsum";
    case OpKind::kOneHot:
      return "one_hot";
    case OpKind::kTopK:
      return "top_k";
    case OpKind::kArgsort:
      return "argsort";
    case OpKind::kBincount:
      return "bincount";
    case OpKind::kSoftmax:
      return "softmax";
    case OpKind::kActivation:
      return "activation";
    case OpKind::kMaskedWeight:
      return "masked_weight";
    case OpKind::kCheckpointName:
      return "checkpoint_name";
    case OpKind::kOptimizationBarrier:
      return "optimization_barrier";
    case OpKind::kShardingConstraint:
      return "sharding_constraint";
    case OpKind::kShardMapIn:
      return "shard_map_in";
    case OpKind::kShardMapOut:
      return "shard_map_out";
    case OpKind::kAxisIndex:
      return "axis_index";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kPsum:
      return "psum";
    case OpKind::kPsumScatter:
      return "psum_scatter";
    case OpKind::kRaggedAllToAll:
      return "ragged_all_to_all";
  }
  return "?";
}

bool IsBinary(OpKind kind) {
  switch (kind) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kLessEqual:
    case OpKind::kLess:
    case OpKind::kEqual:
    case OpKind::kGreater:
    case OpKind::kFloorDivide:
    case OpKind::kMod:
      return true;
    default:
      return false;
  }
}

bool IsElementwise(OpKind kind) {
  return IsBinary(kind) || kind == OpKind::kActivation || kind == OpKind::kAstype ||
         kind == OpKind::kClip || kind == OpKind::kWhere || kind == OpKind::kSign;
}

}  // namespace shardtrace
