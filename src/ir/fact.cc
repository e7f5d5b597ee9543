#include "ir/fact.h"

#include <stdexcept>

namespace shardtrace {

std::string ToString(FactKind kind) {
  switch (kind) {
    case FactKind::kTokensPerExpert:
      return "tokens_per_expert";
    case FactKind::kExpertCapacity:
      return "expert_capacity";
    case FactKind::kTokensDroppedPerExpert:
      return "tokens_dropped_per_expert";
    case FactKind::kRaggedBufferRows:
      return "ragged_buffer_rows";
    case FactKind::kRaggedBufferFill:
      return "ragged_buffer_fill";
    case FactKind::kGroupSizesPerDevice:
      return "group_sizes_per_device";
    case FactKind::kLoadImbalance:
      return "load_imbalance";
    case FactKind::kRowsSent:
      return "rows_sent";
    case FactKind::kRowsDropped:
      return "rows_dropped";
    case FactKind::kRowsMissing:
      return "rows_missing";
    case FactKind::kRecvSizesMismatched:
      return "recv_sizes_mismatched";
  }
  throw std::logic_error("unknown FactKind");
}

double Fact::Input(std::string_view name) const {
  for (const FactInput& in : inputs)
    if (in.name == name) return in.value;
  throw std::logic_error("fact " + ToString(kind) + " has no input " + std::string(name));
}

}  // namespace shardtrace
