#include "emit/markdown_html.h"

#include <fmt/format.h>

#include <vector>

#include "emit/html_report.h"

namespace shardtrace {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// A pipe table's cells: the line without its outer pipes, split at pipes not escaped (`\|`)
// and not inside a code span.
std::vector<std::string> Cells(std::string_view line) {
  line = Trim(line);
  if (StartsWith(line, "|")) line.remove_prefix(1);
  if (!line.empty() && line.back() == '|' && (line.size() < 2 || line[line.size() - 2] != '\\'))
    line.remove_suffix(1);
  std::vector<std::string> cells(1);
  bool in_code = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cells.back() += '|';
      ++i;
    } else if (c == '`') {
      in_code = !in_code;
      cells.back() += c;
    } else if (c == '|' && !in_code) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  for (std::string& cell : cells) cell = std::string(Trim(cell));
  return cells;
}

bool IsSeparatorRow(std::string_view line) {
  for (const std::string& cell : Cells(line)) {
    if (cell.empty()) return false;
    for (const char c : cell)
      if (c != '-' && c != ':') return false;
  }
  return true;
}

bool IsHeading(std::string_view line, int* level) {
  int n = 0;
  while (n < static_cast<int>(line.size()) && line[static_cast<size_t>(n)] == '#') ++n;
  if (n == 0 || n > 6 || static_cast<size_t>(n) >= line.size() ||
      line[static_cast<size_t>(n)] != ' ')
    return false;
  *level = n;
  return true;
}

// The converter's state: the open paragraph and list, and the <details> blocks opened so
// far, each with where its content starts in `out` (an empty one is removed when it closes).
class Converter {
 public:
  std::string Convert(std::string_view markdown) {
    const std::vector<std::string_view> lines = Lines(markdown);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string_view line = lines[i];
      const std::string_view trimmed = Trim(line);
      int level = 0;
      if (StartsWith(trimmed, "```")) {
        CloseBlocks();
        const std::string_view language = Trim(trimmed.substr(3));
        std::string code;
        size_t j = i + 1;
        for (; j < lines.size() && !StartsWith(Trim(lines[j]), "```"); ++j)
          code += std::string(lines[j]) + "\n";
        i = j;
        if (language != "mermaid") out_ += HtmlPre(code);
      } else if (IsHeading(trimmed, &level)) {
        CloseBlocks();
        if (NextIsMermaid(lines, i + 1)) continue;  // the graph's heading goes with it
        out_ += fmt::format("<h{0}>{1}</h{0}>\n", level,
                            InlineMarkdownToHtml(trimmed.substr(static_cast<size_t>(level) + 1)));
      } else if (StartsWith(trimmed, "<details")) {
        CloseBlocks();
        out_ += "<details>\n";
        details_.push_back(out_.size());
      } else if (StartsWith(trimmed, "<summary>") && !details_.empty()) {
        // The page's own summary line: its <b> markup kept, everything else escaped.
        std::string text(trimmed.substr(9));
        if (const size_t end = text.rfind("</summary>"); end != std::string::npos)
          text.resize(end);
        std::string inner = InlineMarkdownToHtml(text);
        for (const auto& [escaped, tag] : {std::pair<std::string, std::string>{"&lt;b&gt;", "<b>"},
                                           {"&lt;/b&gt;", "</b>"}})
          for (size_t at = inner.find(escaped); at != std::string::npos;
               at = inner.find(escaped, at + tag.size()))
            inner.replace(at, escaped.size(), tag);
        out_ += "<summary>" + inner + "</summary>\n";
        details_.back() = out_.size();
      } else if (StartsWith(trimmed, "</details>") && !details_.empty()) {
        CloseBlocks();
        const size_t start = details_.back();
        details_.pop_back();
        if (Trim(std::string_view(out_).substr(start)).empty()) {
          out_.resize(out_.rfind("<details>", start));
        } else {
          out_ += "</details>\n";
        }
      } else if (StartsWith(trimmed, "<!--")) {
        while (i < lines.size() && lines[i].find("-->") == std::string_view::npos) ++i;
      } else if (StartsWith(trimmed, "|") && i + 1 < lines.size() &&
                 StartsWith(Trim(lines[i + 1]), "|") && IsSeparatorRow(lines[i + 1])) {
        CloseBlocks();
        out_ += "<table>\n<thead><tr>";
        for (const std::string& cell : Cells(trimmed))
          out_ += "<th>" + InlineMarkdownToHtml(cell) + "</th>";
        out_ += "</tr></thead>\n<tbody>\n";
        i += 2;
        for (; i < lines.size() && StartsWith(Trim(lines[i]), "|"); ++i) {
          out_ += "<tr>";
          for (const std::string& cell : Cells(lines[i]))
            out_ += "<td>" + InlineMarkdownToHtml(cell) + "</td>";
          out_ += "</tr>\n";
        }
        --i;
        out_ += "</tbody>\n</table>\n";
      } else if (StartsWith(trimmed, "- ") || StartsWith(trimmed, "* ")) {
        ClosePara();
        if (!in_list_) out_ += "<ul>\n";
        in_list_ = true;
        out_ += "<li>" + InlineMarkdownToHtml(trimmed.substr(2)) + "</li>\n";
      } else if (trimmed.empty()) {
        CloseBlocks();
      } else if (in_list_ && (line.front() == ' ' || line.front() == '\t')) {
        // A list item's continuation line.
        out_.resize(out_.size() - 6);  // "</li>\n"
        out_ += " " + InlineMarkdownToHtml(trimmed) + "</li>\n";
      } else {
        CloseList();
        out_ += in_para_ ? "\n" : "<p>";
        in_para_ = true;
        out_ += InlineMarkdownToHtml(trimmed);
      }
    }
    CloseBlocks();
    for (size_t n = details_.size(); n > 0; --n) out_ += "</details>\n";
    return out_;
  }

 private:
  static bool NextIsMermaid(const std::vector<std::string_view>& lines, size_t i) {
    while (i < lines.size() && Trim(lines[i]).empty()) ++i;
    return i < lines.size() && StartsWith(Trim(lines[i]), "```mermaid");
  }
  void ClosePara() {
    if (in_para_) out_ += "</p>\n";
    in_para_ = false;
  }
  void CloseList() {
    if (in_list_) out_ += "</ul>\n";
    in_list_ = false;
  }
  void CloseBlocks() {
    ClosePara();
    CloseList();
  }

  std::string out_;
  bool in_para_ = false;
  bool in_list_ = false;
  std::vector<size_t> details_;
};

}  // namespace

