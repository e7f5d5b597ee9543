#include "spmd/xla_spmd.h"

namespace shardtrace {

std::string ToString(Placement placement) {
  switch (placement) {
    case Placement::kExplicit:
      return "explicit";
    case Placement::kShardMapBlock:
      return "shard_map";
    case Placement::kPropagated:
      return "propagated";
    case Placement::kArgument:
      return "argument";
    case Placement::kUnresolved:
      return "unresolved";
  }
  return "";
}

DType XlaCpuCollectiveDType(DType dtype) {
  return dtype == DType::kBfloat16 || dtype == DType::kFloat16 ? DType::kFloat32 : dtype;
}

}  // namespace shardtrace
