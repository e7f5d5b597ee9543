// Running code that may crash, hang or exhaust memory (a third-party library given input it
// mishandles, such as Graphviz's dot layout aborting with a double free on some cluster
// graphs) without risking the process: RunContained forks, runs the function in the child
// under a CPU-time and memory limit with its stderr discarded, and reads back the text it
// returns through a pipe. The parent waits at most a wall-clock bound and kills the child
// past it. Whatever happens in the child, the caller gets a result: the text, or why there is
// none.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace shardtrace {

struct ContainedLimits {
  int seconds = 60;                         // CPU and wall-clock time of the child
  int64_t memory_bytes = int64_t{2} << 30;  // its address space (not under ASan)
  int64_t output_bytes = int64_t{256} << 20;
};

struct ContainedResult {
  bool ok = false;
  std::string output;   // what the function returned, when ok
  std::string failure;  // otherwise: "killed by signal 6", "took more than 60 s", an Error's text
};

// Calls `fn` in a forked child. `fn` must only compute (no output to shared files); an Error
// it throws comes back as `failure`.
ContainedResult RunContained(const std::function<std::string()>& fn, const ContainedLimits& limits);

}  // namespace shardtrace
