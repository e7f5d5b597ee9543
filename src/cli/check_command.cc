// `shardtrace check CASE...`: golden cases against the reference implementation.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "check/golden_check.h"
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "emit/golden_report.h"
#include "io/input_file.h"
#include "util/error.h"
#include "util/progress.h"

namespace shardtrace {
namespace {

struct CheckCommandOptions {
  CommonOptions common;  // args: golden case directories, then CONFIG.yml / key=value
  double atol = 1e-5;
  double rtol = 1e-4;
  int threads = 0;                          // 0 = every core, 1 = serial
  bool quiet = false;                       // no progress line on stderr
  int64_t budget_bytes = int64_t{2} << 30;  // what a case's run may hold (--max-memory)
};

CommandOutcome RunCheckCommand(const CheckCommandOptions& options, std::ostream& out) {
  // Directories are cases; CONFIG files go before each case's config.yml (a base.yml), and
  // key=value overrides after it, so they win over the case's own values.
  std::vector<std::string> cases, base_args, overrides;
  for (const std::string& arg : options.common.args) {
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec))
      cases.push_back(arg);
    else if (arg.find('=') != std::string::npos)
      overrides.push_back(arg);
    else
      base_args.push_back(arg);
  }
  if (cases.empty() && !base_args.empty()) {
    // A mistyped case path is the likely mistake: name it rather than "no case given".
    const std::string kind = PathKind(base_args.back());
    Fail("check ({}): expected a golden case directory (config.yml and tensors.npz), found {}",
         base_args.back(),
         kind == "no such file or directory" ? "no such directory"
         : kind == "a symbolic link loop"    ? kind
                                             : "a file that is not a directory");
  }
  if (cases.empty())
    Fail("check: no golden case directory given (a directory with config.yml and tensors.npz)");
  for (const std::string& c : cases)
    for (const char* file : {"config.yml", "tensors.npz"})
      // Only absence is reported here; the readers name any other problem exactly
      // (a directory, a symlink loop, no permission).
      if (std::error_code ec; !std::filesystem::exists(
              std::filesystem::symlink_status(std::filesystem::path(c) / file, ec)))
        Fail("check: {} has no {} (a golden case holds config.yml and tensors.npz)", c, file);
  CheckOptions check_options;
  check_options.atol = options.atol;
  check_options.rtol = options.rtol;
  check_options.extra_args = overrides;
  check_options.threads = options.threads;
  check_options.budget_bytes = options.budget_bytes;
  Progress progress(options.quiet);
  check_options.progress = &progress;
  std::vector<GoldenReport> reports;
  CommandOutcome outcome;
  for (const std::string& c : cases) {
    reports.push_back(WarnedBefore(outcome.warnings,
                                   [&] { return CheckGoldenCase(c, base_args, check_options); }));
    AddWarnings(outcome.warnings, reports.back().config_warnings);
  }
  WriteOutput(
      options.common,
      options.common.format == "json" ? GoldenReportsToJson(reports) : GoldenReportsToText(reports),
      out);
  for (const GoldenReport& r : reports)
    if (!r.passed()) outcome.status = kExitMismatch;
  return outcome;
}

}  // namespace

Command AddCheckCommand(CLI::App& app) {
  auto options = std::make_shared<CheckCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check", "check golden cases (config.yml + tensors.npz) against the reference");
  AddCommon(cmd, options->common, {"text", "json"});
  cmd->add_option("--atol", options->atol, "absolute tolerance for float arrays")
      ->check(ToleranceValidator())
      ->capture_default_str();
  cmd->add_option("--rtol", options->rtol, "relative tolerance for float arrays")
      ->check(ToleranceValidator())
      ->capture_default_str();
  cmd->add_option("--threads", options->threads,
                  "threads simulating devices (0 = every core, 1 = serial)")
      ->check(ThreadsValidator());
  cmd->add_flag("--quiet", options->quiet, "no progress line on stderr");
  AddMaxMemory(cmd, options->budget_bytes);
  cmd->footer(
      "Example: shardtrace check testdata/goldens/sparse_ep2_mixtral "
      "testdata/goldens/ring_ep2_mixtral");
  return {cmd, std::shared_ptr<CommonOptions>(options, &options->common),
          [options] {
            // Options that parse but would be ignored are refused, not dropped.
            if (options->common.devices)
              Fail(
                  "--devices: check runs each golden case on the mesh its config.yml gives; "
                  "expected no --devices, found --devices {}",
                  *options->common.devices);
            std::vector<std::string> dirs;  // the golden cases: the files they hold are read
            for (const std::string& a : options->common.args)
              if (a.find('=') == std::string::npos) dirs.push_back(a);
            return dirs;
          },
          [options](std::ostream& out) { return RunCheckCommand(*options, out); }};
}

}  // namespace shardtrace
