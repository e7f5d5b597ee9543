// `shardtrace diff [A.yml] [B.yml] [k=v ...] [--a k=v ...] [--b k=v ...]`: two config files
// (common overrides apply to both) or one config (or the embedded base) with per-side
// overrides. Exit status like diff(1): 0 same sharding, 1 different.
#include <fmt/ranges.h>

#include "check/trace_diff.h"
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "emit/trace_diff_report.h"
#include "util/error.h"

namespace shardtrace {
namespace {

struct DiffOptions {
  CommonOptions common;        // args: up to two CONFIG files (A, B) and common key=value
  std::vector<std::string> a;  // key=value for side A only
  std::vector<std::string> b;  // key=value for side B only
  std::string block = "moe";
};

CommandOutcome RunDiffCommand(const DiffOptions& options, std::ostream& out) {
  std::vector<std::string> files, common;
  for (const std::string& a : options.common.args)
    (a.find('=') == std::string::npos ? files : common).push_back(a);
  if (files.size() > 2)
    Fail("diff takes at most two CONFIG files (A and B), got {}: {}", files.size(),
         fmt::format("{}", fmt::join(files, ", ")));
  for (const auto* side : {&options.a, &options.b})
    for (const std::string& o : *side)
      if (o.find('=') == std::string::npos || o.front() == '=')
        Fail("--{} {}: expected key=value", side == &options.a ? "a" : "b", o);
  DiffRequest request;
  request.block = options.block;
  request.devices = options.common.devices;
  if (!files.empty()) {
    request.args_a.push_back(files.front());
    request.args_b.push_back(files.back());
  }
  request.args_a.insert(request.args_a.end(), common.begin(), common.end());
  request.args_b.insert(request.args_b.end(), common.begin(), common.end());
  request.args_a.insert(request.args_a.end(), options.a.begin(), options.a.end());
  request.args_b.insert(request.args_b.end(), options.b.begin(), options.b.end());
  const TraceDiff diff = DiffConfigs(request);
  const std::string& format = options.common.format;
  WriteOutput(options.common,
              format == "json"       ? TraceDiffToJson(diff)
              : format == "markdown" ? TraceDiffToMarkdown(diff)
                                     : TraceDiffToText(diff),
              out);
  return {diff.same() ? kExitOk : kExitMismatch, diff.warnings};
}

}  // namespace

Command AddDiffCommand(CLI::App& app) {
  auto options = std::make_shared<DiffOptions>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "how sharding, collectives and per-device bytes differ between two configs");
  AddCommon(cmd, options->common, {"text", "markdown", "json"});
  cmd->add_option("--a", options->a, "key=value for side A only (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--b", options->b, "key=value for side B only (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  AddBlock(cmd, options->block);
  cmd->footer(
      "A.yml and B.yml are two configs (key=value applies to both), or one config (or none: "
      "the embedded base.yml) with --a/--b overrides. Exit 0 same sharding, 1 different.\n"
      "Example: shardtrace diff model_name=mixtral-8x7b --devices 8 --a "
      "ici_expert_parallelism=1 --b ici_expert_parallelism=4");
  return {cmd, std::shared_ptr<CommonOptions>(options, &options->common),
          [] { return std::vector<std::string>(); },
          [options](std::ostream& out) { return RunDiffCommand(*options, out); }};
}

}  // namespace shardtrace
