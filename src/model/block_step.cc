#include "model/block_step.h"

#include <algorithm>

#include "run/run.h"
#include "util/error.h"

namespace shardtrace::model_internal {
namespace {

// TPU reduces a weight's gradient with an all-reduce-scatter fused into the dot that
// produces it (measured on the TPU fixtures, docs/fit.md): the whole unreduced gradient the
// block model holds at its peak never lives in HBM there.
int64_t WholeWeightGradientsAtPeak(const RunResult& run) {
  int64_t bytes = 0;
  for (const StepBuffer& b : run.step->memory.at_peak) {
    if (b.cotangent && run.trace.tensors[static_cast<size_t>(b.tensor)].kind == TensorKind::kWeight) {
      bytes += b.bytes;
    }
  }
  return bytes;
}

BlockFigures FiguresOf(const RunResult& run, const std::string& from, bool tpu) {
  SHARDTRACE_CHECK(run.step.has_value());
  const StepResult& step = *run.step;
  BlockFigures f;
  for (const SavedResidual& s : step.memory.saved) {
    if (s.offloaded) continue;
    const std::string& tensor = run.trace.tensors[static_cast<size_t>(s.tensor)].name;
    f.kept.push_back({s.name.empty() ? tensor : s.name, s.bytes,
                      fmt::format("{} of the {} block", tensor, from)});
  }
  f.offloaded_bytes = step.memory.offloaded_bytes;
  f.backward_peak_bytes = step.memory.peak_temporary_bytes();
  if (tpu) {
    f.backward_peak_bytes = std::max(step.memory.forward_temporary_bytes,
                                     step.memory.backward_temporary_bytes -
                                         WholeWeightGradientsAtPeak(run));
  }
  f.backward_peak_where = fmt::format("{} block backward (spmd/step_memory.h)", from);
  for (const CollectiveTotal& t : run.totals.collectives) {
    f.collectives.push_back({t.kind, t.axes, t.count, t.bytes_sent_per_device, false, from});
  }
  for (const StepCollective& c : step.backward) {
    if (c.bytes_per_device == 0) continue;
    f.collectives.push_back({c.kind, c.axes, 1, c.bytes_per_device, false, from});
  }
  return f;
}

}  // namespace

BlockRuns RunBlocks(const RunRequest& base, const RunSetup& setup, const BlocksNeeded& needed,
                    bool tpu) {
  BlockRuns out;
  const auto run = [&](Block block, const std::string& from) {
    RunRequest r = base;
    r.block = block;
    r.step = true;
    return FiguresOf(RunPreparedSetup(r, setup), from, tpu);
  };
  if (needed.moe) out.moe.push_back(run(Block::kMoe, "MoE"));
  if (needed.shared) out.shared.push_back(run(Block::kShared, "shared experts"));
  if (needed.mlp) out.mlp.push_back(run(Block::kMlp, "dense MLP"));
  return out;
}

}  // namespace shardtrace::model_internal
