// io/atomic_file.h under a signal: a process killed with SIGTERM or SIGINT in the middle of
// writing an output leaves the old file byte for byte and no temporary file beside it, and
// dies of that signal (the handler removes the temporary, then re-raises). The writer runs in
// a forked child that stops mid-write and tells the parent, which then sends the signal, as a
// user's Ctrl-C or a job scheduler's kill would.
#include "io/atomic_file.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  return names;
}

// Forks a child that starts replacing `path`, writes half of its content to the temporary
// file, reports the temporary's name through a pipe and waits to be killed. Returns the
// temporary's name and the child's wait status after `signal`.
std::pair<std::string, int> KillMidWrite(const std::string& path, int signal) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    WriteFileAtomically(path, [&](const std::string& tmp_path) {
      std::ofstream(tmp_path, std::ios::binary) << "half of the new cont";
      const std::string name = fs::path(tmp_path).filename().string() + "\n";
      (void)!::write(fds[1], name.data(), name.size());
      for (;;) ::pause();  // the parent's signal ends this process
    });
    ::_exit(0);  // not reached: the signal ends the child
  }
  ::close(fds[1]);
  std::string tmp;
  char c;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') tmp += c;
  ::close(fds[0]);
  const bool mid_write = !tmp.empty() && fs::exists(fs::path(path).parent_path() / tmp);
  ::kill(child, signal);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(mid_write);  // the temporary existed when the signal was sent
  return {tmp, status};
}

}  // namespace

TEST_CASE("A signal during a write leaves the old output and no temporary file", "[io][signal]") {
  for (const int signal : {SIGTERM, SIGINT}) {
    INFO("signal " << signal);
    const testing::TempDir dir;
    const std::string out = dir.Write("report.txt", "the old report\n");
    fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write);
    const auto [tmp, status] = KillMidWrite(out, signal);
    CHECK(tmp != "report.txt");
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal);
    CHECK(testing::ReadFile(out) == "the old report\n");
    CHECK(Entries(dir.path()) == std::vector<std::string>{"report.txt"});
    CHECK(fs::status(out).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  }
}

TEST_CASE("A write that completes replaces the file and keeps its mode", "[io]") {
  const testing::TempDir dir;
  const std::string out = dir.Write("report.txt", "old\n");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write);
  WriteTextAtomically(out, "new\n");
  CHECK(testing::ReadFile(out) == "new\n");
  CHECK(Entries(dir.path()) == std::vector<std::string>{"report.txt"});
  CHECK(fs::status(out).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
}

}  // namespace shardtrace
