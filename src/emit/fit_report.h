// `shardtrace fit`'s output: the whole training step on a slice, per device. Text puts the
// answer first (fits with X to spare / does not fit by X, on which target), then the memory
// by component as memory_analysis() names it, the layers, the five largest buffers, the
// collectives per step by kind and mesh axis, the variants that would make it fit, and what
// was assumed. JSON carries the same with memory_analysis()'s field names
// (argument_size_in_bytes, ..., peak_memory_in_bytes) beside `fits` and `hbm_bytes`. HTML
// (emit/html_report.h) is one self-contained page: the same verdict first, a stacked bar of
// the memory by component against the device's HBM (emit/svg_chart.h), then folded sections
// with the same tables, the per-parameter and collective tables sortable and filterable.
// Formats only what the FitResult holds.
#pragma once

#include <string>

#include "model/whole_step.h"

namespace shardtrace {

std::string FitToText(const FitResult& fit);
std::string FitToJson(const FitResult& fit);
// `command`: the shell line that reproduces the report, shown under its title (or empty).
std::string FitToHtml(const FitResult& fit, const std::string& command);

// The first line of every format: "mixtral-8x7b on v5p-8 (4 devices), ...: fits with ...".
std::string FitHeadline(const FitResult& fit);

// On TPU, the share of HBM fit holds the step to (FitResult::capacity_bytes), as a clause
// for after "X of Y HBM"; empty where that is the whole HBM.
std::string FitCapacityText(const FitResult& fit);

// "fits with 12.3 GiB to spare" / "does not fit by 1.2 GiB".
std::string FitVerdict(bool fits, int64_t headroom_bytes);

}  // namespace shardtrace
