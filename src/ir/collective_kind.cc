#include "ir/collective_kind.h"

#include <stdexcept>

namespace shardtrace {

OpKind ToOpKind(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return OpKind::kAllGather;
    case CollectiveKind::kPsum:
      return OpKind::kPsum;
    case CollectiveKind::kPsumScatter:
      return OpKind::kPsumScatter;
    case CollectiveKind::kRaggedAllToAll:
      return OpKind::kRaggedAllToAll;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSlice:
    case CollectiveKind::kCollectivePermute:
      break;
  }
  throw std::logic_error("a collective only XLA inserts has no op kind");
}

std::string ToString(CollectiveKind kind) {
  if (kind == CollectiveKind::kAllToAll) return "all_to_all";
  if (kind == CollectiveKind::kSlice) return "slice";
  if (kind == CollectiveKind::kCollectivePermute) return "ppermute";
  return ToString(ToOpKind(kind));
}

std::string HloName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kPsum:
      return "all-reduce";
    case CollectiveKind::kPsumScatter:
      return "reduce-scatter";
    case CollectiveKind::kRaggedAllToAll:
      return "ragged-all-to-all";
    case CollectiveKind::kAllToAll:
      return "all-to-all";
    case CollectiveKind::kSlice:
      return "slice";
    case CollectiveKind::kCollectivePermute:
      return "collective-permute";
  }
  return "";
}

std::string ToString(CollectiveOrigin origin) {
  return origin == CollectiveOrigin::kWritten ? "written" : "implied";
}

}  // namespace shardtrace
