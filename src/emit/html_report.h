// The HTML report every `--format html` writes (render today; fit and plan build theirs the
// same way): one self-contained file that works from file:// with no network. A report is a
// title, the command that made it, the summary (first, never folded) and sections folded in
// <details>; a section's body is HTML made by the helpers here (a sortable, filterable table,
// preformatted text, inline SVG) or by MarkdownToHtml (emit/markdown_html.h). The page itself
// is templates/report.html.mustache, compiled into the binary like the visualization template
// (scripts/embed_text.cmake -> HtmlReportTemplate()): all CSS and JS inline, and a
// Content-Security-Policy that forbids every fetch. Every text that reaches the page is escaped
// here; the template inserts what it is given as it is.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrace {

// A table the report's script sorts (a click on a header) and filters (the box above it).
struct HtmlTable {
  struct Cell {
    std::string text;
    std::optional<double> sort_value;  // numeric columns: sorted by this, right-aligned
  };
  std::string id;                    // the table's element id, unique in the report
  std::string caption;               // shown beside the filter box ("tensors")
  std::vector<std::string> headers;  // plain text
  std::vector<std::vector<Cell>> rows;
};

struct HtmlSection {
  std::string id;     // element id, unique in the report
  std::string title;  // plain text; empty: the body is shown as it is, not folded in <details>
  std::string body;   // HTML
  bool open = false;  // unfolded when the page opens
};

struct HtmlReport {
  std::string command_name;  // "render": names the writer in the file's first comment
  std::string title;         // plain text
  std::string generator;     // plain text: "shardtrace 0.1.0; MaxText moe.py at ..."
  std::string command;       // plain text: the shell line that reproduces the report, or empty
  std::string summary;       // HTML, shown first
  std::vector<HtmlSection> sections;
};

// `<`, `>`, `&`, `"` and `'` as entities.
std::string HtmlEscape(std::string_view text);
// The table with its filter box and row count; cells escaped.
std::string HtmlTableMarkup(const HtmlTable& table);
// A small table as it is: no filter box, no sorting; numeric cells right-aligned, escaped.
std::string HtmlStaticTableMarkup(const HtmlTable& table);
// Preformatted text, escaped.
std::string HtmlPre(std::string_view text);
// An SVG document (Graphviz's, with its XML declaration and DOCTYPE) as an element to inline
// in a scroll box; Error when it holds no <svg element.
std::string InlineSvg(std::string_view svg);
// The whole page.
std::string RenderHtmlReport(const HtmlReport& report);

// The embedded templates/report.html.mustache.
std::string_view HtmlReportTemplate();

}  // namespace shardtrace
