#include "emit/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "emit/fit_report.h"
#include "emit/html_report.h"
#include "emit/human_bytes.h"
#include "emit/memory_json.h"
#include "emit/text_table.h"
#include "model/unmodelled.h"

namespace shardtrace {
namespace {

std::string Joined(const std::vector<std::string>& items, const char* sep = " ") {
  return fmt::format("{}", fmt::join(items, sep));
}

std::string Seconds(double s) {
  return s >= 1 ? fmt::format("{:.2f} s", s) : fmt::format("{:.1f} ms", s * 1e3);
}

std::string CommByAxis(const StepTime& t) {
  std::vector<std::string> parts;
  for (const auto& [axis, bytes] : t.bytes_by_axis) parts.push_back(axis + " " + HumanBytes(bytes));
  return parts.empty() ? "none" : Joined(parts, ", ");
}

std::string CommandLine(const PlanResult& plan, const PlannedConfig& c) {
  std::vector<std::string> line = {"python3 -m maxtext.trainers.pre_train.train"};
  for (const std::string& a : plan.user_args) {
    if (a.rfind("--", 0) != 0) line.push_back(a);
  }
  for (const std::string& o : c.overrides) line.push_back(o);
  return Joined(line);
}

// Excluded configs grouped by reason, most common first.
std::vector<std::pair<std::string, int>> ExcludedReasons(const PlanResult& plan) {
  std::map<std::string, int> counts;
  for (const ExcludedConfig& e : plan.excluded) ++counts[e.reason];
  std::vector<std::pair<std::string, int>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string Headline(const PlanResult& plan) {
  return fmt::format("{} on {}: {} of {} configs fit{}", plan.model_name, plan.target.ToString(),
                     plan.fits.size(), plan.evaluated,
                     plan.fits.empty()
                         ? ""
                         : fmt::format("; fastest: {:.0f} tokens/s per device, {} per "
                                       "step ({})",
                                       plan.fits.front().time.tokens_per_second_per_device,
                                       Seconds(plan.fits.front().time.step_seconds),
                                       Joined(plan.fits.front().overrides)));
}

}  // namespace

std::string PlanToText(const PlanResult& plan, int top) {
  std::string out = Headline(plan) + "\n";
  out += fmt::format("  {} configs evaluated in {:.1f} s ({:.0f} per second), {}\n\n",
                     plan.evaluated, plan.seconds,
                     plan.seconds > 0 ? plan.evaluated / plan.seconds : 0.0, plan.revision);
  TextTable fits({"#", "overrides", "headroom", "est. step", "MFU", "tokens/s/device",
                  "communication per step", "pareto"});
  int rank = 0;
  std::set<Unmodelled> shown;
  for (const PlannedConfig& c : plan.fits) {
    if (++rank > top) break;
    std::vector<std::string> caveats;
    if (c.near_line) caveats.push_back("near the line");
    for (const Unmodelled u : c.unmodelled) {
      caveats.emplace_back(ShortLabel(u));
      shown.insert(u);
    }
    fits.AddRow({std::to_string(rank), Joined(c.overrides),
                 HumanBytes(c.headroom_bytes) +
                     (caveats.empty() ? "" : fmt::format(" ({})", fmt::join(caveats, ", "))),
                 Seconds(c.time.step_seconds), fmt::format("{:.1f}%", 100 * c.time.mfu),
                 fmt::format("{:.0f}", c.time.tokens_per_second_per_device), CommByAxis(c.time),
                 c.pareto ? "*" : ""});
  }
  out += fits.empty() ? "no config fits\n"
                      : "configs that fit, the most tokens per second per device first\n" +
                            fits.Render("  ");
  for (const Unmodelled u : shown) out += fmt::format("  {}: {}\n", ShortLabel(u), Explanation(u));
  if (!plan.fits.empty()) {
    out += "\nthe fastest, as a MaxText command line:\n  " + CommandLine(plan, plan.fits.front()) +
           "\n";
  }
  if (!plan.near.empty()) {
    out += "\nnearest that do not fit\n";
    TextTable near({"overrides", "verdict"});
    for (size_t i = 0; i < plan.near.size() && i < 5; ++i) {
      near.AddRow({Joined(plan.near[i].overrides), FitVerdict(false, plan.near[i].headroom_bytes)});
    }
    out += near.Render("  ");
  }
  if (!plan.excluded.empty()) {
    out += fmt::format("\nexcluded: {} configs\n", plan.excluded.size());
    TextTable ex({"configs", "reason (the first such config's error)"});
    for (const auto& [reason, count] : ExcludedReasons(plan))
      ex.AddRow({std::to_string(count), reason});
    out += ex.Render("  ");
  }
  out += "\nassumed\n";
  for (const std::string& a : plan.assumptions) out += "  " + a + "\n";
  return out;
}

std::string PlanToJson(const PlanResult& plan, int top) {
  nlohmann::ordered_json j;
  j["model_name"] = plan.model_name;
  j["maxtext_revision"] = plan.revision;
  j["compile_topology"] = plan.target.topology;
  j["devices"] = plan.target.devices();
  j["evaluated"] = plan.evaluated;
  j["seconds"] = plan.seconds;
  const auto row = [](const PlannedConfig& c) {
    nlohmann::ordered_json r;
    r["overrides"] = c.overrides;
    r["mesh"] = c.mesh;
    r["fits"] = c.fits;
    r["hbm_bytes"] = c.hbm_bytes;
    r["headroom_bytes"] = c.headroom_bytes;
    r["near_line"] = c.near_line;
    r["unmodelled"] = nlohmann::ordered_json::array();
    for (const Unmodelled u : c.unmodelled) r["unmodelled"].push_back(ToString(u));
    AddMemoryAnalysis(r, c.memory);
    r["est_step_seconds"] = c.time.step_seconds;
    r["compute_seconds"] = c.time.compute_seconds;
    r["exposed_comm_seconds"] = c.time.exposed_comm_seconds;
    r["mfu"] = c.time.mfu;
    r["tokens_per_second_per_device"] = c.time.tokens_per_second_per_device;
    r["comm_bytes_by_axis"] = c.time.bytes_by_axis;
    r["pareto"] = c.pareto;
    return r;
  };
  j["configs"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < plan.fits.size() && static_cast<int>(i) < top; ++i)
    j["configs"].push_back(row(plan.fits[i]));
  j["fitting"] = plan.fits.size();
  j["not_fitting"] = plan.near.size();
  j["near"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < plan.near.size() && i < 5; ++i) j["near"].push_back(row(plan.near[i]));
  j["excluded"] = nlohmann::ordered_json::array();
  for (const ExcludedConfig& e : plan.excluded) {
    j["excluded"].push_back({{"overrides", e.overrides}, {"reason", e.reason}});
  }
  j["assumptions"] = plan.assumptions;
  return j.dump(2) + "\n";
}

namespace {

// An axis over [lo, hi] widened to round ticks: about five steps of 1, 2 or 5 x 10^n.
struct Axis {
  double lo = 0;
  double hi = 1;
  double step = 1;
};

Axis NiceAxis(double lo, double hi) {
  if (hi - lo < 1e-9 * std::max(1.0, std::abs(hi))) {
    const double pad = std::max(std::abs(hi) * 0.05, 1e-6);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

std::string Svg(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::string PlanScatterSvg(const PlanResult& plan) {
  if (plan.fits.empty()) return "";
  constexpr double kW = 820, kH = 480, kLeft = 78, kBottom = 52, kTop = 64, kRight = 28;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  double min_t = plan.fits.front().time.step_seconds, max_t = min_t;
  double min_h = static_cast<double>(plan.fits.front().headroom_bytes), max_h = min_h;
  for (const PlannedConfig& c : plan.fits) {
    min_t = std::min(min_t, c.time.step_seconds);
    max_t = std::max(max_t, c.time.step_seconds);
    min_h = std::min(min_h, static_cast<double>(c.headroom_bytes));
    max_h = std::max(max_h, static_cast<double>(c.headroom_bytes));
  }
  // Step times in ms below a second; headroom in GiB.
  const bool ms = max_t < 1;
  const double t_scale = ms ? 1e3 : 1;
  const Axis xa = NiceAxis(min_t * t_scale, max_t * t_scale);
  const Axis ya = NiceAxis(min_h / kGiB, max_h / kGiB);
  const auto x = [&](double seconds) {
    return kLeft + (kW - kLeft - kRight) * (seconds * t_scale - xa.lo) / (xa.hi - xa.lo);
  };
  const auto y = [&](double bytes) {
    return kH - kBottom - (kH - kBottom - kTop) * (bytes / kGiB - ya.lo) / (ya.hi - ya.lo);
  };
  std::string svg = fmt::format(
      "<svg id=\"plan-scatter\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"HBM "
      "headroom against estimated step time of the {2} configs that fit\" "
      "font-family=\"system-ui, sans-serif\" font-size=\"12\">\n",
      kW, kH, plan.fits.size());
  // Grid and tick labels.
  for (int k = 0; xa.lo + k * xa.step <= xa.hi + xa.step / 2; ++k) {
    const double v = xa.lo + k * xa.step;
    const double px = kLeft + (kW - kLeft - kRight) * (v - xa.lo) / (xa.hi - xa.lo);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e3e6ec\"/><text x=\"{0}\" "
        "y=\"{3}\" text-anchor=\"middle\" fill=\"#5b6475\">{4:g}</text>\n",
        Svg(px), Svg(kTop), Svg(kH - kBottom), Svg(kH - kBottom + 16), v);
  }
  for (int k = 0; ya.lo + k * ya.step <= ya.hi + ya.step / 2; ++k) {
    const double v = ya.lo + k * ya.step;
    const double py = kH - kBottom - (kH - kBottom - kTop) * (v - ya.lo) / (ya.hi - ya.lo);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e3e6ec\"/><text x=\"{3}\" "
        "y=\"{4}\" text-anchor=\"end\" fill=\"#5b6475\">{5:g}</text>\n",
        Svg(kLeft), Svg(py), Svg(kW - kRight), Svg(kLeft - 6), Svg(py + 4), v);
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#5b6475\"/><line x1=\"{0}\" "
      "y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#5b6475\"/>\n",
      Svg(kLeft), Svg(kH - kBottom), Svg(kW - kRight), Svg(kTop));
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">estimated step time ({})</text>\n",
      Svg((kLeft + kW - kRight) / 2), Svg(kH - 12), ms ? "ms" : "s");
  svg += fmt::format(
      "<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">HBM "
      "headroom per device (GiB)</text>\n",
      Svg((kTop + kH - kBottom) / 2));
  // The legend, above the plot, each entry as wide as its text, wrapped at the chart's width.
  double legend_x = kLeft, legend_y = 14;
  const auto entry = [&](const std::string& mark, const std::string& text) {
    const double width = 36 + 7 * static_cast<double>(text.size());
    if (legend_x > kLeft && legend_x + width > kW) {
      legend_x = kLeft;
      legend_y += 18;
    }
    svg += fmt::format(fmt::runtime(mark), Svg(legend_x + 6), Svg(legend_y));
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", Svg(legend_x + 18), Svg(legend_y + 4),
                       HtmlEscape(text));
    legend_x += width;
  };
  entry("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#2c7fb8\"/>", "a config that fits");
  entry("<circle cx=\"{}\" cy=\"{}\" r=\"5.5\" fill=\"#c0392b\"/>",
        "the Pareto front: no config has more headroom and a shorter step");
  entry(
      "<circle cx=\"{}\" cy=\"{}\" r=\"7\" fill=\"none\" stroke=\"#1d2330\" "
      "stroke-width=\"1.5\"/>",
      "#1: most tokens/s per device");
  // Pareto front first, under its points.
  std::vector<const PlannedConfig*> front;
  for (const PlannedConfig& c : plan.fits) {
    if (c.pareto) front.push_back(&c);
  }
  std::sort(front.begin(), front.end(),
            [](auto a, auto b) { return a->time.step_seconds < b->time.step_seconds; });
  if (front.size() > 1) {
    std::string points;
    for (const PlannedConfig* c : front) {
      points += fmt::format("{},{} ", Svg(x(c->time.step_seconds)),
                            Svg(y(static_cast<double>(c->headroom_bytes))));
    }
    svg += "<polyline class=\"pareto-front\" fill=\"none\" stroke=\"#c0392b\" points=\"" + points +
           "\"/>\n";
  }
  // Every fitting config, rank 1 last so it is drawn on top.
  for (size_t i = plan.fits.size(); i-- > 0;) {
    const PlannedConfig& c = plan.fits[i];
    const double cx = x(c.time.step_seconds), cy = y(static_cast<double>(c.headroom_bytes));
    const std::string title =
        fmt::format("#{} {}: {} headroom, {} per step, {:.0f} tokens/s per device{}", i + 1,
                    Joined(c.overrides), HumanBytes(c.headroom_bytes), Seconds(c.time.step_seconds),
                    c.time.tokens_per_second_per_device, c.pareto ? ", on the Pareto front" : "");
    svg += fmt::format(
        "<circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" fill-opacity=\"0.85\">"
        "<title>{}</title></circle>\n",
        c.pareto ? "pareto" : "config", Svg(cx), Svg(cy), c.pareto ? 5.5 : 4,
        c.pareto ? "#c0392b" : "#2c7fb8", HtmlEscape(title));
    if (i == 0) {
      svg += fmt::format(
          "<circle class=\"fastest\" cx=\"{0}\" cy=\"{1}\" r=\"8\" fill=\"none\" "
          "stroke=\"#1d2330\" stroke-width=\"1.5\"/><text x=\"{0}\" y=\"{2}\" "
          "text-anchor=\"middle\" font-weight=\"600\">#1</text>\n",
          Svg(cx), Svg(cy), Svg(cy - 12));
    }
  }
  return svg + "</svg>\n";
}

std::string PlanToHtml(const PlanResult& plan, int top, const std::string& command) {
  HtmlReport report;
  report.command_name = "plan";
  report.title = fmt::format("plan: {} on {}", plan.model_name, plan.target.topology);
  report.generator = fmt::format("shardtrace {}; {}", SHARDTRACE_VERSION, plan.revision);
  report.command = command;
  report.summary = fmt::format(
      "<p class=\"verdict {}\">{}</p>\n<p class=\"note\">{} configs evaluated in {:.1f} s; each "
      "is a whole <code>fit</code>, ranked by estimated tokens per second per device.</p>\n",
      plan.fits.empty() ? "does-not-fit" : "fits", HtmlEscape(Headline(plan)), plan.evaluated,
      plan.seconds);
  if (!plan.fits.empty()) {
    report.summary += "<figure class=\"chart-box\">\n" + PlanScatterSvg(plan) +
                      "<figcaption class=\"note\">Every config that fits; hover over a point for "
                      "its overrides. Step times are estimates (see What the ranking assumes)."
                      "</figcaption>\n</figure>\n";
  }
  const size_t shown = std::min(plan.fits.size(), static_cast<size_t>(std::max(top, 0)));
  HtmlTable table;
  table.id = "configs-table";
  table.caption = "configs";
  table.headers = {"rank",
                   "overrides",
                   "headroom",
                   "est. step",
                   "MFU",
                   "tokens/s/device",
                   "communication per step",
                   "pareto"};
  for (size_t i = 0; i < shown; ++i) {
    const PlannedConfig& c = plan.fits[i];
    table.rows.push_back({{std::to_string(i + 1), static_cast<double>(i + 1)},
                          {Joined(c.overrides), std::nullopt},
                          {HumanBytes(c.headroom_bytes), static_cast<double>(c.headroom_bytes)},
                          {Seconds(c.time.step_seconds), c.time.step_seconds},
                          {fmt::format("{:.1f}%", 100 * c.time.mfu), c.time.mfu},
                          {fmt::format("{:.0f}", c.time.tokens_per_second_per_device),
                           c.time.tokens_per_second_per_device},
                          {CommByAxis(c.time), std::nullopt},
                          {c.pareto ? "yes" : "", std::nullopt}});
  }
  if (!plan.fits.empty()) {
    report.sections.push_back(
        {"configs",
         shown == plan.fits.size()
             ? fmt::format("The {} configs that fit, the most tokens/s per device first", shown)
             : fmt::format("The {} of {} configs that fit with the most tokens/s per device "
                           "(--top)",
                           shown, plan.fits.size()),
         "<p>Click a column header to sort by it (again to reverse); type in the box to keep the "
         "rows that contain every word.</p>\n" +
             HtmlTableMarkup(table),
         true});
    report.sections.push_back(
        {"command", "The fastest, as a MaxText command line",
         "<pre class=\"command\">" + HtmlEscape(CommandLine(plan, plan.fits.front())) + "</pre>\n",
         true});
  }
  if (!plan.near.empty()) {
    HtmlTable near;
    near.id = "near-table";
    near.headers = {"overrides", "verdict", "peak"};
    for (size_t i = 0; i < plan.near.size() && i < 5; ++i) {
      const PlannedConfig& c = plan.near[i];
      near.rows.push_back({{Joined(c.overrides), std::nullopt},
                           {FitVerdict(false, c.headroom_bytes), std::nullopt},
                           {HumanBytes(c.memory.peak_memory_in_bytes),
                            static_cast<double>(c.memory.peak_memory_in_bytes)}});
    }
    report.sections.push_back(
        {"near",
         fmt::format("Nearest that do not fit ({} of {})", near.rows.size(), plan.near.size()),
         HtmlStaticTableMarkup(near), false});
  }
  if (!plan.excluded.empty()) {
    HtmlTable ex;
    ex.id = "excluded-table";
    ex.headers = {"configs", "reason (the first such config's error)"};
    for (const auto& [reason, count] : ExcludedReasons(plan)) {
      ex.rows.push_back({{std::to_string(count), static_cast<double>(count)}, {reason, {}}});
    }
    report.sections.push_back({"excluded", fmt::format("Excluded ({})", plan.excluded.size()),
                               HtmlStaticTableMarkup(ex), false});
  }
  std::string assumed = "<ul>\n";
  for (const std::string& a : plan.assumptions) assumed += "<li>" + HtmlEscape(a) + "</li>\n";
  report.sections.push_back({"assumed", "What the ranking assumes", assumed + "</ul>\n", false});
  return RenderHtmlReport(report);
}

}  // namespace shardtrace
