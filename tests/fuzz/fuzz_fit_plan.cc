// libFuzzer target: `fit` and `plan` with hostile arguments. Each input line is a key=value
// override, or a flag line (`--hbm 3`, `--devices 8`, `--vary key=a,b`, `--top 2`,
// `--chip h100`) split on spaces; both commands run in process through RunCli on a two-layer
// Mixtral on v5p-8 after them; plan on one mesh and policy the input may widen, with a
// --max-configs of 8 given last, so no input makes it search for long. Exit status 0, 1 or 2 is an expected outcome; status 3,
// an escaping exception, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace {

std::vector<std::string> Arguments(const uint8_t* data, size_t size) {
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> out;
  for (std::string line; std::getline(lines, line) && out.size() < 32;) {
    if (line.find('\0') != std::string::npos) continue;
    if (line.rfind("--", 0) == 0) {
      std::istringstream words(line);
      for (std::string w; words >> w && out.size() < 32;) {
        // No output files: -o would write wherever the fuzzer runs (a 20-minute run left one).
        if (w == "-o" || w.rfind("--output", 0) == 0 || w.rfind("-o", 0) == 0) {
          words >> w;
          continue;
        }
        out.push_back(w);
      }
    } else if (line.find('=') != std::string::npos) {
      out.push_back(line);
    }
  }
  return out;
}

void Run(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  const int status = shardtrace::RunCli(static_cast<int>(args.size()), argv.data(), out, err);
  if (status < 0 || status > 2) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> user = Arguments(data, size);
  const std::vector<std::string> base = {
      "model_name=mixtral-8x7b",      "override_model_config=true", "base_num_decoder_layers=2",
      "compile_topology=v5p-8",       "compile_topology_num_slices=1",
      "per_device_batch_size=1",      "max_target_length=64"};
  for (const char* command : {"fit", "plan"}) {
    std::vector<std::string> args = {"shardtrace", command};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), user.begin(), user.end());
    if (std::string(command) == "plan") {
      // One mesh and one policy unless the input varies them; at most 8 configs.
      args.insert(args.begin() + 2, {"ici_data_parallelism=1", "ici_tensor_parallelism=1",
                                     "ici_expert_parallelism=1", "ici_fsdp_parallelism=4",
                                     "remat_policy=full"});
      args.insert(args.end(), {"--max-configs", "8", "--quiet"});
    }
    Run(args);
  }
  return 0;
}
