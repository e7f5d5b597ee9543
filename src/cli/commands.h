// The command table: one row per subcommand. Each <name>_command.cc adds its subcommand and
// flags to the CLI11 app (Add<Name>Command) and returns its row; RunCli (cli.cc) builds the
// table, parses, runs the checks every command shares and calls the parsed row's `run`, which
// builds a RunRequest, runs it and hands the result to an emitter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "util/warnings.h"

namespace CLI {
class App;
}

namespace shardtrace {

// The arguments and flags every command that runs a config takes (cli_options.h adds them).
struct CommonOptions {
  std::vector<std::string> args;  // CONFIG.yml paths and key=value overrides, in order
  std::optional<int64_t> devices;
  std::string format;
  std::string output = "-";  // "-": stdout; an empty name is refused
  // --maxtext-revision: CheckOutputs appends it to `args` as "--maxtext-revision=NAME"
  // (config/run_inputs.h); empty: recognised from the base.yml.
  std::string maxtext_revision;
};

// What a command's work returns: the exit status (kExitOk, or kExitMismatch when a check
// failed) and the warnings of the configs the user asked for, which RunCli prints once.
struct CommandOutcome {
  int status = kExitOk;
  std::vector<Warning> warnings;
};

struct Command {
  CLI::App* app = nullptr;
  // The command's CommonOptions (null for generate, which takes none): RunCli checks its -o
  // and --maxtext-revision before any work.
  std::shared_ptr<CommonOptions> common;
  // After parsing, before any work: refuses options that parse but would mean nothing, and
  // returns the directories (golden cases, dumps) the command will read besides its args.
  std::function<std::vector<std::string>()> validate;
  // Does the work.
  std::function<CommandOutcome(std::ostream& out)> run;
};

// The row of a command that reads no directory besides its arguments and exits 0 once `work`
// has written its output (config, explain, dump, render); `common` is the options' own.
// `work` returns the warnings of the config it ran.
template <typename Options>
Command PlainCommand(CLI::App* cmd, std::shared_ptr<Options> options,
                     std::shared_ptr<CommonOptions> common,
                     std::vector<Warning> (*work)(const Options&, std::ostream&)) {
  return {cmd, std::move(common), [] { return std::vector<std::string>(); },
          [options, work](std::ostream& out) {
            return CommandOutcome{kExitOk, work(*options, out)};
          }};
}

// `--format html` with no -o while standard output is a terminal: refused (Error), as the
// report is a file to open in a browser, not text to read.
void RefuseHtmlOnTerminal(const CommonOptions& options);

// PlainCommand for a command that also writes an HTML report (render, fit, plan): before any
// work, --format html to a terminal is refused.
template <typename Options>
Command ReportCommand(CLI::App* cmd, std::shared_ptr<Options> options,
                      std::shared_ptr<CommonOptions> common,
                      std::vector<Warning> (*work)(const Options&, std::ostream&)) {
  Command row = PlainCommand(cmd, options, common, work);
  row.validate = [common] {
    RefuseHtmlOnTerminal(*common);
    return std::vector<std::string>();
  };
  return row;
}

Command AddConfigCommand(CLI::App& app);
Command AddExplainCommand(CLI::App& app);
Command AddTraceCommand(CLI::App& app);
Command AddDumpCommand(CLI::App& app);
Command AddCheckCommand(CLI::App& app);
Command AddCompareDumpCommand(CLI::App& app);
Command AddDiffCommand(CLI::App& app);
Command AddRenderCommand(CLI::App& app);
Command AddGenerateCommand(CLI::App& app);
Command AddFitCommand(CLI::App& app);
Command AddPlanCommand(CLI::App& app);

// Writes `text` to options.output atomically, or to `out` when no output file is given.
void WriteOutput(const CommonOptions& options, const std::string& text, std::ostream& out);
// Writes `text` to `out` (stdout) and flushes it; Error naming the reason when it fails.
void WriteStdout(const std::string& text, std::ostream& out);

}  // namespace shardtrace
