// shardtrace: trace, check and compare how tensors and their shardings flow through
// MaxText's Mixture-of-Experts layers. All logic lives in the library; see cli/cli.h.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "cli/cli.h"

namespace {

// A standard stream the caller closed (`shardtrace config >&-`) is the lowest free descriptor,
// so the next file opened would take its number: a config file, Graphviz's pipe (which then
// failed as "exited with status 0"), the -o temporary file, and stdout's text could land in it.
// Each closed one is held by /dev/null opened the other way round, so a write to stdout still
// fails with EBADF, as on the closed descriptor, and RunCli reports it.
void HoldClosedStandardStreams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int held = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (held >= 0 && held != fd) {
      ::dup2(held, fd);
      ::close(held);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  HoldClosedStandardStreams();
  // RunCli flushes stdout and checks it: a failed write is exit 2 there, for every command.
  return shardtrace::RunCli(argc, argv, std::cout, std::cerr);
}
