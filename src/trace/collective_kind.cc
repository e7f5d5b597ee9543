#include "trace/collective_kind.h"

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
  }
  return OpKind::kAllGather;
}

std::string ToString(CollectiveKind kind) { return ToString(ToOpKind(kind)); }

std::string ToString(CollectiveOrigin origin) {
  return origin == CollectiveOrigin::kWritten ? "written" : "implied";
}

}  // namespace shardtrace
