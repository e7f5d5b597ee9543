// `shardtrace plan`: the meshes and knobs of a model on a slice, each fitted and its step
// time estimated, ranked (plan/plan.h).
#include <fmt/format.h>

#include <optional>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "emit/plan_report.h"
#include "io/input_file.h"
#include "pages/visualization_pages.h"
#include "plan/plan.h"
#include "util/error.h"
#include "util/progress.h"

namespace shardtrace {
namespace {

struct PlanOptions {
  CommonOptions common;
  std::vector<std::string> vary;  // KEY=v1,v2,...
  std::string axes;  // --axes a,b,c or all
  int top = 10;
  int64_t max_configs = kDefaultMaxConfigs;
  std::string hardware;
  bool quiet = false;
};

std::pair<std::string, std::vector<std::string>> ParseVary(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 >= text.size()) {
    Fail("--vary '{}': expected KEY=v1,v2,... (e.g. --vary per_device_batch_size=2,4,8)", text);
  }
  std::vector<std::string> values;
  size_t start = eq + 1;
  while (true) {
    const size_t comma = text.find(',', start);
    values.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {text.substr(0, eq), values};
}

// The shell line that reproduces an HTML report, shown under its title.
std::string CommandLine(const PlanOptions& options) {
  std::vector<std::string> words = {"shardtrace", "plan"};
  words.insert(words.end(), options.common.args.begin(), options.common.args.end());
  for (const std::string& v : options.vary) words.push_back("--vary " + v);
  if (!options.axes.empty()) words.push_back("--axes " + options.axes);
  if (options.top != 10) words.push_back(fmt::format("--top {}", options.top));
  if (options.max_configs != kDefaultMaxConfigs) {
    words.push_back(fmt::format("--max-configs {}", options.max_configs));
  }
  if (!options.hardware.empty()) words.push_back("--hardware " + options.hardware);
  words.push_back("--format html");
  return ShellLine(words);
}

std::vector<Warning> RunPlanCommand(const PlanOptions& options, std::ostream& out) {
  if (options.common.devices) {
    Fail("--devices: plan searches a compile_topology's slice; give compile_topology=NAME");
  }
  PlanRequest request;
  request.args = options.common.args;
  for (const std::string& v : options.vary) request.vary.push_back(ParseVary(v));
  if (!options.axes.empty()) {
    for (size_t start = 0;;) {
      const size_t comma = options.axes.find(',', start);
      const std::string axis = options.axes.substr(start, comma - start);
      if (axis.empty()) Fail("--axes '{}': expected AXIS,AXIS,... or all", options.axes);
      request.axes.push_back(axis);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  request.top = options.top;
  request.max_configs = options.max_configs;
  request.hardware = ReadHardwareFile(options.hardware);
  Progress progress(options.quiet);
  request.progress = &progress;
  const PlanResult plan = Plan(request);
  const std::string& format = options.common.format;
  WriteOutput(options.common,
              format == "json"   ? PlanToJson(plan, options.top)
              : format == "html" ? PlanToHtml(plan, options.top, CommandLine(options))
                                 : PlanToText(plan, options.top),
              out);
  return plan.warnings;
}

}  // namespace

Command AddPlanCommand(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "the best meshes and knobs for a model on a slice, each fitted, ranked by step time");
  AddCommon(cmd, options->common, {"text", "json", "html"});
  cmd->add_option("--vary", options->vary,
                  "KEY=v1,v2,...: also try these values of a key (repeatable)");
  cmd->add_option("--axes", options->axes,
                  "AXIS,AXIS,... or all: the mesh axes to factorize the devices over (default "
                  "data,fsdp,tensor,expert)");
  cmd->add_option("--top", options->top, "how many fitting configs to list (default 10)");
  cmd->add_option("--max-configs", options->max_configs,
                  fmt::format("refuse a search space larger than this (default {})",
                              kDefaultMaxConfigs));
  AddHardware(cmd, options->hardware);
  cmd->add_flag("--quiet", options->quiet, "no progress line on stderr");
  cmd->footer(
      "Example: shardtrace plan model_name=deepseek3-671b compile_topology=v5p-256 "
      "compile_topology_num_slices=1 max_target_length=8192 --top 5");
  return ReportCommand(cmd, options, std::shared_ptr<CommonOptions>(options, &options->common),
                       &RunPlanCommand);
}

}  // namespace shardtrace
