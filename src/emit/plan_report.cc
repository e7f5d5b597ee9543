#include "emit/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "emit/fit_report.h"
#include "emit/html_report.h"
#include "emit/human_bytes.h"
#include "emit/text_table.h"

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
  for (const PlannedConfig& c : plan.fits) {
    if (++rank > top) break;
    fits.AddRow({std::to_string(rank), Joined(c.overrides), HumanBytes(c.headroom_bytes),
                 Seconds(c.time.step_seconds), fmt::format("{:.1f}%", 100 * c.time.mfu),
                 fmt::format("{:.0f}", c.time.tokens_per_second_per_device), CommByAxis(c.time),
                 c.pareto ? "*" : ""});
  }
  out += fits.empty() ? "no config fits\n"
                      : "configs that fit, the most tokens per second per device first\n" +
                            fits.Render("  ");
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
    r["argument_size_in_bytes"] = c.memory.argument_size_in_bytes;
    r["output_size_in_bytes"] = c.memory.output_size_in_bytes;
    r["alias_size_in_bytes"] = c.memory.alias_size_in_bytes;
    r["temp_size_in_bytes"] = c.memory.temp_size_in_bytes;
    r["host_temp_size_in_bytes"] = c.memory.host_temp_size_in_bytes;
    r["peak_memory_in_bytes"] = c.memory.peak_memory_in_bytes;
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

std::string PlanScatterSvg(const PlanResult& plan) {
  constexpr double kW = 720, kH = 420, kLeft = 80, kBottom = 50, kTop = 20, kRight = 20;
  double max_t = 0, max_h = 0;
  for (const PlannedConfig& c : plan.fits) {
    max_t = std::max(max_t, c.time.step_seconds);
    max_h = std::max(max_h, static_cast<double>(c.headroom_bytes));
  }
  if (max_t <= 0) max_t = 1;
  if (max_h <= 0) max_h = 1;
  const auto x = [&](double t) { return kLeft + (kW - kLeft - kRight) * t / max_t; };
  const auto y = [&](double h) { return kH - kBottom - (kH - kBottom - kTop) * h / max_h; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" role=\"img\" aria-label=\"headroom against estimated step time\">",
      kW, kH);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>", kLeft,
                     kH - kBottom, kW - kRight);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>", kLeft,
                     kTop, kH - kBottom);
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">estimated step time (0 to "
      "{})</text>",
      (kLeft + kW) / 2, kH - 15, HtmlEscape(Seconds(max_t)));
  svg += fmt::format(
      "<text x=\"15\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 15 {})\" "
      "text-anchor=\"middle\">HBM headroom (0 to {})</text>",
      (kTop + kH - kBottom) / 2, (kTop + kH - kBottom) / 2,
      HtmlEscape(HumanBytes(static_cast<int64_t>(max_h))));
  std::vector<const PlannedConfig*> front;
  for (const PlannedConfig& c : plan.fits) {
    if (c.pareto) front.push_back(&c);
    svg += fmt::format(
        "<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" "
        "fill=\"{}\"><title>{}</title></circle>",
        c.pareto ? "pareto" : "config", x(c.time.step_seconds),
        y(static_cast<double>(c.headroom_bytes)), c.pareto ? 5 : 3,
        c.pareto ? "#c0392b" : "#2c7fb8",
        HtmlEscape(fmt::format("{}: {} headroom, {}", Joined(c.overrides),
                               HumanBytes(c.headroom_bytes), Seconds(c.time.step_seconds))));
  }
  std::sort(front.begin(), front.end(),
            [](auto a, auto b) { return a->time.step_seconds < b->time.step_seconds; });
  if (front.size() > 1) {
    std::string points;
    for (const PlannedConfig* c : front) {
      points += fmt::format("{:.1f},{:.1f} ", x(c->time.step_seconds),
                            y(static_cast<double>(c->headroom_bytes)));
    }
    svg += "<polyline class=\"pareto-front\" fill=\"none\" stroke=\"#c0392b\" points=\"" + points +
           "\"/>";
  }
  svg += "</svg>";
  return svg;
}

std::string PlanToHtml(const PlanResult& plan, int top) {
  HtmlReport report;
  report.command_name = "plan";
  report.title = fmt::format("plan: {} on {}", plan.model_name, plan.target.topology);
  report.generator = "shardtrace; " + plan.revision;
  report.command = "shardtrace plan " + Joined(plan.user_args);
  report.summary = "<p>" + HtmlEscape(Headline(plan)) + "</p>" + PlanScatterSvg(plan) +
                   "<p>Red: the Pareto front of headroom against estimated step time.</p>";
  HtmlTable table;
  table.id = "configs";
  table.caption = "configs that fit";
  table.headers = {"rank", "overrides",       "headroom",     "est. step (s)",
                   "MFU",  "tokens/s/device", "communication"};
  int rank = 0;
  for (const PlannedConfig& c : plan.fits) {
    if (++rank > top) break;
    table.rows.push_back({{std::to_string(rank), static_cast<double>(rank)},
                          {Joined(c.overrides), std::nullopt},
                          {HumanBytes(c.headroom_bytes), static_cast<double>(c.headroom_bytes)},
                          {fmt::format("{:.4f}", c.time.step_seconds), c.time.step_seconds},
                          {fmt::format("{:.1f}%", 100 * c.time.mfu), c.time.mfu},
                          {fmt::format("{:.0f}", c.time.tokens_per_second_per_device),
                           c.time.tokens_per_second_per_device},
                          {CommByAxis(c.time), std::nullopt}});
  }
  report.sections.push_back(
      {"configs", "Configs that fit, fastest first", HtmlTableMarkup(table), true});
  std::string excluded;
  for (const auto& [reason, count] : ExcludedReasons(plan))
    excluded += fmt::format("{} x {}\n", count, reason);
  report.sections.push_back(
      {"excluded", fmt::format("Excluded ({})", plan.excluded.size()), HtmlPre(excluded), false});
  report.sections.push_back(
      {"assumed", "What the ranking assumes", HtmlPre(Joined(plan.assumptions, "\n")), false});
  return RenderHtmlReport(report);
}

}  // namespace shardtrace
