#include "cli/cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <new>

#include "cli/commands.h"
#include "config/maxtext_revision.h"
#include "config/run_inputs.h"
#include "io/atomic_file.h"
#include "shard/mesh.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/thread_pool.h"

namespace shardtrace {
namespace {

// CLI11 converts numbers with saturating or wrapping library calls (--seed -1 becomes
// 2^64-1, --devices 1e30 the largest int64), so every numeric option is checked as text
// first: the value the user typed is the value used, or the option is refused.
CLI::Validator DeviceCountValidator() {
  return CLI::Validator(
      [](std::string& value) {
        int64_t n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || end != value.data() + value.size() || n < 1 ||
            n > Mesh::kMaxDevices)
          return fmt::format("expected a device count from 1 to {}, found '{}'", Mesh::kMaxDevices,
                             value);
        return std::string();
      },
      "N");
}

CLI::Validator SeedValidator() {
  return CLI::Validator(
      [](std::string& value) {
        uint64_t n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (value.empty() || value[0] == '-' || ec != std::errc() ||
            end != value.data() + value.size())
          return fmt::format("expected an integer from 0 to {}, found '{}'", UINT64_MAX, value);
        return std::string();
      },
      "N");
}

CLI::Validator ThreadsValidator() {
  return CLI::Validator(
      [](std::string& value) {
        int n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || end != value.data() + value.size() || n < 0 ||
            n > ThreadPool::kMaxThreads)
          return fmt::format("expected a thread count from 0 (every core) to {}, found '{}'",
                             ThreadPool::kMaxThreads, value);
        return std::string();
      },
      "N");
}

// --max-memory GIB: a positive number of GiB (fractions allowed), at most 1 TiB.
CLI::Option* AddMaxMemory(CLI::App* cmd, int64_t& budget_bytes) {
  return cmd
      ->add_option_function<std::string>(
          "--max-memory",
          [&budget_bytes](const std::string& value) {
            double gib = 0;
            std::from_chars(value.data(), value.data() + value.size(), gib);
            budget_bytes = static_cast<int64_t>(gib * static_cast<double>(int64_t{1} << 30));
          },
          "numeric: the memory the simulated devices may hold, in GiB (default 2)")
      ->check(CLI::Validator(
          [](std::string& value) {
            double x = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
            if (ec != std::errc() || end != value.data() + value.size() || !(x > 0) || x > 1024)
              return fmt::format("expected a size in GiB above 0 and at most 1024, found '{}'",
                                 value);
            return std::string();
          },
          "GIB"));
}

CLI::Validator ToleranceValidator() {
  return CLI::Validator(
      [](std::string& value) {
        double x = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
        if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(x) || x < 0)
          return fmt::format("expected a finite number >= 0, found '{}'", value);
        return std::string();
      },
      "X");
}

void AddCommon(CLI::App* cmd, CommonOptions& common, const std::vector<std::string>& formats) {
  cmd->add_option("args", common.args, "CONFIG.yml files and key=value overrides (MaxText style)");
  cmd->add_option("--devices", common.devices,
                  "device count (default: the product of the explicit *_parallelism values)")
      ->check(DeviceCountValidator());
  if (!formats.empty()) {
    common.format = formats.front();
    cmd->add_option("--format", common.format, "output format")
        ->check(CLI::IsMember(formats))
        ->capture_default_str();
  }
  cmd->add_option("-o,--output", common.output,
                  "write to FILE (atomically; '-' is stdout) instead of stdout");
  cmd->add_option("--maxtext-revision", common.maxtext_revision,
                  "whose moe.py to model: 313890777 (seed), e591f30 (main), 0.2.5 (release); "
                  "default: recognised from the base.yml's keys (docs/revisions.md)");
}

