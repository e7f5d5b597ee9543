// `shardtrace trace` and `shardtrace dump`.
#include "cli/commands.h"
#include "config/override_file.h"
#include "config/run_inputs.h"
#include "emit/dot_graph.h"
#include "emit/maxtext_dump.h"
#include "emit/mermaid_flow.h"
#include "emit/trace_json.h"
#include "emit/trace_table.h"
#include "io/npz.h"
#include "paths/moe_block.h"
#include "util/error.h"
#include "util/progress.h"

namespace shardtrace {

void RunTraceCommand(const TraceOptions& options, std::ostream& out) {
  CommonOptions common = options.common;
  // A golden case directory carries its own config.yml: its overrides go first.
  if (!options.golden.empty()) {
    const std::vector<std::string> golden_args =
        OverridesFromYamlFile(options.golden + "/config.yml");
    common.args.insert(
        common.args.begin() +
            (common.args.empty() || common.args[0].find('=') != std::string::npos ? 0 : 1),
        golden_args.begin(), golden_args.end());
  }
  const RunInputs in = LoadRunInputs(common.args, common.devices);
  const MoeSetup setup = MakeMoeSetup(in.config, in.mesh);
  const bool numeric = options.numeric || !options.golden.empty();
  const int n_act = static_cast<int>(in.config.StrList("mlp_activations").size());
  const Block block = ParseBlock(options.block);
  Progress progress(options.quiet);
  MoeParams params;
  if (options.golden.empty()) {
    params = MakeParams(setup, n_act, numeric, options.seed, options.budget_bytes);
  } else {
    const std::string npz = options.golden + "/tensors.npz";
    params = ParamsFromArrays(setup, n_act, ReadNpz(npz, &progress), npz,
                              in.config.Bool("routed_bias"), in.config.Bool("mlp_bias"));
    // A block the case does not hold (the dense MlpBlock of a MoE case, the experts of a
    // dense case) runs on seeded weights, with the case's inputs.
    if (block == Block::kMlp ? !params.dense : !params.wi_0.numeric()) {
      MoeParams seeded = MakeParams(setup, n_act, true, options.seed, options.budget_bytes);
      seeded.inputs = params.inputs;
      if (params.dense) seeded.dense = params.dense;
      params = std::move(seeded);
    }
  }
  RunOptions run_options;
  run_options.numeric = numeric;
  run_options.masked_loop = options.path == "masked_loop";
  run_options.threads = options.threads;
  run_options.budget_bytes = options.budget_bytes;
  run_options.progress = &progress;
  // Only the table and json print per-tensor summaries.
  run_options.summaries = common.format != "dot" && common.format != "svg";
  const BlockRun run = RunBlock(in.config, in.mesh, setup, params, block, run_options);
  const Trace& trace = run.trace;
  const std::string text = common.format == "json"      ? TraceToJson(trace)
                           : common.format == "dot"     ? TraceToDot(trace)
                           : common.format == "svg"     ? TraceToSvg(trace)
                           : common.format == "mermaid" ? MermaidFlow(trace)
                                                        : TraceToTable(trace);
  WriteOutput(common, text, out);
}

void RunDumpCommand(const CommonOptions& options, std::ostream& out) {
  const RunInputs in = LoadRunInputs(options.args, options.devices);
  WriteOutput(options, DumpToMaxtextJson(DumpModel(in.config, in.mesh)), out);
}

}  // namespace shardtrace
