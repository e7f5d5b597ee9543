// `shardtrace trace` and `shardtrace dump`.
#include "cli/commands.h"
#include "config/override_file.h"
#include "emit/dot_graph.h"
#include "emit/maxtext_dump.h"
#include "emit/mermaid_flow.h"
#include "emit/trace_json.h"
#include "emit/trace_table.h"
#include "io/npz.h"
#include "paths/moe_block.h"
#include "run/model_dump.h"
#include "run/run.h"
#include "util/error.h"
#include "util/progress.h"

namespace shardtrace {

void RunTraceCommand(const TraceOptions& options, std::ostream& out) {
  const CommonOptions& common = options.common;
  Progress progress(options.quiet);
  RunRequest request = SymbolicRequest(common.args, common.devices, ParseBlock(options.block));
  if (options.numeric) request.evaluation = Evaluation::kNumeric;
  request.masked_loop = options.path == "masked_loop";
  request.seed = options.seed;
  request.threads = options.threads;
  request.progress = &progress;
  request.budget_bytes = options.budget_bytes;
  // Only the table and json print per-tensor summaries.
  request.summaries = common.format != "dot" && common.format != "svg";
  // A golden case directory carries its own config.yml and the weights and inputs to run on.
  std::map<std::string, Array> arrays;
  if (!options.golden.empty()) {
    request.case_overrides = OverridesFromYamlFile(options.golden + "/config.yml");
    request.arrays_source = options.golden + "/tensors.npz";
    arrays = ReadNpz(request.arrays_source, &progress);
    request.arrays = &arrays;
    request.evaluation = Evaluation::kNumeric;
  }
  const RunResult run = Run(request);
  const Trace& trace = run.trace;
  const std::string text = common.format == "json"      ? TraceToJson(trace, run.spmd)
                           : common.format == "dot"     ? TraceToDot(trace)
                           : common.format == "svg"     ? TraceToSvg(trace)
                           : common.format == "mermaid" ? MermaidFlow(trace, run.spmd)
                                                        : TraceToTable(trace, run.spmd);
  WriteOutput(common, text, out);
}

void RunDumpCommand(const CommonOptions& options, std::ostream& out) {
  const RunRequest request = SymbolicRequest(options.args, options.devices);
  WriteOutput(options,
              DumpToMaxtextJson(DumpModel(request), LoadInputs(request).config.revision().Title()),
              out);
}

}  // namespace shardtrace
