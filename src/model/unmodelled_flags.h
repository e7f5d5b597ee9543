// Where a fit names what it does not count (Unmodelled, model/unmodelled.h): the conditions
// under which each of TPU's compiler behaviours the fixtures measured may apply to a step, each
// flagged beside the verdict with its note. Kept apart from the step's construction
// (model/whole_step.cc), which calls it once the step is composed.
#pragma once

#include "config/config.h"
#include "model/whole_step.h"

namespace shardtrace::model_internal {

// Adds to `r->unmodelled` and `r->notes` each behaviour that may apply to `r`'s step on its
// target. `moe`: the model has MoE layers.
void FlagUnmodelled(const Config& config, bool moe, FitResult* r);

}  // namespace shardtrace::model_internal
