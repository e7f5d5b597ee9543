// The training step as text (`trace --step`): the backward pass's collectives, each marked
// written or inserted by XLA and recompute where remat runs a forward collective again, the
// gradients with their shardings, and the step's memory per device with the remat policy it
// assumes, and where TPU's compiler writes a collective otherwise (the rules of
// spmd/tpu_collectives.h). Formats a StepResult and a TpuStepCollectives beside the forward's
// table; derives nothing.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"
#include "spmd/spmd_result.h"
#include "spmd/step_model.h"
#include "spmd/tpu_collectives.h"

namespace shardtrace {

// The step section `trace --step` prints after the forward's table; with `tpu` (the same
// run's RunResult::tpu_step), what TPU's compiler writes differently (spmd/tpu_collectives.h).
std::string StepToText(const Trace& trace, const StepResult& step,
                       const TpuStepCollectives* tpu = nullptr);

// The step's budget in a few lines (page summary, diff): "step (remat_policy=full): peak
// 1.2 GiB per device (...); communication 3.4 MiB (forward 1.1 MiB + backward 2.3 MiB)".
std::vector<std::string> StepSummaryLines(const StepResult& step);

}  // namespace shardtrace
