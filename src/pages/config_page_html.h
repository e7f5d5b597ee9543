// The HTML form of render's page (`render --format html`; the report itself is
// emit/html_report.h). The page's own Markdown is converted (emit/markdown_html.h) and kept in
// its order, split where the page is split: the title, the intro and the Summary come first,
// unfolded, with the per-device memory of the forward pass and the training step by component
// as a stacked bar chart against the accelerators' HBM (emit/svg_chart.h); then the trace's tensors as a sortable, filterable table (open), its collectives
// (folded), the flow as Graphviz SVG laid out in process (folded; when Graphviz refuses the
// graph the section says why and points at the Markdown's flow), then each of the page's
// sections, folded as the Markdown folds them (its Mermaid graphs left out: the SVG draws the
// same flow). fit and plan build their reports from the same pieces.
#pragma once

#include <string>

#include <vector>

#include "ir/trace.h"
#include "pages/page_summary.h"
#include "spmd/spmd_result.h"
#include "spmd/step_model.h"

namespace shardtrace {

struct ConfigPageHtmlInput {
  const std::string* markdown = nullptr;  // the page RenderConfigPage composed
  const Trace* trace = nullptr;           // its symbolic run
  const SpmdResult* spmd = nullptr;
  const StepResult* step = nullptr;       // its training step; null for inference
  std::vector<Accelerator> accelerators;  // the summary's HBM fits: the chart's lines
  std::string command;  // the shell line that writes this report
};

std::string ConfigPageHtml(const ConfigPageHtmlInput& in);

}  // namespace shardtrace
