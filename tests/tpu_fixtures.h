// The whole-step TPU fixtures (testdata/maxtext-tpu/steps/*.json: MaxText 0.2.5's train step
// compiled by libtpu, tools/maxtext_oracle/export_tpu_step.py) and the differences file that
// lists, with reasons, the bounds fit misses on them: what the fit and plan tests read of them.
#pragma once

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace::testing {

struct Fixture {
  std::string name;  // the file's stem, the case's name in tpu_cases.py
  nlohmann::json tpu;
};

// Every fixture, by name.
inline std::vector<Fixture> TpuFixtures() {
  std::vector<Fixture> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(SourcePath("testdata/maxtext-tpu/steps"))) {
    if (entry.path().extension() != ".json") continue;
    out.push_back({entry.path().stem().string(), nlohmann::json::parse(ReadFile(entry.path()))});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

// One fixture, by name (a missing one fails the test with its path).
inline nlohmann::json TpuFixture(const std::string& name) {
  return nlohmann::json::parse(
      ReadFile(SourcePath("testdata/maxtext-tpu/steps/" + name + ".json")));
}

// `shardtrace fit` on the fixture's argv, with the release base.yml of testdata (byte-identical to
// the venv's, testdata/maxtext-moe-models/PROVENANCE.md) in place of the venv's path, then
// `extra` overrides: the text form.
inline std::vector<std::string> FitTextArgs(const nlohmann::json& tpu,
                                            const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"fit",
                                   SourcePath("testdata/maxtext-moe-models/configs/base.yml")};
  const auto& argv = tpu.at("argv");
  for (size_t i = 1; i < argv.size(); ++i) args.push_back(argv[i].get<std::string>());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The same as JSON.
inline std::vector<std::string> FitArgs(const nlohmann::json& tpu,
                                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = FitTextArgs(tpu, extra);
  args.push_back("--format");
  args.push_back("json");
  return args;
}

inline nlohmann::json Differences() {
  return nlohmann::json::parse(ReadFile(SourcePath("testdata/maxtext-tpu/fit_differences.json")));
}

// Whether the differences file lists `fixture` as missing `bound` ('verdict', 'temp 10%', ...).
inline bool Listed(const nlohmann::json& diffs, const std::string& fixture,
                   const std::string& bound) {
  for (const auto& d : diffs.at("differences")) {
    if (d.at("fixture") == fixture && d.at("bound") == bound) return true;
  }
  return false;
}

}  // namespace shardtrace::testing
