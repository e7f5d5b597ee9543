#include "cli/cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "config/maxtext_revision.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/warnings.h"

namespace shardtrace {
namespace {

// The one line for output that could not be written, with errno's reason when it is known.
int FailedWrite(std::ostream& err) {
  err << "shardtrace: error: standard output: cannot write"
      << (errno != 0 ? fmt::format(": {}", std::strerror(errno)) : std::string()) << "\n";
  return kExitBadInput;
}

// What a command printed is only delivered once `out` is flushed, so every command's output
// is checked here, once: a full disk or a closed stdout fails the run (exit 2) instead of
// ending in a silent 0. A run that failed before keeps its own status and line.
int FlushOutput(int status, std::ostream& out, std::ostream& err) {
  if (status != kExitOk && status != kExitMismatch) return status;
  errno = 0;
  out.flush();
  return out ? status : FailedWrite(err);
}

// --help and --version: CLI11 flushes its text itself, which left a bad stream and no errno
// on a closed stdout; it is written here in one piece instead, so the failure has its reason.
int ExitWithText(const CLI::App& app, const CLI::Error& e, std::ostream& out, std::ostream& err) {
  std::ostringstream text;
  const int status = app.exit(e, text, err);
  errno = 0;
  out << text.str();
  out.flush();
  return out ? status : FailedWrite(err);
}

int RunCommand(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"shardtrace: how tensors and their shardings flow through MaxText MoE layers"};
  std::string models;  // the revisions of moe.py shardtrace models (--maxtext-revision)
  for (const RevisionInfo& r : Revisions())
    models += fmt::format("{}{} ({})", models.empty() ? "" : ", ", r.name, r.label);
  app.set_version_flag("--version", fmt::format("shardtrace {} (models MaxText moe.py at {})",
                                                SHARDTRACE_VERSION, models));
  app.require_subcommand(1);

  app.footer(
      "Exit status: 0 success; 1 a mismatch found (check, compare-dump, generate --check); 2 bad\n"
      "input (one line 'shardtrace: error: <what> (<where>): <expected vs found>'); 3 internal\n"
      "error (a shardtrace bug, please report).\n\n"
      "Examples:\n"
      "  shardtrace config model_name=deepseek3-671b --devices 256 ici_expert_parallelism=64\n"
      "  shardtrace explain --axes exp,embed_moe,mlp_moe --shape 64,2048,1408 "
      "ici_expert_parallelism=2 --devices 8\n"
      "  shardtrace trace model_name=mixtral-8x7b ici_expert_parallelism=4 --devices 8\n"
      "  shardtrace trace base_emb_dim=16 base_mlp_dim=32 base_moe_mlp_dim=32 num_experts=8 "
      "num_experts_per_tok=2 --numeric\n"
      "  shardtrace dump path/to/maxtext/configs/base.yml model_name=deepseek2-16b "
      "ici_expert_parallelism=4 --devices 16\n"
      "  shardtrace check testdata/goldens/sparse_ep2_mixtral\n"
      "  shardtrace generate --check\n"
      "  shardtrace diff model_name=mixtral-8x7b --devices 8 --a ici_expert_parallelism=1 --b "
      "ici_expert_parallelism=4\n"
      "  shardtrace render path/to/maxtext/configs/base.yml model_name=deepseek3-671b "
      "ici_expert_parallelism=64 --devices 256 -o deepseek3.md\n"
      "  shardtrace compare-dump path/to/sharding_info/deepseek2-16b/v6e-16/slice_1/"
      "rule_default_ici_fsdp_parallelism=-1_ici_expert_parallelism=4 "
      "path/to/maxtext/configs/base.yml");

  const std::vector<Command> commands = {
      AddConfigCommand(app), AddExplainCommand(app), AddTraceCommand(app),
      AddDumpCommand(app),   AddCheckCommand(app),   AddCompareDumpCommand(app),
      AddDiffCommand(app),   AddRenderCommand(app),  AddGenerateCommand(app),
      AddFitCommand(app),    AddPlanCommand(app)};

  try {
    if (argc > 1 && argv[1][0] != '-') {
      const std::string name = argv[1];
      bool known = false;
      std::string names;
      for (const Command& c : commands) {
        known = known || c.app->get_name() == name;
        names += (names.empty() ? "" : ", ") + c.app->get_name();
      }
      if (!known) Fail("unknown command '{}' (argv[1]): expected one of {}", name, names);
    }
    app.parse(argc, argv);
    for (const Command& c : commands) {
      if (!c.app->parsed()) continue;
      // Checks that need no work done, before anything is computed.
      const std::vector<std::string> dirs = c.validate();
      if (c.common) CheckOutputs(*c.common, dirs);
      const CommandOutcome outcome = c.run(out);
      err << WarningLines(outcome.warnings);
      return outcome.status;
    }
  } catch (const CLI::CallForHelp& e) {
    return ExitWithText(app, e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return ExitWithText(app, e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return ExitWithText(app, e, out, err);
  } catch (const CLI::ParseError& e) {
    err << "shardtrace: error: " << PrintableMessage(e.what()) << " (see shardtrace --help)\n";
    return kExitBadInput;
  } catch (const Error& e) {
    err << WarningLines(e.warnings()) << "shardtrace: error: " << PrintableMessage(e.what())
        << "\n";
    return kExitBadInput;
  } catch (const std::filesystem::filesystem_error& e) {
    // The file system refused something the user named: input, not a bug. (Reads and writes
    // check their paths first; this catches what slips through.)
    err << "shardtrace: error: "
        << PrintableMessage(
               fmt::format("file system ({}): {}", e.path1().string(), e.code().message()))
        << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    err << "shardtrace: error: out of memory: the inputs ask for more memory than this machine "
           "has; reduce the sizes (or, with --numeric, run symbolically instead)\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "shardtrace: internal error (please report): " << PrintableMessage(e.what()) << "\n";
    return kExitInternal;
  }
  return kExitOk;
}

}  // namespace

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  return FlushOutput(RunCommand(argc, argv, out, err), out, err);
}

}  // namespace shardtrace
