// MaxText's gradient accumulation as fit composes it. With gradient_accumulation_steps = N > 1
// MaxText 0.2.5 reads per_device_batch_size as the microbatch (configs/types.py: the global
// batch is devices x per_device_batch_size x N) and its train step
// (utils/gradient_accumulation.py) runs the N microbatches in a scan: each one's forward and
// backward, its gradients added into an accumulator made as zeros like the parameters (their
// shapes, dtype and shardings), carried through the scan and read by the optimizer's update
// after it. So the step is the step of one microbatch beside the accumulator, with the whole
// batch among its inputs and every collective of the microbatch's step run N times.
#pragma once

#include <cstdint>
#include <functional>

#include "model/whole_step.h"

namespace shardtrace::model_internal {

// The fit of `request`, whose config sets gradient_accumulation_steps = `steps` > 1, from
// `fit_once` run on one microbatch (the same request with one step).
FitResult AccumulatedFit(const FitRequest& request, int64_t steps,
                         const std::function<FitResult(const FitRequest&)>& fit_once);

}  // namespace shardtrace::model_internal