std::string InlineMarkdownToHtml(std::string_view text) {
  std::string out;
  bool bold = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '`') {
      const size_t end = text.find('`', i + 1);
      if (end != std::string_view::npos) {
        out += "<code>" + HtmlEscape(text.substr(i + 1, end - i - 1)) + "</code>";
        i = end;
        continue;
      }
    } else if (c == '*' && i + 1 < text.size() && text[i + 1] == '*') {
      if (bold || text.find("**", i + 2) != std::string_view::npos) {
        out += bold ? "</b>" : "<b>";
        bold = !bold;
        ++i;
        continue;
      }
    } else if (c == '[') {
      const size_t close = text.find("](", i + 1);
      const size_t end = close == std::string_view::npos ? close : text.find(')', close + 2);
      if (end != std::string_view::npos && text.substr(i + 1, close - i - 1).find('[') ==
                                               std::string_view::npos) {
        const std::string_view label = text.substr(i + 1, close - i - 1);
        const std::string_view url = text.substr(close + 2, end - close - 2);
        const std::string inner = InlineMarkdownToHtml(label);
        if (StartsWith(url, "https://") || StartsWith(url, "http://"))
          out += fmt::format("<a href=\"{}\">{}</a>", HtmlEscape(url), inner);
        else
          out += inner;
        i = end;
        continue;
      }
    }
    out += HtmlEscape(std::string_view(&text[i], 1));
  }
  if (bold) out += "</b>";
  return out;
}

std::string MarkdownToHtml(std::string_view markdown) { return Converter().Convert(markdown); }

}  // namespace shardtrace
