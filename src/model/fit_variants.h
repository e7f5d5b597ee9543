// fit's variants: the knobs that would make a config fit or give it the most headroom, each a
// whole fit of its own, so a row is exactly what `fit` prints for that config. Beside the
// one-knob rows (remat_policy=full, bf16 weights, sgd, the layer inputs offloaded to the host,
// as MaxText's DeepSeek-V3 recipe does), the batch row is searched, not halved: the largest
// per_device_batch_size that fits (model/batch_search.h), below the user's where it does not
// fit and above it where it does, the question a user picking a batch for a slice brings.
#pragma once

#include <functional>
#include <vector>

#include "model/batch_search.h"
#include "model/whole_step.h"

namespace shardtrace {

// What one fit says to the batch search (fit's batch row, plan's configs without a batch).
BatchProbe ProbeOf(const FitResult& fit);

namespace model_internal {

// `fit` is FitOnce(request); `fit_once` runs the variants' fits.
std::vector<FitVariant> Variants(const FitRequest& request, const FitResult& fit,
                                 const std::function<FitResult(const FitRequest&)>& fit_once);

}  // namespace model_internal
}  // namespace shardtrace
