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
#include "trace/moe_block.h"
#include "util/error.h"

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
  MoeParams params = MakeParams(setup, n_act, numeric, options.seed);
  if (!options.golden.empty()) {
    const std::string npz = options.golden + "/tensors.npz";
    params = ParamsFromArrays(setup, n_act, ReadNpz(npz), npz, in.config.Bool("routed_bias"),
                              in.config.Bool("mlp_bias"));
  }
  const BlockRun run = RunBlock(in.config, in.mesh, setup, params, ParseBlock(options.block),
                                numeric, options.path == "masked_loop");
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
