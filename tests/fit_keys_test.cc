// The train step's key table (model/step_keys.h): every key of it, set away from its default
// through `shardtrace fit` with the release's base.yml, is refused in one line naming it and
// its value (exit 2, nothing on stdout) or shows in the fit's notes beside an unchanged
// verdict; its defaults are the base.yml's; docs/fit-keys.md is the table.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/run_inputs.h"
#include "model/step_keys.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::RunShardtrace;
using testing::SourcePath;

// The release's base.yml beside its MoE model files (the same file as testdata/maxtext/'s).
const std::string kRelease = SourcePath("testdata/maxtext-moe-models/configs/base.yml");

CommandResult Fit(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "fit", kRelease, "model_name=mixtral-8x7b", "compile_topology=v5p-64", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunShardtrace(args);
}

std::vector<std::string> Overrides(const StepKeyEntry& e) {
  std::vector<std::string> out = {fmt::format("{}={}", e.key, e.example)};
  std::string_view needs = e.needs;
  while (!needs.empty()) {
    const size_t end = std::min(needs.find(' '), needs.size());
    out.emplace_back(needs.substr(0, end));
    needs.remove_prefix(std::min(end + 1, needs.size()));
  }
  return out;
}

}  // namespace

TEST_CASE("The step key table's defaults are the release base.yml's", "[keys][fit]") {
  const Config release = Config::Load(ConfigSource{{kRelease}, {}});
  for (const StepKeyEntry& e : StepKeyTable()) {
    INFO(e.key);
    REQUIRE(release.Has(e.key));
    CHECK(release.Get(e.key).ToString() == e.default_value);
  }
}

TEST_CASE("fit refuses or notes every train-step key set away from its default", "[keys][fit]") {
  const CommandResult plain = Fit({});
  REQUIRE(plain.status == 0);
  const json base = json::parse(plain.out);
  for (const StepKeyEntry& e : StepKeyTable()) {
    INFO(e.key);
    const CommandResult r = Fit(Overrides(e));
    const Config set = Config::Load(ConfigSource{{kRelease}, Overrides(e)});
    const std::string shown = fmt::format("{}={}", e.key, set.Get(e.key).ToString());
    if (e.status == StepKeyStatus::kRefused) {
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(r.err == fmt::format("shardtrace: error: {}: fit does not model {}; expected {} "
                                 "(docs/fit-keys.md)\n",
                                 shown, e.what, e.default_value));
      continue;
    }
    REQUIRE(r.status == 0);
    const json fit = json::parse(r.out);
    int named = 0;
    for (const json& note : fit.at("notes")) named += note == fmt::format("{}: {}", shown, e.what);
    CHECK(named == 1);
    CHECK(fit.at("peak_memory_in_bytes") == base.at("peak_memory_in_bytes"));
  }
  // The default written another way is the default: no note.
  const CommandResult zero = Fit({"dropout_rate=0"});
  REQUIRE(zero.status == 0);
  CHECK(json::parse(zero.out).at("notes") == base.at("notes"));
}

TEST_CASE("fit names a mesh axis that splits the sequence, whose exchange it does not count",
          "[keys][fit]") {
  const CommandResult r = Fit({"ici_context_parallelism=2"});
  REQUIRE(r.status == 0);
  const json fit = json::parse(r.out);
  CHECK(fit.at("mesh") == "mesh['fsdp'=16, 'context'=2]");
  int named = 0;
  for (const json& note : fit.at("notes")) {
    named += note ==
             "mesh axis 'context' has 2 devices: the attention's exchange of keys and values over "
             "it is not counted";
  }
  CHECK(named == 1);
}

TEST_CASE(
    "With no config file fit loads the release's own embedded files, and refuses another "
    "revision's rules that leave a layout axis without one",
    "[fit]") {
  const std::vector<std::string> run = {"model_name=mixtral-8x7b", "compile_topology=v5p-64",
                                        "--format", "json"};
  std::vector<std::string> embedded = {"fit"};
  embedded.insert(embedded.end(), run.begin(), run.end());
  std::vector<std::string> given = {"fit", kRelease};
  given.insert(given.end(), run.begin(), run.end());
  const CommandResult a = RunShardtrace(embedded), b = RunShardtrace(given);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  const json from_embedded = json::parse(a.out), from_file = json::parse(b.out);
  CHECK(from_embedded.at("maxtext_revision") == "MaxText 0.2.5 (the PyPI release)");
  for (const char* field : {"argument_size_in_bytes", "temp_size_in_bytes", "peak_memory_in_bytes",
                            "params", "collectives"}) {
    INFO(field);
    CHECK(from_embedded.at(field) == from_file.at(field));
  }
  // The seed era's rules have no embed_attn: every attention kernel would stay whole.
  std::vector<std::string> seed = embedded;
  seed.push_back("--maxtext-revision=seed");
  const CommandResult refused = RunShardtrace(seed);
  CHECK(refused.status == 2);
  CHECK(refused.out.empty());
  CHECK(refused.err ==
        "shardtrace: error: decoder/layers/self_attention/key/kernel: its logical axis "
        "'embed_attn' (MaxText 0.2.5's layout) has no rule in the logical_axis_rules of MaxText "
        "313890777 (the seed revision); fit's layouts are the release's: give its base.yml, or "
        "no config file and no other --maxtext-revision\n");
}

TEST_CASE("docs/fit-keys.md is the step key table", "[keys][fit]") {
  testing::CompareWithGolden("../docs/fit-keys.md", StepKeyTableMarkdown());
}

}  // namespace shardtrace
