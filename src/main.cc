// shardtrace: trace, check and compare how tensors and their shardings flow through
// MaxText's Mixture-of-Experts layers. All logic lives in the library; see cli/cli.h.
#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) {
  const int status = shardtrace::RunCli(argc, argv, std::cout, std::cerr);
  // What a command printed is only delivered once stdout is flushed: a full disk or a closed
  // stdout found here is a failed run (exit 2), not a silent success. (A failed write inside
  // the run was already reported, with status 2.)
  errno = 0;
  std::cout.flush();
  if (!std::cout && (status == 0 || status == 1)) {
    std::cerr << "shardtrace: error: standard output: cannot write"
              << (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
    return 2;
  }
  return status;
}
