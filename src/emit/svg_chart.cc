#include "emit/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "emit/html_report.h"

namespace shardtrace {
namespace {

// Colour-blind-safe (Okabe-Ito), in the order a component first appears.
constexpr std::array<const char*, 8> kPalette = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                                 "#56B4E9", "#D55E00", "#F0E442", "#999999"};
constexpr double kLabelWidth = 140;  // the bars' labels, left of the plot
constexpr double kPlotWidth = 640;
constexpr double kTotalWidth = 110;  // each bar's total, right of it
constexpr double kTop = 58;          // the title and the lines' labels (two rows)
constexpr double kBarHeight = 26;
constexpr double kBarGap = 14;
constexpr double kLegendRow = 20;  // the legend's rows, when it wraps
constexpr double kCharWidth = 7;   // a character of the legend, wide enough for 12px sans

struct LegendEntry {
  std::string label;  // the component
  std::string text;   // what the legend says
  double x = 0;
  double y = 0;
};

std::string Num(double x) { return fmt::format("{:.1f}", x); }

}  // namespace

std::string StackedBarsSvg(const StackedBarChart& chart) {
  if (chart.bars.empty()) return "";
  const auto text = [&](double v) { return chart.format ? chart.format(v) : fmt::format("{}", v); };
  double max = 0;
  for (const ChartBar& bar : chart.bars) {
    double total = 0;
    for (const ChartSegment& s : bar.segments) total += std::max(s.value, 0.0);
    max = std::max(max, total);
  }
  for (const ChartLine& line : chart.lines) max = std::max(max, line.value);
  if (max <= 0) max = 1;
  const auto x = [&](double v) { return kLabelWidth + v / max * kPlotWidth; };

  std::map<std::string, size_t> colour;  // component -> palette index, first seen first
  std::vector<std::string> legend;       // components, first seen first
  for (const ChartBar& bar : chart.bars)
    for (const ChartSegment& s : bar.segments)
      if (colour.emplace(s.label, colour.size() % kPalette.size()).second)
        legend.push_back(s.label);

  const double plot_bottom = kTop + static_cast<double>(chart.bars.size()) * (kBarHeight + kBarGap);
  const double width = kLabelWidth + kPlotWidth + kTotalWidth;
  // The legend in rows under the plot, wrapped at the chart's width. With one bar each entry
  // names its value too: a sliver of a segment is still read.
  std::vector<LegendEntry> legend_entries;
  double legend_x = kLabelWidth;
  double legend_y = plot_bottom + 12;
  for (const std::string& label : legend) {
    std::string entry = label;
    if (chart.bars.size() == 1) {
      double value = 0;
      for (const ChartSegment& s : chart.bars[0].segments)
        if (s.label == label) value += std::max(s.value, 0.0);
      entry += " " + text(value);
    }
    const double entry_width = 28 + kCharWidth * static_cast<double>(entry.size());
    if (legend_x > kLabelWidth && legend_x + entry_width > width) {
      legend_x = kLabelWidth;
      legend_y += kLegendRow;
    }
    legend_entries.push_back({label, entry, legend_x, legend_y});
    legend_x += entry_width;
  }
  const double height = legend_y + 24;
  std::string out = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\" "
      "font-family=\"system-ui, sans-serif\" font-size=\"12\">\n",
      HtmlEscape(chart.id), Num(width), Num(height), Num(width), Num(height),
      HtmlEscape(chart.title));
  out += fmt::format("<text x=\"0\" y=\"14\" font-weight=\"600\" font-size=\"13\">{}</text>\n",
                     HtmlEscape(chart.title));
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#5b6475\"/>\n",
                     Num(x(0)), Num(kTop - 6), Num(plot_bottom));
  double y = kTop;
  for (const ChartBar& bar : chart.bars) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                       Num(kLabelWidth - 8), Num(y + kBarHeight / 2 + 4), HtmlEscape(bar.label));
    double at = 0;
    for (const ChartSegment& s : bar.segments) {
      if (s.value <= 0) continue;
      out += fmt::format(
          "<rect class=\"segment\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>{}: {} ({})</title></rect>\n",
          Num(x(at)), Num(y), Num(std::max(x(at + s.value) - x(at), 0.5)), Num(kBarHeight),
          kPalette[colour[s.label]], HtmlEscape(bar.label), HtmlEscape(s.label),
          HtmlEscape(text(s.value)));
      at += s.value;
    }
    out += fmt::format("<text class=\"total\" x=\"{}\" y=\"{}\">{}</text>\n", Num(x(at) + 6),
                       Num(y + kBarHeight / 2 + 4), HtmlEscape(text(at)));
    y += kBarHeight + kBarGap;
  }
  // Limit lines, labels in two staggered rows so neighbours do not overlap.
  std::vector<ChartLine> lines = chart.lines;
  std::stable_sort(lines.begin(), lines.end(),
                   [](const ChartLine& a, const ChartLine& b) { return a.value < b.value; });
  for (size_t i = 0; i < lines.size(); ++i) {
    const double lx = x(lines[i].value);
    const double ly = i % 2 == 0 ? 32 : 46;
    out += fmt::format(
        "<line class=\"limit\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#C0392B\" "
        "stroke-width=\"2\" "
        "stroke-dasharray=\"4 3\"><title>{3}</title></line>\n",
        Num(lx), Num(ly + 3), Num(plot_bottom), HtmlEscape(lines[i].label));
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#C0392B\" font-size=\"11\">{}"
        "</text>\n",
        Num(lx), Num(ly), HtmlEscape(lines[i].label));
  }
  for (const LegendEntry& e : legend_entries) {
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{}\">{}</text>\n",
        Num(e.x), Num(e.y), kPalette[colour[e.label]], Num(e.x + 16), Num(e.y + 10),
        HtmlEscape(e.text));
  }
  return out + "</svg>\n";
}

}  // namespace shardtrace
