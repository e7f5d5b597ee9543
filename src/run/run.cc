#include "run/run.h"

#include "config/run_inputs.h"
#include "paths/moe_params.h"
#include "shard/axis_rules.h"
#include "spmd/spmd_analysis.h"
#include "spmd/step_model.h"
#include "spmd/tpu_collectives.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// The case's keys first, so every override the user typed still applies after them
// (SplitArgs keeps files apart and overrides in order).
std::vector<std::string> Arguments(const RunRequest& request) {
  std::vector<std::string> args = request.case_config.overrides;
  args.insert(args.end(), request.args.begin(), request.args.end());
  return args;
}

MoeParams Params(const RunRequest& request, const RunSetup& s) {
  const int n_act = static_cast<int>(s.config.StrList("mlp_activations").size());
  if (request.arrays == nullptr)
    return MakeParams(s.setup, n_act, request.numeric(), request.seed, request.budget_bytes);
  MoeParams params = ParamsFromArrays(s.setup, n_act, *request.arrays, request.arrays_source,
                                      s.config.Bool("routed_bias"), s.config.Bool("mlp_bias"));
  // A block the arrays do not hold (the dense MlpBlock of a MoE case, the experts of a dense
  // case) runs on seeded weights, with the arrays' inputs.
  if (request.block == Block::kMlp ? !params.dense : !params.wi_0.numeric()) {
    MoeParams seeded = MakeParams(s.setup, n_act, true, request.seed, request.budget_bytes);
    seeded.inputs = params.inputs;
    if (params.dense) seeded.dense = params.dense;
    params = std::move(seeded);
  }
  return params;
}

// The rest of Run once the setup is made.
RunResult RunPrepared(const RunRequest& request, RunSetup s) {
  if (request.step && s.setup.inference)
    Fail(
        "--step: model_call_mode=inference traces a forward pass only; a training step needs "
        "model_call_mode other than inference");
  const RematPolicy policy = request.step ? RematPolicyOf(s.config) : RematPolicy{};
  RunOptions options;
  options.numeric = request.numeric() || request.arrays != nullptr;
  options.masked_loop = request.masked_loop;
  options.threads = request.threads;
  options.budget_bytes = request.budget_bytes;
  options.summaries = request.summaries;
  options.progress = request.progress;
  options.cotangent = request.cotangent;
  options.cotangent_source = request.arrays_source;
  // The budget counts every simulated device's copy; checked before the parameters are
  // drawn, as drawing 1.6 GB of kernels for one device took 16-36 s before RunBlock's check
  // refused them for two.
  if (options.numeric) CheckNumericSize(s.setup, s.mesh.num_devices(), options.budget_bytes);
  BlockRun run = RunBlock(s.config, s.mesh, s.setup, Params(request, s), request.block, options);
  // The decoder layer's constraint on the normed hidden states, which the block receives.
  const LogicalAxes arrival =
      LogicalNames({"activation_batch", "activation_norm_length", "activation_embed"});
  SpmdResult spmd = AnalyzeSpmd(
      s.mesh, run.trace, ResolveSpec(arrival, s.config.logical_axis_rules(), &s.mesh));
  const TraceTotals totals = ComputeTotals(run.trace, spmd);
  std::optional<StepResult> step;
  std::optional<TpuStepCollectives> tpu_step;
  if (request.step) {
    step = AnalyzeStep(s.mesh, run.trace, spmd, policy);
    TpuLoweringOptions tpu;
    tpu.default_matmul_precision = s.config.Str("matmul_precision") == "default";
    tpu_step = LowerForTpu(s.mesh, run.trace, spmd, &*step, tpu);
  }
  return {std::move(s), std::move(run.trace), std::move(spmd),          std::move(run.captures),
          totals,       std::move(step),      std::move(run.gradients), std::move(tpu_step)};
}

}  // namespace

RunSetup Prepare(const RunRequest& request) { return Prepare(LoadInputs(request)); }

RunSetup Prepare(RunInputs in) {
  MoeSetup setup = WarnedBefore(in.warnings, [&] { return MakeMoeSetup(in.config, in.mesh); });
  return {std::move(in.config), std::move(in.mesh), std::move(setup), std::move(in.warnings)};
}

RunInputs LoadInputs(const RunRequest& request) {
  return LoadRunInputs(Arguments(request), request.devices, request.case_config.warnings,
                       request.yaml_cache);
}

RunResult Run(const RunRequest& request) { return RunPreparedSetup(request, Prepare(request)); }

RunResult RunPreparedSetup(const RunRequest& request, RunSetup setup) {
  const std::vector<Warning> warnings = setup.warnings;  // `setup` moves into the run
  return WarnedBefore(warnings, [&] { return RunPrepared(request, std::move(setup)); });
}

}  // namespace shardtrace
