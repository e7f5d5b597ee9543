#include "cli/cli_options.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>

#include "config/maxtext_revision.h"
#include "config/run_inputs.h"
#include "io/atomic_file.h"
#include "io/input_file.h"
#include "shard/mesh.h"
#include "util/thread_pool.h"

namespace shardtrace {

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

CLI::Option* AddBlock(CLI::App* cmd, std::string& block) {
  return cmd
      ->add_option("--block", block,
                   "moe (routed experts), mlp (dense MlpBlock), shared (shared-expert MlpBlock); "
                   "hash (DeepSeek-V4's hash-routing layers) is refused: not traced")
      ->check(CLI::IsMember({"moe", "mlp", "shared", "hash"}))
      ->capture_default_str();
}

void CheckOutputs(CommonOptions& common, const std::vector<std::string>& dirs) {
  // The revision rides with the arguments (config/run_inputs.h).
  if (!common.maxtext_revision.empty()) {
    NamedRevision(common.maxtext_revision);  // a bad name fails before any work
    common.args.push_back(std::string(kRevisionArg) + common.maxtext_revision);
  }
  if (common.output == "-") return;
  CheckOutputFile(common.output);
  CheckOutputIsNotInput(common.output, CommandInputs(common.args, dirs));
}

CLI::Option* AddHardware(CLI::App* cmd, std::string& path) {
  return cmd->add_option("--hardware", path,
                         "a chip table of your own (the format of src/model/hardware_table.yml)");
}

HardwareFile ReadHardwareFile(const std::string& path) {
  if (path.empty()) return {};
  return {ReadInputFile(path, "--hardware"), path};
}

}  // namespace shardtrace
