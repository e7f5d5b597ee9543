// The one pipeline every command and test runs a block through: config files and overrides
// -> Config and Mesh -> MoeSetup -> parameters -> the tracer's Trace (paths/) -> the SPMD
// model's analysis -> totals. Prepare stops after the setup (commands that only resolve a
// config); Run goes to the end. The RunResult is plain data; nothing after Run changes it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "config/config.h"
#include "config/run_inputs.h"
#include "ir/captures.h"
#include "ir/trace.h"
#include "numeric/array.h"
#include "paths/moe_setup.h"
#include "run/run_request.h"
#include "shard/mesh.h"
#include "spmd/spmd_result.h"
#include "spmd/step_model.h"
#include "spmd/tpu_collectives.h"
#include "spmd/trace_totals.h"
#include "util/warnings.h"

namespace shardtrace {

// The config and mesh a request resolves to, and the MoE setup MaxText derives from them.
struct RunSetup {
  Config config;
  Mesh mesh;
  MoeSetup setup;
  // What the config and mesh found legal but suspicious (RunInputs::warnings): the CLI prints
  // them once per command. An Error thrown by the run after them carries them too.
  std::vector<Warning> warnings;
};

struct RunResult {
  RunSetup setup;
  Trace trace;
  // What XLA's SPMD partitioner adds to `trace` (spmd/spmd_analysis.h): per tensor the
  // propagated spec and per-device shape, the implied collectives, the memory estimate.
  SpmdResult spmd;
  // Global numeric arrays by golden-format name (empty for a symbolic run).
  Captures captures;
  TraceTotals totals;
  // RunRequest::step: the training step's backward collectives, gradients and memory
  // (spmd/step_model.h), beside the forward; unset for a forward run.
  std::optional<StepResult> step;
  // A training step's loss and gradients (RunRequest::cotangent), beside the forward trace.
  std::optional<Gradients> gradients;
  // RunRequest::step: the forward's and the step's collectives as TPU's compiler writes them
  // (spmd/tpu_collectives.h), beside `step`.
  std::optional<TpuStepCollectives> tpu_step;
};

// The config and mesh alone (`explain` and `compare-dump` resolve axes of any config).
RunInputs LoadInputs(const RunRequest& request);
// Config, mesh and MoE setup: what `config` prints and every run starts from.
RunSetup Prepare(const RunRequest& request);
// Prepare on inputs already loaded (config/run_inputs.h WithMesh) for the request's args.
RunSetup Prepare(RunInputs inputs);
RunResult Run(const RunRequest& request);

// Run on a setup Prepare already made for the same arguments: several blocks of one config
// (fit's MoE, shared-expert and MLP layers) load and validate the config once. REQUIRES
// `setup` is Prepare(request) for a request with the same args, devices and case config.
RunResult RunPreparedSetup(const RunRequest& request, RunSetup setup);

}  // namespace shardtrace