// Every file a command may read, for refusing an -o that names one: the CONFIG files given
// (and the model and custom_mesh_and_rule files beside them), and in each golden case or dump
// directory its config, arrays and JSON files.
std::vector<std::string> CommandInputs(const std::vector<std::string>& args,
                                       const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  std::vector<std::string> inputs;
  for (const std::string& a : args) {
    if (a.find('=') != std::string::npos) continue;
    inputs.push_back(a);
    for (const char* sub : {"models", "custom_mesh_and_rule"}) {
      std::error_code ec;
      const fs::path beside = fs::path(a).parent_path() / sub;
      if (!fs::is_directory(beside, ec)) continue;
      int listed = 0;  // a config directory holds tens of files; stop at a sane bound
      for (fs::directory_iterator it(beside, ec), end; !ec && it != end && listed < 10000;
           it.increment(ec), ++listed)
        inputs.push_back(it->path().string());
    }
  }
  for (const std::string& d : dirs) {
    inputs.push_back(d);
    for (const char* name : {"config.yml", "tensors.npz", "named_shardings.json",
                             "logical_shardings.json", "input_shardings.json"})
      inputs.push_back((fs::path(d) / name).string());
  }
  return inputs;
}

}  // namespace

// Warnings (config loading prints them to std::cerr as they arise) go to the caller's `err`
// for the duration of one run, so in-process callers capture them like errors.
class RedirectCerr {
 public:
  explicit RedirectCerr(std::ostream& err) : saved_(std::cerr.rdbuf(err.rdbuf())) {}
  ~RedirectCerr() { std::cerr.rdbuf(saved_); }
  RedirectCerr(const RedirectCerr&) = delete;
  RedirectCerr& operator=(const RedirectCerr&) = delete;

