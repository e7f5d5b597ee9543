// `shardtrace trace` and `shardtrace dump`.
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "config/case_config.h"
#include "config/override_file.h"
#include "emit/dot_graph.h"
#include "emit/maxtext_dump.h"
#include "emit/mermaid_flow.h"
#include "emit/step_text.h"
#include "emit/trace_json.h"
#include "emit/trace_table.h"
#include "io/npz.h"
#include "paths/moe_block.h"
#include "run/model_dump.h"
#include "run/run.h"
#include "util/error.h"
#include "util/progress.h"

namespace shardtrace {
namespace {

struct TraceOptions {
  CommonOptions common;
  std::string block = "moe";  // moe | mlp | shared
  bool numeric = false;
  uint64_t seed = 0;
  std::string golden;         // a golden case directory to take inputs and weights from
  std::string path = "auto";  // auto (what RoutedMoE selects) | masked_loop
  int threads = 0;            // numeric: 0 = every core, 1 = serial
  bool quiet = false;         // no progress line on stderr
  bool step = false;          // the training step: backward collectives and step memory
  int64_t budget_bytes = int64_t{2} << 30;  // numeric: what the run may hold (--max-memory)
};

std::vector<Warning> RunTraceCommand(const TraceOptions& options, std::ostream& out) {
  const CommonOptions& common = options.common;
  Progress progress(options.quiet);
  RunRequest request = SymbolicRequest(common.args, common.devices, ParseBlock(options.block));
  if (options.numeric) request.evaluation = Evaluation::kNumeric;
  request.masked_loop = options.path == "masked_loop";
  request.step = options.step;
  request.seed = options.seed;
  request.threads = options.threads;
  request.progress = &progress;
  request.budget_bytes = options.budget_bytes;
  // Only the table and json print per-tensor summaries.
  request.summaries = common.format != "dot" && common.format != "svg";
  // A golden case directory carries its own config.yml and the weights and inputs to run on.
  std::map<std::string, Array> arrays;
  if (!options.golden.empty()) {
    const std::string case_file = options.golden + "/config.yml";
    if (IsCaseConfig(case_file))
      request.args.insert(request.args.begin(), case_file);
    else
      request.case_config = OverridesFromYamlFile(case_file);
    request.arrays_source = options.golden + "/tensors.npz";
    arrays = ReadNpz(request.arrays_source, &progress);
    request.arrays = &arrays;
    request.evaluation = Evaluation::kNumeric;
  }
  const RunResult run = Run(request);
  const Trace& trace = run.trace;
  const StepResult* step = run.step ? &*run.step : nullptr;
  const TpuStepCollectives* tpu = run.tpu_step ? &*run.tpu_step : nullptr;
  const std::string text =
      common.format == "json"  ? TraceToJson(trace, run.spmd, step, tpu)
      : common.format == "dot" ? TraceToDot(trace)
      : common.format == "svg" ? TraceToSvg(trace)
      : common.format == "mermaid"
          ? MermaidFlow(trace, run.spmd)
          : TraceToTable(trace, run.spmd) + (step ? StepToText(trace, *step, tpu) : std::string());
  WriteOutput(common, text, out);
  return run.setup.warnings;
}

std::vector<Warning> RunDumpCommand(const CommonOptions& options, std::ostream& out) {
  const RunRequest request = SymbolicRequest(options.args, options.devices);
  const RunInputs in = LoadInputs(request);
  WriteOutput(options, DumpToMaxtextJson(DumpModel(request), in.config.revision().Title()), out);
  return in.warnings;
}

}  // namespace

Command AddTraceCommand(CLI::App& app) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* cmd =
      app.add_subcommand("trace", "run a MoE/MLP block and record every tensor and collective");
  AddCommon(cmd, options->common, {"table", "json", "dot", "svg", "mermaid"});
  AddBlock(cmd, options->block);
  cmd->add_option("--path", options->path,
                  "auto: the path RoutedMoE selects from the config; masked_loop: the "
                  "loop-over-experts reference")
      ->check(CLI::IsMember({"auto", "masked_loop"}))
      ->capture_default_str();
  cmd->add_flag("--numeric", options->numeric, "run with real numbers on simulated devices");
  cmd->add_option("--seed", options->seed,
                  "seed of the deterministic weights and inputs (--numeric)")
      ->check(SeedValidator());
  cmd->add_option("--threads", options->threads,
                  "numeric: threads simulating devices (0 = every core, 1 = serial)")
      ->check(ThreadsValidator());
  cmd->add_flag("--quiet", options->quiet, "no progress line on stderr");
  cmd->add_flag("--step", options->step,
                "the training step: also the backward pass's collectives, the gradients and the "
                "step's memory under remat_policy (docs/step.md)");
  AddMaxMemory(cmd, options->budget_bytes);
  cmd->add_option("--golden", options->golden,
                  "take inputs and weights from a golden case directory (implies --numeric)");
  cmd->footer(
      "Example: shardtrace trace model_name=deepseek3-671b --devices 256 "
      "ici_expert_parallelism=64");
  return {
      cmd, std::shared_ptr<CommonOptions>(options, &options->common),
      [options, cmd] {
        if (cmd->count("--golden") > 0 && options->golden.empty())
          Fail("--golden: expected a golden case directory, found an empty name");
        // A symbolic trace has no values: a numeric option alone would be ignored.
        for (const char* flag : {"--seed", "--threads", "--max-memory"})
          if (cmd->count(flag) > 0 && !options->numeric && options->golden.empty())
            Fail("{}: only a numeric run reads it; add --numeric (or --golden CASE_DIR)", flag);
        if (options->step && (options->common.format == "dot" || options->common.format == "svg" ||
                              options->common.format == "mermaid"))
          Fail("--step: the {} output draws the forward pass only; use --format table or json",
               options->common.format);
        return options->golden.empty() ? std::vector<std::string>()
                                       : std::vector<std::string>{options->golden};
      },
      [options](std::ostream& out) {
        return CommandOutcome{kExitOk, RunTraceCommand(*options, out)};
      }};
}

Command AddDumpCommand(CLI::App& app) {
  auto options = std::make_shared<CommonOptions>();
  CLI::App* cmd =
      app.add_subcommand("dump", "MaxText's debug_sharding activation dump (input_shardings.json)");
  AddCommon(cmd, *options, {"maxtext"});
  cmd->footer(
      "Example: shardtrace dump base.yml model_name=deepseek2-16b ici_expert_parallelism=4 "
      "--devices 16");
  return PlainCommand(cmd, options, options, &RunDumpCommand);
}

}  // namespace shardtrace
