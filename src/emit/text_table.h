// A plain left-aligned text table: columns sized to their widest cell, two spaces apart,
// trailing spaces trimmed. The only place shardtrace lays out columns.
#pragma once

#include <string>
#include <vector>

namespace shardtrace {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  // Every line starts with `indent`; the header is followed by a dashed rule.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of UTF-8 text (code points; shardtrace prints no wide characters).
size_t DisplayWidth(const std::string& text);

// Breaks `text` into lines of at most `width` display columns at spaces (after a ", " where
// one is not too far left), continuation lines indented by `indent` spaces; a word longer
// than a line is cut. Code blocks of the visualizations stay within 100 columns this way.
std::vector<std::string> WrapText(const std::string& text, size_t width, size_t indent = 4);

}  // namespace shardtrace
