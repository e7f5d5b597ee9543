// ThreadPool's start-up failure: when the system refuses a thread, the pool stops and joins
// the workers it started and throws the one error type naming --threads, instead of
// terminating the process with running std::thread objects (issue 23).
#include "util/thread_pool.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "util/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define SHARDTRACE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDTRACE_ASAN 1
#endif
#endif

namespace shardtrace {
namespace {

// The process's virtual memory size in bytes (/proc/self/statm, pages).
long long VirtualBytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0;
  statm >> pages;
  return pages * sysconf(_SC_PAGESIZE);
}

TEST_CASE("a thread the system refuses is an Error naming --threads, not a crash", "[threads]") {
#ifdef SHARDTRACE_ASAN
  // ASan reserves terabytes of address space up front, so an address-space limit cannot make
  // only the thread stacks fail; the plain build runs this test.
  SUCCEED("not under AddressSanitizer");
#else
  // In a child process: cap the address space just above what it uses, so the first worker
  // stack (8 MiB by default) cannot be mapped, and report through the exit status.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const rlim_t cap = static_cast<rlim_t>(VirtualBytes() + (2 << 20));
    const rlimit limit{cap, cap};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(10);
    try {
      const ThreadPool pool(64);
      _exit(11);  // every thread started: the limit did not bite
    } catch (const Error& e) {
      const std::string what = e.what();
      _exit(what.rfind("--threads: cannot start 64 threads (", 0) == 0 ? 0 : 12);
    } catch (...) {
      _exit(13);
    }
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
#endif
}

}  // namespace
}  // namespace shardtrace
