// `shardtrace fit`: whether the whole training step of a model fits on a slice, per device
// (model/whole_step.h), against MaxText's compile_topology or --devices N --hbm GIB.
#include <fmt/format.h>

#include <optional>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "emit/fit_report.h"
#include "io/input_file.h"
#include "model/whole_step.h"
#include "pages/visualization_pages.h"

namespace shardtrace {
namespace {

struct FitOptions {
  CommonOptions common;
  std::optional<double> hbm_gib;
  std::optional<std::string> chip;
  std::string hardware;  // --hardware FILE
};

// The shell line that reproduces an HTML report, shown under its title.
std::string CommandLine(const FitOptions& options) {
  std::vector<std::string> words = {"shardtrace", "fit"};
  words.insert(words.end(), options.common.args.begin(), options.common.args.end());
  if (options.common.devices) words.push_back(fmt::format("--devices {}", *options.common.devices));
  if (options.hbm_gib) words.push_back(fmt::format("--hbm {:g}", *options.hbm_gib));
  if (options.chip) words.push_back("--chip " + *options.chip);
  if (!options.hardware.empty()) words.push_back("--hardware " + options.hardware);
  words.push_back("--format html");
  return ShellLine(words);
}

std::vector<Warning> RunFitCommand(const FitOptions& options, std::ostream& out) {
  FitRequest request;
  request.args = options.common.args;
  request.devices = options.common.devices;
  request.hbm_gib = options.hbm_gib;
  request.chip = options.chip;
  request.hardware = ReadHardwareFile(options.hardware);
  const FitResult fit = Fit(request);
  const std::string& format = options.common.format;
  WriteOutput(options.common,
              format == "json"   ? FitToJson(fit)
              : format == "html" ? FitToHtml(fit, CommandLine(options))
                                 : FitToText(fit),
              out);
  return fit.warnings;
}

}  // namespace

Command AddFitCommand(CLI::App& app) {
  auto options = std::make_shared<FitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "fit", "whether the whole training step fits on a slice (compile_topology=), per device");
  AddCommon(cmd, options->common, {"text", "json", "html"});
  // Its range is checked where it is used (model/hardware.h), in shardtrace's own words.
  cmd->add_option("--hbm", options->hbm_gib, "with --devices: GiB of memory per device");
  cmd->add_option("--chip", options->chip,
                  "with --devices: a row of the chip table (h100, h200, b200, mi300x, ...)");
  AddHardware(cmd, options->hardware);
  cmd->footer(
      "Example: shardtrace fit model_name=mixtral-8x7b compile_topology=v5p-64 "
      "compile_topology_num_slices=1 per_device_batch_size=4");
  return ReportCommand(cmd, options, std::shared_ptr<CommonOptions>(options, &options->common),
                       &RunFitCommand);
}

}  // namespace shardtrace
