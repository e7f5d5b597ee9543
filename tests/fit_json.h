// `shardtrace fit` on the test models' base.yml (testdata/maxtext-moe-models) with a user's
// overrides and `--format json`, run in process as a user runs it, its output parsed: the fit
// tests' one way to ask fit a question.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace::testing {

inline nlohmann::json FitJson(const std::vector<std::string>& overrides) {
  std::vector<std::string> args = {"fit",
                                   SourcePath("testdata/maxtext-moe-models/configs/base.yml")};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--format", "json"});
  const CommandResult r = RunShardtrace(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace shardtrace::testing
