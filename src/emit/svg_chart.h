// Plots as inline SVG for the HTML reports (emit/html_report.h): horizontal stacked bars
// against limit lines, e.g. the per-device memory of the forward pass and the training step by
// component against each accelerator's HBM (render), or a whole model's by component against
// its chip (fit). Plain SVG elements sized in px, the report's fonts, a fixed palette, every
// text escaped, no script: each segment and line carries a <title> (the browser's tooltip)
// with its exact value, and the chart is deterministic for the same data. The legend wraps
// at the chart's width; with a single bar it names each component's value as well.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace shardtrace {

struct ChartSegment {
  std::string label;  // the legend's name for this component ("parameters")
  double value = 0;   // >= 0; a segment of 0 is not drawn
};

struct ChartBar {
  std::string label;  // "forward pass"
  std::vector<ChartSegment> segments;  // stacked left to right; the same labels share a colour
};

struct ChartLine {
  std::string label;  // "TPU v5e 16 GiB"
  double value = 0;   // where the vertical line stands on the value axis
};

struct StackedBarChart {
  std::string id;     // the <svg>'s element id
  std::string title;  // plain text, above the bars
  std::vector<ChartBar> bars;
  std::vector<ChartLine> lines;
  std::function<std::string(double)> format;  // a value as text ("12.4 GiB")
};

// The chart as an <svg> element; an empty string when there is no bar.
std::string StackedBarsSvg(const StackedBarChart& chart);

}  // namespace shardtrace
