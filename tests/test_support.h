// Helpers shared by the tests: paths into the source tree, golden text comparison, scratch
// directories, file reading and running the built binary.
// CompareWithGolden(rel, actual) compares `actual` with testdata/<rel> byte for byte; with
// UPDATE_GOLDEN=1 in the environment it first rewrites the file when it differs (review with
// git diff), then compares as usual, so a failed write still fails.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "numeric/array.h"
#include "paths/moe_block.h"
#include "run/run.h"

namespace shardtrace::testing {

// The largest |a - b| over two numeric arrays of the same shape (fails the test otherwise).
double MaxDiff(const Array& a, const Array& b);

std::string SourcePath(const std::string& relative);  // SHARDTRACE_SOURCE_DIR/relative
// The whole file, read in binary mode ("" if it cannot be opened).
std::string ReadFile(const std::filesystem::path& path);
void CompareWithGolden(const std::string& relative, const std::string& actual);

// A fresh directory under the system temp dir (mkdtemp), removed with everything in it when
// the object goes away. Construction fails the current test if the directory can't be made.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // The path of `name` inside the directory, as a string; the file is not created.
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `relative` (creating parent directories) and returns the file's path.
  std::string Write(const std::string& relative, const std::string& text) const;
  // The names (not paths) of the directory's direct entries, in directory order.
  std::vector<std::string> Entries() const;

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int status = -1;
  std::string out, err;
};
// Runs the command line `shardtrace args...` in process through the CLI entry point
// (cli/cli.h RunCli), capturing what it writes to stdout and stderr and its exit status:
// the same contract as the binary, without a process per test.
CommandResult RunShardtrace(const std::vector<std::string>& args);
// Runs the built shardtrace binary with `args` (shell-quoted here) and stdin from /dev/null,
// capturing stdout and stderr separately. Fails the test unless the binary exited normally.
// For the few end-to-end tests of the real executable (main, exit codes, streams).
CommandResult RunShardtraceBinary(const std::vector<std::string>& args);

// The small Mixtral-style dims of the documented pages (M=16, H=32, K=2, S=4, one sequence
// per device), as key=value overrides.
const std::vector<std::string>& SmallMoeDims();

// The release sweep (testdata/maxtext-moe-models/sweep/, one JSON file per MoE model file of
// MaxText 0.2.5): its files, sorted, and its meshes as (case name, label) in the order the
// release pages show them.
std::vector<std::filesystem::path> ReleaseSweepFiles();
const std::vector<std::pair<std::string, std::string>>& ReleaseSweepMeshes();
// The meshes' cells of a markdown table's header and rule rows: (" fsdp=8 | ...", "---|...").
std::pair<std::string, std::string> ReleaseSweepMeshColumns();

// A numeric run with seed 1 (the pages' seed) of the config `args` on `devices` devices.
RunResult SeededRun(const std::vector<std::string>& args, int64_t devices,
                    Block block = Block::kMoe, bool masked_loop = false);

// The symbolic (full-size) trace of `block` for `args` on `devices` devices.
Trace SymbolicTrace(const std::vector<std::string>& args, int64_t devices,
                    Block block = Block::kMoe);

// One row of the "Known disagreements" table of testdata/maxtext/README.md: an array of a
// MaxText case that differs from shardtrace's at the default tolerance, and the tolerance it
// agrees at (none: never).
struct Known {
  std::string case_name, array;
  std::optional<std::pair<double, double>> agrees_at;  // atol, rtol
};
// The table's rows: | case | array | agrees at | ... |, "agrees at" being "atol A, rtol R" or "-".
std::vector<Known> KnownDisagreements();

}  // namespace shardtrace::testing
