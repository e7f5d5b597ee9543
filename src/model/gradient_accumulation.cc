#include "model/gradient_accumulation.h"

#include <fmt/format.h>

#include <string>

#include "config/run_inputs.h"
#include "model/step_peak.h"
#include "util/checked.h"

namespace shardtrace::model_internal {

FitResult AccumulatedFit(const FitRequest& request, int64_t steps,
                         const std::function<FitResult(const FitRequest&)>& fit_once) {
  FitRequest microbatch = request;
  microbatch.args = WithOverrides(request.args, {"gradient_accumulation_steps=1"});
  FitResult r = fit_once(microbatch);
  // The inputs hold every microbatch (the scan slices them); the accumulator is the
  // parameters' zeros, live from before the scan to the update.
  r.batch_bytes = CheckedMul(r.batch_bytes, steps, "batch bytes");
  for (const ParamBuffer& p : r.params) {
    if (p.trainable) r.accumulator_bytes += p.hbm_bytes;
  }
  for (StepCollectiveTotal& c : r.collectives) {
    c.count = CheckedMul(c.count, steps, "collective count");
    c.bytes_per_device = CheckedMul(c.bytes_per_device, steps, "collective bytes");
  }
  r.collective_bytes_per_device =
      CheckedMul(r.collective_bytes_per_device, steps, "collective bytes");
  r.global_batch = CheckedMul(r.global_batch, steps, "batch");
  r.tokens = CheckedMul(r.tokens, steps, "tokens");
  r.model_flops *= static_cast<double>(steps);
  r.recompute_flops *= static_cast<double>(steps);
  for (auto& [key, value] : r.settings) {
    if (key == "global batch") value = std::to_string(r.global_batch);
  }
  r.settings.emplace_back("gradient_accumulation_steps", std::to_string(steps));
  r.notes.push_back(fmt::format(
      "gradient_accumulation_steps={}: {} microbatches of per_device_batch_size each, run in a "
      "scan (utils/gradient_accumulation.py): the step of one beside the gradient accumulator "
      "({:.1f} GiB, zeros like the parameters), every collective run {} times",
      steps, steps, static_cast<double>(r.accumulator_bytes) / (1 << 30), steps));
  SettleMemory(&r);
  return r;
}

}  // namespace shardtrace::model_internal
