// Values quoted as strings for typed keys (config/lax_scalars.h): MaxText 0.2.5's config is a
// pydantic model in lax mode, so `ici_expert_parallelism: "4"` is 4 and `sparse_matmul: "no"`
// is False, while "4.5" for an int or "maybe" for a bool is refused, and so is a number for a
// string key. Each rule as measured on maxtext 0.2.5 (pyconfig.initialize, pydantic 2.14),
// through `shardtrace config`.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

using testing::CommandResult;
using testing::RunShardtrace;
using testing::SourcePath;

// A config file `name` over the release's base.yml holding `keys`.
std::string ReleaseFile(const testing::TempDir& dir, const std::string& keys,
                        const std::string& name = "quoted.yml") {
  return dir.Write(name, "base_config: \"" +
                             SourcePath("testdata/maxtext-moe-models/configs/base.yml") + "\"\n" +
                             keys);
}

nlohmann::json ConfigJson(std::vector<std::string> args) {
  args.insert(args.begin(), {"config", "--format", "json"});
  const CommandResult r = RunShardtrace(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  return nlohmann::json::parse(r.out);
}

// Status 2, nothing on stdout, one error line.
std::string Refusal(std::vector<std::string> args) {
  args.insert(args.begin(), "config");
  const CommandResult r = RunShardtrace(args);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  return r.err;
}

TEST_CASE("Quoted numbers and booleans are read as MaxText's config reads them", "[config]") {
  const testing::TempDir dir;
  const std::string file = ReleaseFile(dir,
                                       "model_name: mixtral-8x7b\n"
                                       "ici_expert_parallelism: \"4\"\n"
                                       "capacity_factor: \"1.5\"\n"
                                       "sparse_matmul: \"no\"\n"
                                       "megablox: 1\n"
                                       "max_target_length: \"1_024\"\n");
  const nlohmann::json j = ConfigJson({file, "--devices", "4"});
  CHECK(j["mesh"]["axes"]["expert"] == 4);
  CHECK(j["keys"]["path"]["capacity_factor"] == 1.5);
  CHECK(j["keys"]["path"]["sparse_matmul"] == false);
  CHECK(j["keys"]["path"]["megablox"] == true);
  CHECK(j["dims"]["S"] == 1024);
  CHECK(j["path"]["label"] == "dense_matmul (token dropping)");
  // The same on the command line: OmegaConf keeps '"4.0"' a string, pydantic reads it as 4.
  const nlohmann::json cli =
      ConfigJson({ReleaseFile(dir, "model_name: mixtral-8x7b\n"), "ici_expert_parallelism=\"4.0\"",
                  "capacity_factor='1.5'", "sparse_matmul=\"False\"", "--devices", "4"});
  CHECK(cli["mesh"]["axes"]["expert"] == 4);
  CHECK(cli["keys"]["path"]["capacity_factor"] == 1.5);
  CHECK(cli["keys"]["path"]["sparse_matmul"] == false);
}

TEST_CASE("What MaxText's config refuses for a typed key is refused naming the key", "[config]") {
  const testing::TempDir dir;
  const std::string base = ReleaseFile(dir, "");
  CHECK(Refusal({base, "ici_expert_parallelism=\"4.5\""}) ==
        "shardtrace: error: ici_expert_parallelism: expected an integer, got '4.5'\n");
  CHECK(Refusal({base, "ici_expert_parallelism=\"1e1\""}) ==
        "shardtrace: error: ici_expert_parallelism: expected an integer, got '1e1'\n");
  CHECK(Refusal({base, "sparse_matmul=\"maybe\""}) ==
        "shardtrace: error: sparse_matmul: expected a boolean, got 'maybe'\n");
  CHECK(Refusal({base, "sparse_matmul=2"}) ==
        "shardtrace: error: sparse_matmul: expected a boolean, got 2\n");
  CHECK(Refusal({base, "capacity_factor=\"high\""}) ==
        "shardtrace: error: capacity_factor: expected a float, got 'high'\n");
  const std::string in_file = ReleaseFile(dir, "run_name: 123\n", "number.yml");
  CHECK(Refusal({in_file}) ==
        "shardtrace: error: run_name: expected a string, got 123 (in " + in_file +
            "); MaxText's config refuses a number or boolean for a string key: quote it "
            "(run_name: \"123\" in YAML, run_name='\"123\"' on the command line)\n");
  // Quoted (what the shell passes for run_name='"123"'), it is the string MaxText takes.
  CHECK(ConfigJson({base, "run_name=\"123\""})["overrides"][0] == "run_name=\"123\"");
}

TEST_CASE("A model file's value and an override's differ when spelled differently", "[config]") {
  // pyconfig compares the two before pydantic converts them: mixtral-8x7b.yml's num_experts 8
  // and an override "8" differ, so MaxText asks for override_model_config.
  const testing::TempDir dir;
  const std::string base = ReleaseFile(dir, "");
  const std::string refusal = Refusal({base, "model_name=mixtral-8x7b", "num_experts=\"8\""});
  CHECK_THAT(refusal, Catch::StartsWith("shardtrace: error: num_experts is set both by ") &&
                          Catch::EndsWith(" (8) and by the overrides ('8'); add "
                                          "override_model_config=true to let the override win\n"));
  CHECK(ConfigJson({base, "model_name=mixtral-8x7b",
                    "num_experts=8"})["keys"]["model"]["num_experts"] == 8);
}

TEST_CASE("override_model_config is read by Python's truth before pydantic reads it", "[config]") {
  // pyconfig asks temp_cfg.get("override_model_config") of the overrides as spelled: the
  // string "false" is true there, so the override wins over the model file (measured: MaxText
  // runs num_experts=4); unquoted false keeps the model's 8 and refuses the clash.
  const testing::TempDir dir;
  const std::string base = ReleaseFile(dir, "");
  const nlohmann::json quoted = ConfigJson(
      {base, "model_name=mixtral-8x7b", "override_model_config=\"false\"", "num_experts=4"});
  CHECK(quoted["keys"]["model"]["num_experts"] == 4);
  CHECK_THAT(
      Refusal({base, "model_name=mixtral-8x7b", "override_model_config=false", "num_experts=4"}),
      Catch::StartsWith("shardtrace: error: num_experts is set both by "));
}

}  // namespace
}  // namespace shardtrace
