// Helpers shared by the tests: paths into the source tree and golden text comparison.
// CompareWithGolden(rel, actual) compares `actual` with testdata/<rel> byte for byte; with
// UPDATE_GOLDEN=1 in the environment it rewrites the file instead (review with git diff).
#pragma once

#include <string>
#include <vector>

namespace shardtrace::testing {

std::string SourcePath(const std::string& relative);  // SHARDTRACE_SOURCE_DIR/relative
std::string ReadFile(const std::string& path);
void CompareWithGolden(const std::string& relative, const std::string& actual);

struct CommandResult {
  int status = 0;
  std::string out, err;
};
// Runs the built shardtrace binary with `args` (shell-quoted here), capturing both streams.
CommandResult RunShardtrace(const std::vector<std::string>& args);

}  // namespace shardtrace::testing
