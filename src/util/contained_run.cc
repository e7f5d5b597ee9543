#include "util/contained_run.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include "util/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDTRACE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SHARDTRACE_ASAN 1
#endif
#ifdef SHARDTRACE_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace shardtrace {
namespace {

// The first byte the child writes says what follows: the function's text or an Error's.
constexpr char kOk = 'K';
constexpr char kError = 'E';

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void RunChild(int fd, const std::function<std::string()>& fn,
                           const ContainedLimits& limits) {
  const rlimit cpu{static_cast<rlim_t>(limits.seconds), static_cast<rlim_t>(limits.seconds) + 1};
  ::setrlimit(RLIMIT_CPU, &cpu);
#ifndef SHARDTRACE_ASAN
  // ASan reserves terabytes of shadow address space up front: a limit would fail every
  // allocation, so sanitizer builds rely on the time limit alone.
  const rlimit memory{static_cast<rlim_t>(limits.memory_bytes),
                      static_cast<rlim_t>(limits.memory_bytes)};
  ::setrlimit(RLIMIT_AS, &memory);
#endif
  // The child only computes: nothing it prints reaches the user, and a crash takes the
  // default action (a handler inherited from the parent, a test framework's say, would report
  // the child's crash as the parent's).
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  for (const int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGXCPU, SIGXFSZ})
    ::signal(sig, SIG_DFL);
#ifdef SHARDTRACE_ASAN
  // Likewise a sanitizer's death callback: libFuzzer's saved the parent's input as a crash
  // each time ASan caught Graphviz's known double free in gvFreeLayout here (155 inputs in 4
  // minutes of fuzz_trace_formats), though the parent only retried the layout, as it should.
  __sanitizer_set_death_callback(nullptr);
#endif
  std::string message;
  char status = kOk;
  try {
    message = fn();
  } catch (const Error& e) {
    status = kError;
    message = e.what();
  } catch (const std::bad_alloc&) {
    status = kError;
    message = fmt::format("more than {} bytes of memory", limits.memory_bytes);
  } catch (...) {
    ::_exit(3);
  }
  const bool written = WriteAll(fd, &status, 1) && WriteAll(fd, message.data(), message.size());
  ::_exit(written ? 0 : 4);
}

std::string Describe(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    if (sig == SIGXCPU) return "ran out of CPU time";
    return fmt::format("was killed by signal {} ({})", sig, ::strsignal(sig));
  }
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  return "stopped";
}

}  // namespace

ContainedResult RunContained(const std::function<std::string()>& fn,
                             const ContainedLimits& limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) Fail("cannot create a pipe: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    Fail("cannot start a process: {}", std::strerror(error));
  }
  if (pid == 0) {
    ::close(fds[0]);
    RunChild(fds[1], fn, limits);
  }
  ::close(fds[1]);

  ContainedResult result;
  std::string bytes;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(limits.seconds);
  bool timed_out = false, too_long = false;
  char buffer[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (static_cast<int64_t>(bytes.size()) + n > limits.output_bytes + 1) {
      too_long = true;
      break;
    }
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out || too_long) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    result.failure = fmt::format("took more than {} s", limits.seconds);
  } else if (too_long) {
    result.failure = fmt::format("wrote more than {} bytes", limits.output_bytes);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || bytes.empty()) {
    result.failure = Describe(status);
  } else if (bytes[0] == kError) {
    result.failure = bytes.substr(1);
  } else {
    result.ok = true;
    result.output = bytes.substr(1);
  }
  return result;
}

}  // namespace shardtrace
