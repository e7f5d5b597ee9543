#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "cli/cli.h"
#include "paths/moe_params.h"
#include "paths/moe_setup.h"
#include "run/run.h"

namespace shardtrace::testing {

double MaxDiff(const Array& a, const Array& b) {
  REQUIRE(a.shape == b.shape);
  double m = 0;
  for (size_t i = 0; i < a.values().size(); ++i)
    m = std::max(m, static_cast<double>(std::fabs(a.values()[i] - b.values()[i])));
  return m;
}

namespace fs = std::filesystem;

std::string SourcePath(const std::string& relative) {
  return std::string(SHARDTRACE_SOURCE_DIR) + "/" + relative;
}

std::vector<fs::path> ReleaseSweepFiles() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(SourcePath("testdata/maxtext-moe-models/sweep")))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

const std::vector<std::pair<std::string, std::string>>& ReleaseSweepMeshes() {
  static const std::vector<std::pair<std::string, std::string>> kMeshes = {
      {"fsdp8", "fsdp=8"},
      {"fsdp2_ep4", "fsdp=2 x expert=4"},
      {"fsdp4_tp2", "fsdp=4 x tensor=2"},
      {"fsdp16", "fsdp=16"},
      {"fsdp2_ep8", "fsdp=2 x expert=8"}};
  return kMeshes;
}

std::pair<std::string, std::string> ReleaseSweepMeshColumns() {
  std::pair<std::string, std::string> columns;
  for (const auto& mesh : ReleaseSweepMeshes()) {
    columns.first += " " + mesh.second + " |";
    columns.second += "---|";
  }
  return columns;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void CompareWithGolden(const std::string& relative, const std::string& actual) {
  const std::string path = SourcePath("testdata/" + relative);
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    // Regenerate, then still compare below: a failed write fails the test instead of
    // leaving a stale golden that a later run reports far from its cause.
    if (!fs::exists(path) || ReadFile(path) != actual) {
      fs::create_directories(fs::path(path).parent_path());
      std::ofstream out(path, std::ios::binary);
      out << actual;
      out.close();
      INFO("rewriting golden file " << path);
      REQUIRE(out.good());
      WARN("updated golden file testdata/" << relative);
    }
  }
  INFO("golden file " << path << " (regenerate with `make golden`)");
  REQUIRE(fs::exists(path));
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

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "shardtrace_test.XXXXXX").string();
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& relative, const std::string& text) const {
  const fs::path file = path_ / relative;
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
  return file.string();
}

std::vector<std::string> TempDir::Entries() const {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(path_)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

namespace {

std::string ShellQuote(const std::string& arg) {
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

CommandResult RunShardtrace(const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage = {"shardtrace"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  CommandResult result;
  result.status = RunCli(static_cast<int>(argv_storage.size()), argv.data(), out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

CommandResult RunShardtraceBinary(const std::vector<std::string>& args) {
  TempDir capture;
  std::string command = ShellQuote(SHARDTRACE_BINARY);
  for (const std::string& arg : args) command.append(" ").append(ShellQuote(arg));
  command.append(" >").append(ShellQuote((capture / "stdout").string()));
  command.append(" 2>").append(ShellQuote((capture / "stderr").string())).append(" </dev/null");
  const int raw = std::system(command.c_str());
  REQUIRE(raw != -1);
  REQUIRE(WIFEXITED(raw));
  CommandResult result;
  result.status = WEXITSTATUS(raw);
  result.out = ReadFile(capture / "stdout");
  result.err = ReadFile(capture / "stderr");
  return result;
}

const std::vector<std::string>& SmallMoeDims() {
  static const std::vector<std::string> dims = {"base_emb_dim=16",      "base_mlp_dim=32",
                                                "base_moe_mlp_dim=32",  "num_experts_per_tok=2",
                                                "max_target_length=4",  "per_device_batch_size=1",
                                                "decoder_block=mixtral"};
  return dims;
}

RunResult SeededRun(const std::vector<std::string>& args, int64_t devices, Block block,
                    bool masked_loop) {
  RunRequest request = SymbolicRequest(args, devices, block);
  request.evaluation = Evaluation::kNumeric;
  request.seed = 1;
  request.masked_loop = masked_loop;
  return Run(request);
}

Trace SymbolicTrace(const std::vector<std::string>& args, int64_t devices, Block block) {
  return Run(SymbolicRequest(args, devices, block)).trace;
}

namespace {

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" `");
  const size_t b = s.find_last_not_of(" `");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

std::vector<Known> KnownDisagreements() {
  std::istringstream in(ReadFile(SourcePath("testdata/maxtext/README.md")));
  std::vector<Known> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Known disagreements";
    if (!in_section || line.rfind("| ", 0) != 0 || line.rfind("| case", 0) == 0 ||
        line.rfind("|--", 0) == 0 || line.rfind("| --", 0) == 0)
      continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) cells.push_back(Trim(cell));
    REQUIRE(cells.size() >= 3);
    Known k{cells[0], cells[1], std::nullopt};
    double atol = 0, rtol = 0;
    if (std::sscanf(cells[2].c_str(), "atol %lf, rtol %lf", &atol, &rtol) == 2)
      k.agrees_at = std::pair{atol, rtol};
    rows.push_back(k);
  }
  return rows;
}

}  // namespace shardtrace::testing
