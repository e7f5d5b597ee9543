#include "plan/step_time.h"

#include <fmt/format.h>

#include <algorithm>

namespace shardtrace {
namespace {

bool Overlaps(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kPsumScatter;
}

}  // namespace

std::string StepTimeAssumptions() {
  return "step time = max(compute, overlapped communication) + exposed communication; compute = "
         "the step's FLOPs (6 x tokens x the parameters each token uses, top-k experts, causal "
         "attention, plus what remat re-runs) at the chip's peak bf16 FLOP/s times its "
         "matmul_efficiency (fitted to one published run per chip, docs/plan.md); a collective = its "
         "bytes per device over 2 ICI links (a ring, one link each way) or the host's DCN share; "
         "weight all-gathers and gradient reduce-scatters overlap compute except the first "
         "layer's share, every other collective is exposed; constants: the chip table";
}

StepTime EstimateStepTime(const FitResult& fit) {
  StepTime t;
  const Chip& chip = fit.target.chip;
  const double devices = static_cast<double>(fit.target.devices());
  if (chip.peak_bf16_flops <= 0 || devices <= 0) return t;
  t.compute_seconds = (fit.model_flops + fit.recompute_flops) / devices /
                      (chip.peak_bf16_flops * chip.matmul_efficiency);
  int64_t layers = 0;
  for (const LayerStack& s : fit.stacks) layers += s.layers;
  const double first_share = layers > 0 ? 1.0 / static_cast<double>(layers) : 1.0;
  const double ici = 2.0 * chip.ici_link_bandwidth;
  const double dcn = chip.dcn_bandwidth_per_host / static_cast<double>(std::max<int64_t>(1, chip.devices_per_host));
  for (const StepCollectiveTotal& c : fit.collectives) {
    const double seconds = static_cast<double>(c.bytes_per_device) / (c.dcn ? dcn : ici);
    if (Overlaps(c.kind) && !c.dcn) {
      t.overlapped_comm_seconds += seconds * (1 - first_share);
      t.exposed_comm_seconds += seconds * first_share;
    } else {
      t.exposed_comm_seconds += seconds;
    }
    t.bytes_by_axis[fmt::format("{}", fmt::join(c.axes, " x "))] += c.bytes_per_device;
  }
  t.step_seconds = std::max(t.compute_seconds, t.overlapped_comm_seconds) + t.exposed_comm_seconds;
  if (t.step_seconds > 0) {
    t.mfu = fit.model_flops / devices / (t.step_seconds * chip.peak_bf16_flops);
    t.tokens_per_second_per_device = static_cast<double>(fit.tokens) / devices / t.step_seconds;
  }
  return t;
}

}  // namespace shardtrace
