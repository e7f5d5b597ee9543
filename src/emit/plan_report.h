// `shardtrace plan`'s output: the configs that fit, fastest first (headroom, estimated step
// time, MFU, tokens/s per device, communication per step by mesh axis, the MaxText overrides to
// paste), the Pareto front of headroom against step time, the nearest configs that do not
// fit, and what was excluded with its reason. JSON: `evaluated`, `configs` (each with
// `overrides`, `fits`, memory_analysis()'s fields, `est_step_seconds`, `mfu`) and `excluded`.
// HTML: the same as a report, with the configs as an inline SVG scatter of headroom against
// estimated step time, the Pareto front marked.
#pragma once

#include <string>

#include "plan/plan.h"

namespace shardtrace {

std::string PlanToText(const PlanResult& plan, int top);
std::string PlanToJson(const PlanResult& plan, int top);
std::string PlanToHtml(const PlanResult& plan, int top);

// The SVG scatter of headroom (y) against estimated step time (x), Pareto front marked.
std::string PlanScatterSvg(const PlanResult& plan);

}  // namespace shardtrace
