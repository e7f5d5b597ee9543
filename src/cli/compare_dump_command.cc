// `shardtrace compare-dump DUMP_DIR [CONFIG.yml ...] [key=value ...]`: reads a MaxText
// sharding_info directory, traces the run its name and mesh describe (model, overrides,
// custom_mesh_and_rule, device count; the user's own arguments win), and reports tensor by
// tensor. Exit status 0 when everything agrees, 1 on a difference.
#include <algorithm>

#include "check/dump_comparison.h"
#include "check/sharding_dump.h"
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "emit/dump_comparison_report.h"

namespace shardtrace {
namespace {

struct CompareDumpOptions {
  std::string dump_dir;  // a MaxText sharding_info directory
  CommonOptions common;  // args: CONFIG.yml / key=value over what the dump's name says
};

std::string KeyOf(const std::string& override_arg) {
  return override_arg.substr(0, override_arg.find('='));
}

CommandOutcome RunCompareDumpCommand(const CompareDumpOptions& options, std::ostream& out) {
  const ShardingDump dump = ReadShardingDump(options.dump_dir);
  const InferredRun inferred = InferRun(dump);
  std::vector<std::string> files, user_overrides, args;
  for (const std::string& a : options.common.args)
    (a.find('=') == std::string::npos ? files : user_overrides).push_back(a);
  std::vector<std::string> from_dump;
  if (!inferred.model_name.empty()) from_dump.push_back("model_name=" + inferred.model_name);
  if (!inferred.rule.empty() && inferred.rule != "default")
    from_dump.push_back("custom_mesh_and_rule=" + inferred.rule);
  from_dump.insert(from_dump.end(), inferred.overrides.begin(), inferred.overrides.end());
  // A case directory's dump runs the case's own config unless the user gives one.
  if (files.empty() && inferred.case_config) files.push_back(*inferred.case_config);
  args = files;
  for (const std::string& o : from_dump) {
    const bool overridden = std::any_of(user_overrides.begin(), user_overrides.end(),
                                        [&](const std::string& u) { return KeyOf(u) == KeyOf(o); });
    if (!overridden) args.push_back(o);
  }
  args.insert(args.end(), user_overrides.begin(), user_overrides.end());
  const std::optional<int64_t> devices =
      options.common.devices ? options.common.devices : inferred.devices;
  DumpComparison comparison = CompareWithDump(dump, SymbolicRequest(args, devices));
  comparison.dump_dir = options.dump_dir;
  comparison.traced_args = args;
  const std::string& format = options.common.format;
  WriteOutput(options.common,
              format == "json"       ? DumpComparisonToJson(comparison)
              : format == "markdown" ? DumpComparisonToMarkdown(comparison)
                                     : DumpComparisonToText(comparison),
              out);
  return {comparison.agrees() ? kExitOk : kExitMismatch, comparison.warnings};
}

}  // namespace

Command AddCompareDumpCommand(CLI::App& app) {
  auto options = std::make_shared<CompareDumpOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare-dump", "compare a MaxText sharding_info dump with shardtrace's trace of that run");
  cmd->add_option("dump_dir", options->dump_dir,
                  "MaxText sharding_info directory (named_shardings.json, logical_shardings.json, "
                  "input_shardings.json)")
      ->required();
  AddCommon(cmd, options->common, {"text", "markdown", "json"});
  cmd->footer(
      "Model, overrides and device count come from the dump's directory name and mesh; "
      "CONFIG.yml, key=value and --devices override them. Exit 0 all agree, 1 a difference.\n"
      "Example: shardtrace compare-dump "
      "maxtext/tests/utils/sharding_info/gpt-oss-20b/tpu7x-16/slice_1/"
      "rule_default_ici_fsdp_parallelism=-1_ici_expert_parallelism=2 "
      "maxtext/src/maxtext/configs/base.yml");
  return {cmd, std::shared_ptr<CommonOptions>(options, &options->common),
          [options] { return std::vector<std::string>{options->dump_dir}; },
          [options](std::ostream& out) { return RunCompareDumpCommand(*options, out); }};
}

}  // namespace shardtrace
