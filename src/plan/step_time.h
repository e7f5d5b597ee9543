// `plan`'s estimate of a training step's time on its hardware, from what `fit` computed: the
// step's FLOPs (forward, backward and what remat runs again) at the chip's peak bf16 rate, and
// each collective's bytes over the links it crosses (ICI: a ring over the axis, one link each
// way per device; DCN: the host's bandwidth shared by its devices). The overlap rule, stated
// in docs/plan.md and in every output: weight all-gathers and gradient reduce-scatters overlap
// the compute of the layers around them, except the first layer's share (1 / layers); every
// other collective (all-to-all, ragged all-to-all, all-reduce, permute) waits on the compute
// that produces its input and is exposed. Every constant is a row of the chip table.
#pragma once

#include <map>
#include <string>

#include "model/whole_step.h"

namespace shardtrace {

struct StepTime {
  double compute_seconds = 0;
  double overlapped_comm_seconds = 0;  // FSDP gathers and reduce-scatters
  double exposed_comm_seconds = 0;     // the rest, and the first layer's gathers
  double step_seconds = 0;
  double mfu = 0;                      // model FLOPs (no recompute) / (step x peak x devices)
  double tokens_per_second_per_device = 0;
  std::map<std::string, int64_t> bytes_by_axis;  // "fsdp", "expert", "fsdp x tensor", ...
};

StepTime EstimateStepTime(const FitResult& fit);

// The one line every plan output carries: what the ranking assumes.
std::string StepTimeAssumptions();

}  // namespace shardtrace
