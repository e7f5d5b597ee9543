// The bad-input corpus (testdata/bad/): every case runs the built binary on one hostile or
// malformed input and must print exactly its documented error line, exit with its
// documented status, write nothing to stdout and leave its scratch directory as it found
// it (no output file, no temporary file). The case format is in testdata/bad/README.md.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::SourcePath;
using testing::TempDir;

struct BadCase {
  std::string name;
  std::vector<std::string> setup;  // "<kind> <path>" lines
  std::string run;                 // the arguments, space separated
  int status = 2;
  std::string error;                  // the exact stderr line, without the newline
  std::vector<std::string> warnings;  // exact "shardtrace: warning: ..." lines before it
};

BadCase ParseCase(const fs::path& file) {
  BadCase c;
  c.name = file.stem().string();
  std::istringstream in(ReadFile(file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(": ");
    REQUIRE(colon != std::string::npos);
    const std::string key = line.substr(0, colon);
    const std::string value = line.substr(colon + 2);
    if (key == "setup")
      c.setup.push_back(value);
    else if (key == "run")
      c.run = value;
    else if (key == "status")
      c.status = std::stoi(value);
    else if (key == "error")
      c.error = value;
    else if (key == "warning")
      c.warnings.push_back(value);
    else
      FAIL("unknown field '" << key << "' in " << file);
  }
  return c;
}

// {bad} is testdata/bad, {tmp} the case's scratch directory, {a*N} N letters 'a'; in `run`, a
// word '' is an empty argument.
std::string Expand(std::string text, const std::string& bad, const std::string& tmp) {
  for (size_t at; (at = text.find("{bad}")) != std::string::npos;) text.replace(at, 5, bad);
  for (size_t at; (at = text.find("{tmp}")) != std::string::npos;) text.replace(at, 5, tmp);
  for (size_t at; (at = text.find("{a*")) != std::string::npos;) {
    const size_t end = text.find('}', at);
    const size_t n = std::stoul(text.substr(at + 3, end - at - 3));
    text.replace(at, end - at + 1, std::string(n, 'a'));
  }
  return text;
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word == "''" ? "" : word);
  return out;
}

// Things git cannot hold: FIFOs, symlink loops, unreadable files, read-only directories.
void Setup(const std::string& line) {
  const std::vector<std::string> words = Split(line);
  REQUIRE(words.size() >= 2);
  const std::string& kind = words[0];
  const std::string& path = words[1];
  if (kind == "fifo") {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  } else if (kind == "loop") {  // path -> path.2 -> path
    fs::create_symlink(path + ".2", path);
    fs::create_symlink(path, path + ".2");
  } else if (kind == "symlink") {  // symlink <path> <target>
    REQUIRE(words.size() == 3);
    fs::create_symlink(words[2], path);
  } else if (kind == "file") {  // file <path> [text]
    std::ofstream(path) << (words.size() > 2 ? words[2] : "");
  } else if (kind == "dir") {
    fs::create_directories(path);
  } else {
    FAIL("unknown setup '" << kind << "'");
  }
}

std::vector<std::string> Listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("every input in testdata/bad fails with its documented line and status", "[bad]") {
  const std::string bad = SourcePath("testdata/bad");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(bad))
    if (e.path().extension() == ".case") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 10);
  for (const fs::path& file : files) {
    const BadCase c = ParseCase(file);
    DYNAMIC_SECTION(c.name) {
      const TempDir tmp;
      for (const std::string& s : c.setup) Setup(Expand(s, bad, tmp.path().string()));
      const std::vector<std::string> before = Listing(tmp.path());
      const std::vector<std::string> args = Split(Expand(c.run, bad, tmp.path().string()));
      const CommandResult r = RunShardtrace(args);
      std::string expected;
      for (const std::string& w : c.warnings)
        expected += Expand(w, bad, tmp.path().string()) + "\n";
      expected += Expand(c.error, bad, tmp.path().string()) + "\n";
      INFO(file.string() << "\nrun: " << c.run << "\nstatus " << r.status << "\nstderr: " << r.err);
      CHECK(r.status == c.status);
      CHECK(r.err == expected);
      CHECK(r.out.empty());
      CHECK(Listing(tmp.path()) == before);
    }
  }
}

}  // namespace
}  // namespace shardtrace
