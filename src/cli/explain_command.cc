// `shardtrace explain`: one logical-axes tuple resolved rule by rule.
#include <sstream>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "emit/explain_report.h"
#include "run/run.h"
#include "shard/sharding.h"
#include "util/error.h"

namespace shardtrace {
namespace {

struct ExplainOptions {
  CommonOptions common;
  std::string axes;
  std::string shape;
  std::string dtype;
};

Shape ParseShape(const std::string& text, size_t rank) {
  Shape shape;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      shape.push_back(v);
    } catch (const std::exception&) {
      Fail("--shape {}: '{}' is not a positive integer", text, item);
    }
  }
  if (shape.size() != rank)
    Fail("--shape {} has {} dims but --axes names {}", text, shape.size(), rank);
  return shape;
}

std::vector<Warning> RunExplainCommand(const ExplainOptions& options, std::ostream& out) {
  const RunInputs in = LoadInputs(SymbolicRequest(options.common.args, options.common.devices));
  if (options.axes.find_first_not_of(" ,()") == std::string::npos)
    Fail("--axes '{}': expected logical axis names separated by commas, e.g. exp,embed_moe,mlp_moe",
         options.axes);
  const LogicalAxes axes = ParseLogicalAxes(options.axes);
  const Resolution res = ResolveLogicalAxes(axes, in.config.logical_axis_rules(), &in.mesh);
  std::optional<Sharding> sharding;
  if (!options.shape.empty()) {
    const DType dtype =
        ParseDType(options.dtype.empty() ? in.config.Str("dtype") : options.dtype, "--dtype");
    sharding =
        ShardTensor("--shape", ParseShape(options.shape, axes.size()), dtype, res.spec, in.mesh);
  }
  const AxesExplanation explanation{axes, res, in.mesh.ToString(), sharding};
  WriteOutput(
      options.common,
      options.common.format == "json" ? ExplainToJson(explanation) : ExplainToText(explanation),
      out);
  return in.warnings;
}

}  // namespace

Command AddExplainCommand(CLI::App& app) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* cmd =
      app.add_subcommand("explain", "resolve logical axes to a PartitionSpec, rule by rule");
  AddCommon(cmd, options->common, {"text", "json"});
  cmd->add_option("--axes", options->axes,
                  "logical axes, e.g. exp,embed_moe,mlp_moe (None = unnamed)")
      ->required();
  cmd->add_option("--shape", options->shape, "global shape, e.g. 64,2048,1408");
  cmd->add_option("--dtype", options->dtype, "dtype for bytes per device (default: config dtype)");
  cmd->footer(
      "Example: shardtrace explain --axes exp,embed_moe,mlp_moe --shape 64,2048,1408 "
      "ici_expert_parallelism=2 --devices 8");
  return PlainCommand(cmd, options, std::shared_ptr<CommonOptions>(options, &options->common),
                      &RunExplainCommand);
}

}  // namespace shardtrace
