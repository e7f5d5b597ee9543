#include "pages/config_page_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "emit/dot_graph.h"
#include "emit/html_report.h"
#include "emit/human_bytes.h"
#include "emit/markdown_html.h"
#include "emit/svg_chart.h"
#include "emit/trace_html.h"
#include "util/error.h"

namespace shardtrace {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A stretch of the page at the top level: a "## " section (its title and the lines after
// the heading) or lines outside any section (a folded <details> block of the page's own).
struct PageBlock {
  std::string title;
  std::string markdown;
};

// The page's lines cut at each top-level "## " heading and around each top-level <details>
// block (never inside a code fence or a <details>), in order. The title line ("# ...") is
// returned apart.
std::vector<PageBlock> SplitPage(std::string_view page, std::string& title) {
  std::vector<PageBlock> blocks(1);
  bool fenced = false;
  int depth = 0;
  while (!page.empty()) {
    const size_t end = page.find('\n');
    const std::string_view line = page.substr(0, end);
    page.remove_prefix(end == std::string_view::npos ? page.size() : end + 1);
    if (StartsWith(line, "```")) fenced = !fenced;
    if (!fenced && depth == 0 && title.empty() && StartsWith(line, "# ")) {
      title = std::string(line.substr(2));
      continue;
    }
    if (!fenced && depth == 0 && StartsWith(line, "## ")) {
      blocks.push_back({std::string(line.substr(3)), ""});
      continue;
    }
    if (!fenced && StartsWith(line, "<details")) {
      if (depth == 0) blocks.push_back({"", ""});
      ++depth;
    }
    blocks.back().markdown += std::string(line) + "\n";
    if (!fenced && StartsWith(line, "</details>") && depth > 0 && --depth == 0)
      blocks.push_back({"", ""});
  }
  return blocks;
}

std::string Slug(const std::string& title, size_t n) {
  std::string slug;
  for (const char c : title) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      slug += c;
    } else if (c >= 'A' && c <= 'Z') {
      slug += static_cast<char>(c - 'A' + 'a');
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return fmt::format("page-{}-{}", n, slug);
}

std::string FlowSvgSection(const Trace& trace) {
  try {
    return "<p>Every tensor record (weights as filled boxes, a double border where an explicit "
           "statement placed it, green inside shard_map) and every op from its inputs to its "
           "outputs; collectives in red with their mesh axes; the boxes are moe.py's scopes.</p>\n" +
           InlineSvg(TraceToSvg(trace));
  } catch (const Error& e) {
    return fmt::format(
        "<p class=\"note\">The flow graph is not drawn: {}. The Tensor flow section below has "
        "the same flow as text.</p>\n",
        HtmlEscape(e.what()));
  }
}

// The per-device memory of one layer, forward pass and training step, by component, against
// each accelerator's HBM; an HBM more than 20 times the larger bar is named, not drawn (the
// bars would be slivers).
std::string MemoryChart(const ConfigPageHtmlInput& in) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const MemoryEstimate& m = in.spmd->memory;
  const auto d = [](int64_t bytes) { return static_cast<double>(bytes); };
  StackedBarChart chart;
  chart.id = "memory-chart";
  chart.title = "Per-device memory of one layer, by component, against each accelerator's HBM";
  chart.format = [](double v) { return HumanBytes(static_cast<int64_t>(v)); };
  chart.bars.push_back({"forward pass",
                        {{"parameters", d(m.parameter_bytes)},
                         {"block input", d(m.input_bytes)},
                         {"peak temporaries", d(m.peak_temporary_bytes)}}});
  double largest = d(m.peak_bytes());
  if (in.step) {
    const StepMemory& s = in.step->memory;
    chart.bars.push_back({"training step",
                          {{"parameters", d(s.parameter_bytes)},
                           {"block input", d(s.input_bytes)},
                           {"gradients", d(s.gradient_bytes + s.input_gradient_bytes)},
                           {"peak temporaries", d(s.peak_temporary_bytes())}}});
    largest = std::max(largest, d(s.peak_bytes()));
  }
  std::string far;
  for (const Accelerator& a : in.accelerators) {
    const std::string label = fmt::format("{} {:g} GiB", a.name, a.gib);
    if (a.gib * kGiB > 20 * largest) {
      far += (far.empty() ? "" : ", ") + label;
    } else {
      chart.lines.push_back({label, a.gib * kGiB});
    }
  }
  std::string out = "<figure class=\"chart-box\">\n" + StackedBarsSvg(chart);
  if (!far.empty())
    out += fmt::format("<figcaption class=\"note\">Not drawn, more than 20 times the peak: {}."
                       "</figcaption>\n",
                       HtmlEscape(far));
  return out + "</figure>\n";
}

}  // namespace

std::string ConfigPageHtml(const ConfigPageHtmlInput& in) {
  const Trace& trace = *in.trace;
  HtmlReport report;
  report.command_name = "render";
  report.generator = fmt::format("shardtrace {}; a model of MaxText moe.py at {}",
                                 SHARDTRACE_VERSION, trace.maxtext_revision);
  report.command = in.command;
  std::string title;
  const std::vector<PageBlock> blocks = SplitPage(*in.markdown, title);
  report.title = title;
  size_t i = 0;
  for (; i < blocks.size() && blocks[i].title != "Tensor flow"; ++i) {
    if (!blocks[i].title.empty()) report.summary += "## " + blocks[i].title + "\n";
    report.summary += blocks[i].markdown;
  }
  report.summary = MarkdownToHtml(report.summary) + MemoryChart(in);

  const HtmlTable tensors = TensorHtmlTable(trace, *in.spmd);
  report.sections.push_back(
      {.id = "tensors",
       .title = fmt::format("Tensors ({}): per device, sortable and filterable", tensors.rows.size()),
       .body = "<p>Click a column header to sort by it (again to reverse); type in the box to "
               "keep the rows that contain every word.</p>\n" +
               HtmlTableMarkup(tensors),
       .open = true});
  const HtmlTable collectives = CollectiveHtmlTable(trace, *in.spmd);
  report.sections.push_back(
      {.id = "collectives",
       .title = fmt::format("Collectives ({}): written in moe.py and inserted by XLA",
                            collectives.rows.size()),
       .body = HtmlTableMarkup(collectives),
       .open = false});
  report.sections.push_back({.id = "flow-graph",
                             .title = "Flow graph (Graphviz)",
                             .body = FlowSvgSection(trace),
                             .open = false});
  for (; i < blocks.size(); ++i) {
    const std::string body = MarkdownToHtml(blocks[i].markdown);
    if (body.find_first_not_of(" \n") == std::string::npos) continue;
    report.sections.push_back(
        {.id = Slug(blocks[i].title, i), .title = blocks[i].title, .body = body, .open = false});
  }
  return RenderHtmlReport(report);
}

}  // namespace shardtrace
