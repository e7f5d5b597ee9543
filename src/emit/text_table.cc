#include "emit/text_table.h"

#include <algorithm>
#include <string>
#include <vector>

namespace shardtrace {

size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (const unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

namespace {

// Byte offset just past the first `columns` display columns of `text`.
size_t BytesForColumns(const std::string& text, size_t columns) {
  size_t i = 0;
  for (size_t col = 0; i < text.size() && col < columns; ++col) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    i += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  }
  return std::min(i, text.size());
}

}  // namespace

std::vector<std::string> WrapText(const std::string& text, size_t width, size_t indent) {
  std::vector<std::string> out;
  std::string rest = text;
  std::string prefix;
  while (DisplayWidth(prefix + rest) > width) {
    const size_t room = width - DisplayWidth(prefix);
    const size_t limit = BytesForColumns(rest, room);
    size_t cut = std::string::npos;
    // Prefer a break before an arrow ("x: [..]  ← op(..)" keeps the op whole) or a "  #"
    // comment, then after a comma, then any space, inside the first `room` columns.
    for (const char* mark : {" ←", "  #"}) {
      const size_t at = limit < 4 ? std::string::npos : rest.rfind(mark, limit - 1);
      if (cut == std::string::npos && at != std::string::npos && at > room / 4 &&
          DisplayWidth(rest.substr(at)) + indent <= width)
        cut = at;
    }
    for (size_t i = limit; cut == std::string::npos && i > 0; --i) {
      if (rest[i - 1] == ' ' && i >= 2 && rest[i - 2] == ',' && i - 1 > room / 3) {
        cut = i - 1;
        break;
      }
    }
    if (cut == std::string::npos) {
      const size_t space = limit == 0 ? std::string::npos : rest.rfind(' ', limit - 1);
      cut = space != std::string::npos && space > 0 ? space : limit;
    }
    if (cut == 0) cut = std::max<size_t>(limit, 1);
    std::string head = rest.substr(0, cut);
    while (!head.empty() && head.back() == ' ') head.pop_back();
    out.push_back(prefix + head);
    rest = rest.substr(cut);
    while (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
    prefix = std::string(indent, ' ');
    if (rest.empty()) break;
  }
  if (!rest.empty() || out.empty()) out.push_back(prefix + rest);
  return out;
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
