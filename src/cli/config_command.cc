// `shardtrace config`: the resolved MoE-relevant config, the path RoutedMoE takes and the mesh.
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "config/run_inputs.h"
#include "emit/config_report.h"
#include "run/run.h"

namespace shardtrace {
namespace {

std::vector<Warning> RunConfigCommand(const CommonOptions& options, std::ostream& out) {
  const RunSetup in = Prepare(SymbolicRequest(options.args, options.devices));
  const std::vector<std::string> overrides = SplitArgs(options.args).overrides;
  WriteOutput(options,
              options.format == "json" ? ConfigToJson(in, overrides) : ConfigToText(in, overrides),
              out);
  return in.warnings;
}

}  // namespace

Command AddConfigCommand(CLI::App& app) {
  auto options = std::make_shared<CommonOptions>();
  CLI::App* cmd = app.add_subcommand("config", "the resolved MoE-relevant config and the mesh");
  AddCommon(cmd, *options, {"text", "json"});
  cmd->footer(
      "Example: shardtrace config model_name=mixtral-8x7b ici_expert_parallelism=4 --devices 8");
  return PlainCommand(cmd, options, options, &RunConfigCommand);
}

}  // namespace shardtrace