 private:
  std::streambuf* saved_;
};

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  const RedirectCerr redirect(err);
  CLI::App app{"shardtrace: how tensors and their shardings flow through MaxText MoE layers"};
  app.set_version_flag("--version", std::string("shardtrace ") + SHARDTRACE_VERSION +
                                        " (reference: MaxText moe.py @ 313890777)");
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

  CommonOptions config_options;
  CLI::App* config_cmd =
      app.add_subcommand("config", "the resolved MoE-relevant config and the mesh");
  AddCommon(config_cmd, config_options, {"text", "json"});
  config_cmd->footer(
      "Example: shardtrace config model_name=mixtral-8x7b ici_expert_parallelism=4 --devices 8");

  ExplainOptions explain_options;
  CLI::App* explain_cmd =
      app.add_subcommand("explain", "resolve logical axes to a PartitionSpec, rule by rule");
  AddCommon(explain_cmd, explain_options.common, {"text", "json"});
  explain_cmd
      ->add_option("--axes", explain_options.axes,
                   "logical axes, e.g. exp,embed_moe,mlp_moe (None = unnamed)")
      ->required();
  explain_cmd->add_option("--shape", explain_options.shape, "global shape, e.g. 64,2048,1408");
  explain_cmd->add_option("--dtype", explain_options.dtype,
                          "dtype for bytes per device (default: config dtype)");
  explain_cmd->footer(
      "Example: shardtrace explain --axes exp,embed_moe,mlp_moe --shape 64,2048,1408 "
      "ici_expert_parallelism=2 --devices 8");

  TraceOptions trace_options;
  CLI::App* trace_cmd =
      app.add_subcommand("trace", "run a MoE/MLP block and record every tensor and collective");
  AddCommon(trace_cmd, trace_options.common, {"table", "json", "dot", "svg", "mermaid"});
  trace_cmd
      ->add_option("--block", trace_options.block,
                   "moe (routed experts), mlp (dense MlpBlock), shared (shared-expert MlpBlock)")
      ->check(CLI::IsMember({"moe", "mlp", "shared"}))
      ->capture_default_str();
  trace_cmd
      ->add_option("--path", trace_options.path,
                   "auto: the path RoutedMoE selects from the config; masked_loop: the "
                   "loop-over-experts reference")
      ->check(CLI::IsMember({"auto", "masked_loop"}))
      ->capture_default_str();
  trace_cmd->add_flag("--numeric", trace_options.numeric,
                      "run with real numbers on simulated devices");
  trace_cmd
      ->add_option("--seed", trace_options.seed,
                   "seed of the deterministic weights and inputs (--numeric)")
      ->check(SeedValidator());
  trace_cmd
      ->add_option("--threads", trace_options.threads,
                   "numeric: threads simulating devices (0 = every core, 1 = serial)")
      ->check(ThreadsValidator());
  trace_cmd->add_flag("--quiet", trace_options.quiet, "no progress line on stderr");
  AddMaxMemory(trace_cmd, trace_options.budget_bytes);
  trace_cmd->add_option("--golden", trace_options.golden,
                        "take inputs and weights from a golden case directory (implies --numeric)");
  trace_cmd->footer(
      "Example: shardtrace trace model_name=deepseek3-671b --devices 256 "
      "ici_expert_parallelism=64");

  CommonOptions dump_options;
  CLI::App* dump_cmd =
      app.add_subcommand("dump", "MaxText's debug_sharding activation dump (input_shardings.json)");
  AddCommon(dump_cmd, dump_options, {"maxtext"});
  dump_cmd->footer(
      "Example: shardtrace dump base.yml model_name=deepseek2-16b ici_expert_parallelism=4 "
      "--devices 16");

  CheckCommandOptions check_options;
  CLI::App* check_cmd = app.add_subcommand(
      "check", "check golden cases (config.yml + tensors.npz) against the reference");
  AddCommon(check_cmd, check_options.common, {"text", "json"});
  check_cmd->add_option("--atol", check_options.atol, "absolute tolerance for float arrays")
      ->check(ToleranceValidator())
      ->capture_default_str();
  check_cmd->add_option("--rtol", check_options.rtol, "relative tolerance for float arrays")
      ->check(ToleranceValidator())
      ->capture_default_str();
  check_cmd
      ->add_option("--threads", check_options.threads,
                   "threads simulating devices (0 = every core, 1 = serial)")
      ->check(ThreadsValidator());
  check_cmd->add_flag("--quiet", check_options.quiet, "no progress line on stderr");
  AddMaxMemory(check_cmd, check_options.budget_bytes);
  check_cmd->footer(
      "Example: shardtrace check testdata/goldens/sparse_ep2_mixtral "
      "testdata/goldens/ring_ep2_mixtral");

  CompareDumpOptions compare_dump_options;
  CLI::App* compare_dump_cmd = app.add_subcommand(
      "compare-dump", "compare a MaxText sharding_info dump with shardtrace's trace of that run");
  compare_dump_cmd
      ->add_option("dump_dir", compare_dump_options.dump_dir,
                   "MaxText sharding_info directory (named_shardings.json, logical_shardings.json, "
                   "input_shardings.json)")
      ->required();
  AddCommon(compare_dump_cmd, compare_dump_options.common, {"text", "markdown", "json"});
  compare_dump_cmd->footer(
      "Model, overrides and device count come from the dump's directory name and mesh; "
      "CONFIG.yml, key=value and --devices override them. Exit 0 all agree, 1 a difference.\n"
      "Example: shardtrace compare-dump "
      "maxtext/tests/utils/sharding_info/gpt-oss-20b/tpu7x-16/slice_1/"
      "rule_default_ici_fsdp_parallelism=-1_ici_expert_parallelism=2 "
      "maxtext/src/maxtext/configs/base.yml");

  DiffOptions diff_options;
  CLI::App* diff_cmd = app.add_subcommand(
      "diff", "how sharding, collectives and per-device bytes differ between two configs");
  AddCommon(diff_cmd, diff_options.common, {"text", "markdown", "json"});
  diff_cmd->add_option("--a", diff_options.a, "key=value for side A only (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  diff_cmd->add_option("--b", diff_options.b, "key=value for side B only (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  diff_cmd
      ->add_option("--block", diff_options.block,
                   "moe (routed experts), mlp (dense MlpBlock), shared (shared-expert MlpBlock)")
      ->check(CLI::IsMember({"moe", "mlp", "shared"}))
      ->capture_default_str();
  diff_cmd->footer(
      "A.yml and B.yml are two configs (key=value applies to both), or one config (or none: "
      "the embedded base.yml) with --a/--b overrides. Exit 0 same sharding, 1 different.\n"
      "Example: shardtrace diff model_name=mixtral-8x7b --devices 8 --a "
      "ici_expert_parallelism=1 --b ici_expert_parallelism=4");

  RenderOptions render_options;
  CLI::App* render_cmd = app.add_subcommand(
      "render", "one visualization page (flow, trees, formal spec) for any config");
  AddCommon(render_cmd, render_options.common, {});
  render_cmd->add_option("--hbm", render_options.hbm,
                         "NAME=GIB: also fit the peak per device to this accelerator's HBM "
                         "(repeatable; e.g. MI300X=192)");
  render_cmd
      ->add_option("--block", render_options.block,
                   "moe (routed experts), mlp (dense MlpBlock), shared (shared-expert MlpBlock)")
      ->check(CLI::IsMember({"moe", "mlp", "shared"}))
      ->capture_default_str();
  render_cmd->footer(
      "Example: shardtrace render maxtext/src/maxtext/configs/base.yml "
      "model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 -o deepseek3.md");

  GenerateOptions generate_options;
  CLI::App* generate_cmd = app.add_subcommand(
      "generate", "render visualizations/*.md from real traces of the embedded configs");
  generate_cmd->add_option("--out", generate_options.out, "directory of the markdown files")
      ->capture_default_str();
  generate_cmd->add_flag("--check", generate_options.check,
                         "write nothing; exit 1 naming the files that differ from a fresh render");
  generate_cmd->footer("Example: shardtrace generate --check");

  // Checks that need no work done: an unknown command names itself, a --maxtext-revision is
  // known, and every output file or directory is writable, and none of the command's inputs,
  // before anything is computed.
  const auto check_outputs = [&] {
    for (CommonOptions* common :
         {&config_options, &explain_options.common, &trace_options.common, &dump_options,
          &check_options.common, &compare_dump_options.common, &diff_options.common,
          &render_options.common}) {
      // The revision rides with the arguments (config/run_inputs.h).
      if (!common->maxtext_revision.empty()) {
        NamedRevision(common->maxtext_revision);  // a bad name fails before any work
        common->args.push_back(std::string(kRevisionArg) + common->maxtext_revision);
      }
      if (common->output == "-") continue;
      CheckOutputFile(common->output);
      std::vector<std::string> dirs;  // golden cases and dumps: the files they hold are read
      if (common == &trace_options.common && !trace_options.golden.empty())
        dirs.push_back(trace_options.golden);
      if (common == &check_options.common)
        for (const std::string& a : common->args)
          if (a.find('=') == std::string::npos) dirs.push_back(a);
      if (common == &compare_dump_options.common) dirs.push_back(compare_dump_options.dump_dir);
      CheckOutputIsNotInput(common->output, CommandInputs(common->args, dirs));
    }
    if (generate_cmd->parsed() && !generate_options.check)
      CheckOutputDirectory(generate_options.out, "generate --out");
  };

  try {
    if (argc > 1 && argv[1][0] != '-') {
      const std::string name = argv[1];
      bool known = false;
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) {
        known = known || sub->get_name() == name;
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      if (!known) Fail("unknown command '{}' (argv[1]): expected one of {}", name, names);
    }
    app.parse(argc, argv);
    // Options that parse but would be ignored or mean nothing are refused, not dropped.
    if (check_cmd->parsed() && check_options.common.devices)
      Fail(
          "--devices: check runs each golden case on the mesh its config.yml gives; expected no "
          "--devices, found --devices {}",
          *check_options.common.devices);
    if (trace_cmd->parsed() && trace_cmd->count("--golden") > 0 && trace_options.golden.empty())
      Fail("--golden: expected a golden case directory, found an empty name");
    check_outputs();
    if (config_cmd->parsed()) RunConfigCommand(config_options, out);
    if (explain_cmd->parsed()) RunExplainCommand(explain_options, out);
    if (trace_cmd->parsed()) RunTraceCommand(trace_options, out);
    if (dump_cmd->parsed()) RunDumpCommand(dump_options, out);
    if (check_cmd->parsed() && !RunCheckCommand(check_options, out)) return kExitMismatch;
    if (render_cmd->parsed()) RunRenderCommand(render_options, out);
    if (diff_cmd->parsed() && !RunDiffCommand(diff_options, out)) return kExitMismatch;
    if (compare_dump_cmd->parsed() && !RunCompareDumpCommand(compare_dump_options, out))
      return kExitMismatch;
    if (generate_cmd->parsed() && !RunGenerateCommand(generate_options, out)) return kExitMismatch;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << "shardtrace: error: " << PrintableMessage(e.what()) << " (see shardtrace --help)\n";
    return kExitBadInput;
  } catch (const Error& e) {
    err << "shardtrace: error: " << PrintableMessage(e.what()) << "\n";
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
  return 0;
}

}  // namespace shardtrace
