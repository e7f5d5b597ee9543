#include "model/block_step.h"

#include <algorithm>
#include <set>

#include "run/run.h"
#include "spmd/step_model.h"
#include "spmd/tpu_collectives.h"
#include "util/error.h"

namespace shardtrace::model_internal {
namespace {

// The backward's peak as TPU's compiler writes the block, taken again over its schedule
// (measured on the TPU fixtures, docs/fit.md):
// - without a weight's whole unreduced gradient: TPU reduces it with an all-reduce-scatter
//   fused into the dot that produces it. Except where the fusion is refused (`unfused`:
//   spmd/tpu_collectives.h kUnfusedMinorDim, a bf16 share of the layout's minor dim under 512
//   bytes): that gradient is all-reduced whole (DeepSeek-V3 at fsdp 128);
// - without an activation fused into its elementwise readers (silu(w0) of silu(w0) * w1);
// - without a dot's operand once the dot's VJP has read it for the other operand's gradient,
//   before it writes the operand's own cotangent.
// The last two leave the MoE backward at the compiler's three [rows, mlp], three gathered
// expert kernels and three [rows, emb] buffers where the step model holds five, four and two
// (mixtral at expert 4: 2,400 MiB, the compiler's exactly, at its buffers' fullest moment).
int64_t TpuBackwardPeak(const RunResult& run, const StepResult& step,
                        const std::set<int>& unfused) {
  const StepMemory& m = step.memory;
  std::vector<int64_t> delta(m.backward_transient.size() + 1, 0);
  for (const StepRange& r : m.backward_ranges) {
    const StepBuffer& b = r.buffer;
    const bool weight_gradient =
        b.cotangent && !unfused.count(b.tensor) &&
        run.trace.tensors[static_cast<size_t>(b.tensor)].kind == TensorKind::kWeight;
    if (weight_gradient || r.fusible_activation) continue;
    const int lo = r.freed_before_cotangent ? r.lo + 1 : r.lo;
    if (lo > r.hi) continue;
    delta[static_cast<size_t>(lo)] += b.bytes;
    delta[static_cast<size_t>(r.hi) + 1] -= b.bytes;
  }
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < m.backward_transient.size(); ++i) {
    live += delta[i];
    peak = std::max(peak, live + m.backward_transient[i]);
  }
  return peak;
}

BlockFigures FiguresOf(const RunResult& run, const StepResult& step, const std::string& from,
                       bool tpu, const std::set<int>& unfused) {
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
    f.backward_peak_bytes =
        std::max(step.memory.forward_temporary_bytes, TpuBackwardPeak(run, step, unfused));
  }
  f.backward_peak_where = fmt::format("{} block backward (spmd/step_memory.h)", from);
  for (const CollectiveTotal& t : run.totals.collectives) {
    f.collectives.push_back({t.kind, t.axes, t.count, t.bytes_sent_per_device, false, from});
  }
  for (const StepCollective& c : step.backward) {
    if (c.bytes_per_device == 0) continue;
    const bool regather =
        c.recompute && c.kind == CollectiveKind::kAllGather && c.tensor >= 0 &&
        run.trace.tensors[static_cast<size_t>(c.tensor)].kind == TensorKind::kWeight;
    f.collectives.push_back({c.kind, c.axes, 1, c.bytes_per_device, false, from, regather});
  }
  return f;
}

// A run's key in a BlockCache: what decides its trace (the block, the device count, every
// argument but the remat policy's keys, which only the step analysis reads).
std::string CacheKey(const RunRequest& request) {
  std::string key = fmt::format("{}\n{}", static_cast<int>(request.block),
                                request.devices ? *request.devices : -1);
  for (const std::string& arg : request.args) {
    if (const size_t eq = arg.find('='); eq != std::string::npos && IsRematKey(arg.substr(0, eq))) {
      continue;
    }
    key += '\n';
    key += arg;
  }
  return key;
}

