#include "emit/text_table.h"

#include <algorithm>

namespace shardtrace {

size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (const unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

std::string TextTable::Render(const std::string& indent) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out = indent;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      out += cell;
      if (i + 1 < widths.size()) out += std::string(widths[i] - DisplayWidth(cell) + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  std::vector<std::string> rule;
  for (const size_t w : widths) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace shardtrace
