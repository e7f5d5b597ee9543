// The Markdown of shardtrace's own pages as HTML, for the HTML reports (emit/html_report.h):
// the subset the pages are written in, nothing more. Headings, paragraphs, `-` lists, pipe
// tables, fenced code blocks, inline `code`, **bold** and links (kept as links only when they
// leave for http(s); a link into shardtrace's source tree keeps its text), and the page's own
// <details>/<summary> lines. Mermaid blocks are dropped with the heading that names them (an
// HTML report draws the flow as Graphviz SVG instead), and so is a <details> left empty.
// Every other character is escaped: text from configs never becomes markup.
#pragma once

#include <string>
#include <string_view>

namespace shardtrace {

std::string MarkdownToHtml(std::string_view markdown);

// A line of Markdown's inline markup (code spans, bold, links) as HTML.
std::string InlineMarkdownToHtml(std::string_view text);

}  // namespace shardtrace
