#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardtrace::testing {

std::string SourcePath(const std::string& relative) {
  return std::string(SHARDTRACE_SOURCE_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void CompareWithGolden(const std::string& relative, const std::string& actual) {
  const std::string path = SourcePath("testdata/" + relative);
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  INFO("golden file " << path << " (regenerate with `make golden`)");
  REQUIRE(std::filesystem::exists(path));
  const std::string expected = ReadFile(path);
  if (expected != actual) {
    // Show the first differing line: a readable failure beats two walls of text.
    std::istringstream e(expected), a(actual);
    std::string el, al;
    int line = 0;
    while (true) {
      const bool more_e = static_cast<bool>(std::getline(e, el));
      const bool more_a = static_cast<bool>(std::getline(a, al));
      ++line;
      if (!more_e && !more_a) break;
      if (el != al || more_e != more_a) {
        INFO("line " << line << "\n  expected: " << el << "\n  actual:   " << al);
        const bool golden_matches = false;
        CHECK(golden_matches);
        return;
      }
    }
  }
  const bool golden_matches = expected == actual;
  CHECK(golden_matches);
}

CommandResult RunShardtrace(const std::vector<std::string>& args) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("shardtrace_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string command = std::string("'") + SHARDTRACE_BINARY + "'";
  for (const std::string& a : args) {
    std::string quoted = "'";
    for (const char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += " " + quoted + "'";
  }
  command += " >" + dir + "/out 2>" + dir + "/err";
  const int raw = std::system(command.c_str());
  CommandResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = ReadFile(dir + "/out");
  r.err = ReadFile(dir + "/err");
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace shardtrace::testing
