// Shared by the fuzz targets that drive `shardtrace trace` with config overrides: the input
// is read as lines, each `key=value` line one override; the command runs in process through
// RunCli on small default dims (so a symbolic and a numeric trace take milliseconds) on 4
// devices, after the overrides the input gives (which may replace the dims). Exit status 2
// (bad input) and 0/1 are expected outcomes; status 3 (an internal error), an escaping
// exception, a crash or a sanitizer report is a finding.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace shardtrace::fuzzing {

inline std::vector<std::string> OverrideLines(const uint8_t* data, size_t size) {
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> out;
  for (std::string line; std::getline(lines, line) && out.size() < 64;)
    if (line.find('=') != std::string::npos && line.find('\0') == std::string::npos)
      out.push_back(line);
  return out;
}

// Runs `shardtrace trace <small dims> <overrides> <flags>`; traps on an internal error.
inline void RunTrace(const std::vector<std::string>& overrides,
                     const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"shardtrace",           "trace",
                                   "base_emb_dim=16",      "base_mlp_dim=32",
                                   "base_moe_mlp_dim=32",  "num_experts=8",
                                   "num_experts_per_tok=2", "max_target_length=4",
                                   "per_device_batch_size=1", "override_model_config=true",
                                   "--devices",            "4",
                                   "--quiet"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  const int status = RunCli(static_cast<int>(args.size()), argv.data(), out, err);
  if (status == 3 || status < 0 || status > 3) std::abort();
}

}  // namespace shardtrace::fuzzing
