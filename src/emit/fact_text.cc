#include "emit/fact_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>

namespace shardtrace {

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
