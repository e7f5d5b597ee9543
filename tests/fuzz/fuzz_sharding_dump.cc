// libFuzzer target: the MaxText sharding_info reader behind `compare-dump`. The input is split
// at NUL bytes into named_shardings.json, logical_shardings.json, input_shardings.json and the
// dump directory's name (which InferRun reads as MaxText's `rule_<rule>_<key>=<value>_...`
// layout or its flattened copy), written to a temporary directory and read back. Error is the
// expected outcome for bad input; anything else escaping, a crash or a sanitizer report is a
// finding.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "check/sharding_dump.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace;
  namespace fs = std::filesystem;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t nul = input.find('\0', at);
    parts.push_back(input.substr(at, nul == std::string::npos ? std::string::npos : nul - at));
    if (nul == std::string::npos || parts.size() == 4) break;
    at = nul + 1;
  }
  parts.resize(4);
  // A name the filesystem takes: no '/', not "." or "..", at most 200 bytes.
  std::string name = parts[3].substr(0, 200);
  std::replace(name.begin(), name.end(), '/', '_');
  if (name.empty() || name == "." || name == "..")
    name = "deepseek2-16b_v6e-16_default_ici_fsdp_parallelism--1_ici_expert_parallelism-4";
  const char* tmp = std::getenv("TMPDIR");
  const fs::path root =
      fs::path(tmp ? tmp : "/tmp") / ("shardtrace_fuzz_dump." + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path dir = root / name;
  fs::create_directories(dir);
  const char* files[] = {"named_shardings.json", "logical_shardings.json", "input_shardings.json"};
  for (int i = 0; i < 3; ++i) std::ofstream(dir / files[i], std::ios::binary) << parts[i];
  try {
    const ShardingDump dump = ReadShardingDump(dir.string());
    (void)InferRun(dump);
    (void)DumpMeshString(dump);
  } catch (const Error&) {
  }
  fs::remove_all(root);
  return 0;
}
