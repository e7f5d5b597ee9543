// libFuzzer target: the YAML config loader with overrides. The input is split at the first
// NUL: before it, a config file (parsed alone, then loaded as the CONFIG argument is); after
// it, one key=value override per line, applied to that file and to the embedded base.yml. Error is
// the expected outcome for bad input; anything else escaping (std::logic_error from an internal
// check, a crash, a sanitizer report) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/mesh_config.h"
#include "config/yaml_value.h"
#include "util/error.h"

namespace {

std::string TempFile() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/shardtrace_fuzz_config." +
           std::to_string(::getpid()) + ".yml";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    std::istringstream lines(input.substr(nul + 1));
    for (std::string line; std::getline(lines, line);)
      if (line.find('=') != std::string::npos) overrides.push_back(line);
  }
  try {
    std::vector<Warning> warnings;
    config_internal::ParseConfigYaml(yaml, "fuzz.yml", &warnings);
  } catch (const Error&) {
  }
  try {
    std::ofstream(TempFile(), std::ios::binary | std::ios::trunc) << yaml;
    const Config user = Config::Load(ConfigSource{{TempFile()}, overrides});
    (void)MeshFromConfig(user, std::nullopt);
  } catch (const Error&) {
  }
  // Nothing left in TMPDIR once the run ends (as fuzz_sharding_dump.cc).
  std::remove(TempFile().c_str());
  try {
    const Config base = Config::Load(ConfigSource{{}, overrides});
    (void)MeshFromConfig(base, std::nullopt);
  } catch (const Error&) {
  }
  return 0;
}