// `policy` as a block sees it: the names it saves or offloads that the block's trace tags
// (checkpoint_name), which alone decide its step analysis (spmd/step_memory.cc).
std::string InBlockPolicyKey(const RematPolicy& policy, const Trace& trace) {
  if (!policy.wrapped) return "unwrapped";
  std::string key = "wrapped";
  for (const auto* names : {&policy.saved, &policy.offloaded}) {
    key += names == &policy.saved ? "\nsaved:" : "\noffloaded:";
    for (const std::string& n : *names) {
      const bool tagged = std::any_of(trace.checkpoint_tags.begin(), trace.checkpoint_tags.end(),
                                      [&](const CheckpointTag& t) { return t.name == n; });
      if (tagged) key += n + ",";
    }
  }
  return key;
}

}  // namespace

BlockRuns RunBlocks(const RunRequest& base, const RunSetup& setup, const BlocksNeeded& needed,
                    bool tpu, BlockCache* cache) {
  BlockRuns out;
  const RematPolicy policy = RematPolicyOf(setup.config);
  const auto run = [&](Block block, const std::string& from) {
    RunRequest r = base;
    r.block = block;
    r.step = true;
    const std::string key = CacheKey(r);
    std::shared_ptr<const RunResult> shared = cache ? cache->Find(key) : nullptr;
    if (shared == nullptr) {
      auto fresh = std::make_shared<const RunResult>(RunPreparedSetup(r, setup));
      shared = cache ? cache->Store(key, std::move(fresh)) : std::move(fresh);
    }
    // The step for this config's own policy, on the shared forward run.
    const RunResult& forward = *shared;
    SHARDTRACE_CHECK(forward.step.has_value() && forward.tpu_step.has_value());
    const std::string policy_key = InBlockPolicyKey(policy, forward.trace);
    const bool own = InBlockPolicyKey(forward.step->policy, forward.trace) == policy_key;
    std::shared_ptr<const StepResult> step;
    if (own) {
      step = std::shared_ptr<const StepResult>(shared, &*forward.step);
    } else if (cache != nullptr) {
      const std::string step_key = key + "\n" + policy_key;
      step = cache->FindStep(step_key);
      if (step == nullptr) {
        step = cache->StoreStep(step_key, std::make_shared<const StepResult>(AnalyzeStep(
                                              forward.setup.mesh, forward.trace, forward.spmd, policy)));
      }
    } else {
      step = std::make_shared<const StepResult>(
          AnalyzeStep(forward.setup.mesh, forward.trace, forward.spmd, policy));
    }
    std::set<int> unfused;
    if (tpu) {
      // The collectives table counts GSPMD's plan; say what TPU's compiler writes otherwise.
      TpuLoweringOptions options;
      options.default_matmul_precision = setup.config.Str("matmul_precision") == "default";
      const TpuStepCollectives lowered =
          own ? *forward.tpu_step
              : LowerForTpu(forward.setup.mesh, forward.trace, forward.spmd, step.get(), options);
      for (const TpuCollective& c : lowered.backward) {
        if (c.rule == TpuRule::kUnfusedMinorDim) unfused.insert(c.tensor);
      }
      const std::string rewritten = RewriteSummary(lowered);
      if (!rewritten.empty())
        out.notes.push_back(fmt::format(
            "{} block: TPU's compiler writes some collectives otherwise than the table's plan "
            "({}; spmd/tpu_collectives.h, listed by `trace --step`)",
            from, rewritten));
    }
    return FiguresOf(forward, *step, from, tpu, unfused);
  };
  if (needed.moe) out.moe.push_back(run(Block::kMoe, "MoE"));
  if (needed.shared) out.shared.push_back(run(Block::kShared, "shared experts"));
  if (needed.mlp) out.mlp.push_back(run(Block::kMlp, "dense MLP"));
  return out;
}

}  // namespace shardtrace::model_internal
