// A case's config.yml (config/case_config.h): its keys are MaxText command-line overrides over
// the base it names, applied in pyconfig's order (base, model file, overrides with
// override_model_config), one test per rule, all through `shardtrace config --format json`.
#include "config/case_config.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

using testing::RunShardtrace;
using testing::SourcePath;

// The release's base.yml with its deepseek3-tiny model file, in a scratch configs folder.
struct Scratch {
  testing::TempDir dir;
  Scratch() {
    dir.Write("configs/base.yml",
              testing::ReadFile(SourcePath("testdata/maxtext/configs/base.yml")));
    dir.Write("configs/models/deepseek3-tiny.yml",
              testing::ReadFile(SourcePath("testdata/maxtext/configs/models/deepseek3-tiny.yml")));
  }
  // A case file under cases/c/ naming ../../configs/base.yml, marked or not.
  std::string Case(const std::string& keys, bool marked = true) const {
    return dir.Write("cases/c/config.yml",
                     std::string(marked ? std::string(kCaseMarker) + "\n" : "") +
                         "base_config: \"../../configs/base.yml\"\n" + keys);
  }
};

nlohmann::json Config(std::vector<std::string> args) {
  args.insert(args.begin(), {"config", "--format", "json"});
  const testing::CommandResult r = RunShardtrace(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

const char* kTiny =
    "model_name: \"deepseek3-tiny\"\noverride_model_config: true\nbase_emb_dim: 16\n";

TEST_CASE("a case file's keys win over its model file, as MaxText's overrides do", "[case]") {
  const Scratch s;
  const nlohmann::json j = Config({s.Case(kTiny)});
  CHECK(j["dims"]["M"] == 16);  // the model file says 7168 x scale; the case's override wins
  CHECK(j["files"].back().get<std::string>().find("(command-line overrides)") != std::string::npos);
}

TEST_CASE("without the marker a config file is a file: the model file wins over it", "[case]") {
  const Scratch s;
  const nlohmann::json marked = Config({s.Case(kTiny)});
  const nlohmann::json plain = Config({s.Case(kTiny, /*marked=*/false)});
  CHECK(plain["dims"]["M"] != 16);  // pyconfig: base <- config file <- model file
  CHECK(plain["dims"]["M"] != marked["dims"]["M"]);
}

TEST_CASE("the user's key=value wins over a case file's keys", "[case]") {
  const Scratch s;
  CHECK(Config({s.Case(kTiny), "base_emb_dim=32"})["dims"]["M"] == 32);
}

TEST_CASE("a CONFIG the user gives replaces the case's base_config", "[case]") {
  const Scratch s;
  // The seed-era base, embedded copy on disk: the case's keys still apply as overrides, the
  // model is looked up beside the user's base.
  const nlohmann::json j = Config({SourcePath("testdata/maxtext-configs/base.yml"), s.Case(kTiny)});
  CHECK(j["files"].front() == SourcePath("testdata/maxtext-configs/base.yml"));
  CHECK(j["dims"]["M"] == 16);
  CHECK(j["maxtext_revision"]["name"] == "e591f30");
}

TEST_CASE("a case file's base_config that does not exist is named in one line", "[case]") {
  const testing::TempDir dir;
  const std::string path = dir.Write(
      "config.yml", std::string(kCaseMarker) + "\nbase_config: \"missing.yml\"\nnum_experts: 4\n");
  const testing::CommandResult r = RunShardtrace({"config", path});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::StartsWith("shardtrace: error: base_config 'missing.yml' (in " + path));
}

}  // namespace
}  // namespace shardtrace
