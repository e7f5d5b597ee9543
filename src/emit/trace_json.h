// The machine-readable Trace (schema 1): every tensor record, op, collective, fact and the
// totals, with ordered keys so the same input gives byte-identical JSON.
#pragma once

#include <string>

#include "ir/trace.h"
#include "spmd/spmd_result.h"
#include "spmd/step_model.h"
#include "spmd/tpu_collectives.h"

namespace shardtrace {

// `spmd` is `trace`'s SPMD result: each tensor's placement, propagated spec and per-device
// shape, the implied collectives and the memory are read from it. With `step` (trace
// --step) every collective says its "pass" ("forward" or "backward"), the backward's are
// listed in "backward_collectives", and "step" holds the gradients, the remat policy and
// the step's memory and communication per device. With `tpu` (the same run's
// RunResult::tpu_step), "tpu_collectives" holds the forward's and the step's collectives as
// TPU's compiler writes them (spmd/tpu_collectives.h): each with its rule and reason.
std::string TraceToJson(const Trace& trace, const SpmdResult& spmd,
                        const StepResult* step = nullptr, const TpuStepCollectives* tpu = nullptr);

}  // namespace shardtrace
