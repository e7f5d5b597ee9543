// `shardtrace plan`'s output: the configs that fit, fastest first (headroom, estimated step
// time, MFU, tokens/s per device, communication per step by mesh axis, the MaxText overrides to
// paste), the Pareto front of headroom against step time, the nearest configs that do not
// fit, and what was excluded with its reason. JSON: `evaluated`, `configs` (each with
// `overrides`, `fits`, memory_analysis()'s fields, `est_step_seconds`, `mfu`) and `excluded`.
// HTML (emit/html_report.h): the headline first, then every fitting config as an inline SVG
// scatter of headroom against estimated step time (round ticks over the data's range, the
// Pareto front in red, #1 ringed), then the top configs (sortable, filterable), the fastest's
// MaxText command line, and folded: the nearest that do not fit, the excluded, the assumptions.
#pragma once

#include <string>

#include "plan/plan.h"

namespace shardtrace {

std::string PlanToText(const PlanResult& plan, int top);
std::string PlanToJson(const PlanResult& plan, int top);
// `command`: the shell line that reproduces the report, shown under its title (or empty).
std::string PlanToHtml(const PlanResult& plan, int top, const std::string& command);

// The SVG scatter of headroom (y) against estimated step time (x) of every config that fits,
// Pareto front marked: one <circle class="config|pareto"> per config; empty when none fits.
std::string PlanScatterSvg(const PlanResult& plan);

}  // namespace shardtrace
