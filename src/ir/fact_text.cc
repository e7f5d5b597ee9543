#include "ir/fact_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <string_view>

namespace shardtrace {

std::string FactName(const Fact& fact) {
  switch (fact.kind) {
    case FactKind::kTokensPerExpert:
      return "tokens per expert (routed choices, whole batch)";
    case FactKind::kExpertCapacity:
      return "expert_capacity_per_batch";
    case FactKind::kTokensDroppedPerExpert:
      return "tokens dropped per expert";
    case FactKind::kRaggedBufferRows:
      return "ragged buffer rows";
    case FactKind::kRaggedBufferFill:
      return "ragged buffer fill [device]";
    case FactKind::kGroupSizesPerDevice:
      return "group_sizes [device, local expert]";
    case FactKind::kLoadImbalance:
      return "load imbalance (max/mean rows per device)";
    case FactKind::kRowsSent:
      return fact.subject + ": rows sent [device, peer]";
    case FactKind::kRowsDropped:
      return fact.subject + ": rows dropped (buffer full) per receiving device";
    case FactKind::kRowsMissing:
      return fact.subject + ": rows missing at the sender per device";
    case FactKind::kRecvSizesMismatched:
      return fact.subject + ": recv_sizes disagreeing with the senders";
  }
  return ToString(fact.kind);
}

std::string FactNote(const Fact& fact) {
  double total = 0;
  for (const double v : fact.values) total += v;
  const auto in = [&](std::string_view name) { return fact.Input(name); };
  switch (fact.kind) {
    case FactKind::kExpertCapacity:
      return fmt::format("C = int(max(ceil({} * {} / {}) * {}, {}))", in("tokens"), in("top_k"),
                         in("num_experts"), in("capacity_factor"), in("capacity_factor"));
    case FactKind::kTokensDroppedPerExpert:
      return fmt::format("{} of {} choices dropped by capacity {}", total, in("choices"),
                         in("capacity"));
    case FactKind::kRaggedBufferRows:
      return fmt::format("get_ragged_buffer_size({}, {}, {}, {}, {})", in("rows"),
                         in("expert_parallelism"), in("num_experts"), in("top_k"),
                         in("ragged_buffer_factor"));
    case FactKind::kRaggedBufferFill:
      return fmt::format("rows received of a {}-row buffer", in("buffer_rows"));
    case FactKind::kGroupSizesPerDevice:
      return "rows each gmm group gets";
    case FactKind::kRowsSent:
      return "ragged_all_to_all send_sizes of every device";
    case FactKind::kRowsDropped:
      return fmt::format("{} rows did not fit the receive buffer of {} rows", total,
                         in("buffer_rows"));
    case FactKind::kRowsMissing:
      return "send_sizes reach past the operand: rows an earlier full buffer dropped";
    case FactKind::kTokensPerExpert:
    case FactKind::kLoadImbalance:
    case FactKind::kRecvSizesMismatched:
      return "";
  }
  return "";
}

std::string FactValueText(double value) {
  if (value == static_cast<double>(static_cast<int64_t>(value)) && std::abs(value) < 1e15)
    return fmt::format("{}", static_cast<int64_t>(value));
  return fmt::format("{:.6g}", value);
}

std::string FactValuesText(const Fact& fact) {
  if (fact.shape.empty()) return FactValueText(fact.values.empty() ? 0.0 : fact.values[0]);
  const int64_t cols = fact.shape.back();
  std::vector<std::string> rows;
  for (size_t r = 0; cols > 0 && r * cols < fact.values.size(); ++r) {
    std::vector<std::string> items;
    for (int64_t c = 0; c < cols && r * cols + c < fact.values.size(); ++c)
      items.push_back(FactValueText(fact.values[r * cols + c]));
    rows.push_back(fmt::format("[{}]", fmt::join(items, ", ")));
  }
  if (rows.empty()) return "[]";
  return fact.shape.size() == 1 ? rows.front() : fmt::format("[{}]", fmt::join(rows, ", "));
}

}  // namespace shardtrace
