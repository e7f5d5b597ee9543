#include "trace/trace.h"

namespace shardtrace {

std::string ToString(TensorKind kind) { return kind == TensorKind::kWeight ? "weight" : "act"; }

std::string ToString(Constraint constraint) {
  switch (constraint) {
    case Constraint::kNone:
      return "";
    case Constraint::kKernelAxes:
      return "kernel_axes";
    case Constraint::kShardWithLogical:
      return "maybe_shard_with_logical";
    case Constraint::kShardWithPspec:
      return "maybe_shard_with_pspec";
    case Constraint::kShardMapIn:
      return "shard_map_in_specs";
    case Constraint::kShardMapOut:
      return "shard_map_out_specs";
  }
  return "";
}

const TensorRecord* Trace::FindLast(std::string_view name) const {
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it)
    if (it->name == name) return &*it;
  return nullptr;
}

}  // namespace shardtrace
