// `fit` and `plan` as a user reads them, pinned as golden files in testdata/expected/ (`make
// golden` rewrites them; review with git diff): Mixtral on v5p-64 from the embedded release
// config (`make demo`'s job), DeepSeek-V3's published v5p-256 recipe near the HBM line, a GPU
// slice that does not fit, gradient accumulation as JSON, and plan's ranked search. The other
// fit tests hold the figures to the TPU compiler's; these hold every line a reader sees.
#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace::testing {
namespace {

std::vector<std::string> WithBase(std::vector<std::string> args) {
  args.insert(args.begin() + 1, SourcePath("testdata/maxtext-moe-models/configs/base.yml"));
  return args;
}

// The output with what differs from run to run or machine to machine made constant: the
// source tree's path (plan prints MaxText's command line with the config as given) and plan's
// own timing.
std::string Stable(std::string out) {
  const std::string root = SourcePath("");
  for (size_t at = out.find(root); at != std::string::npos; at = out.find(root, at))
    out.replace(at, root.size(), "");
  return std::regex_replace(out, std::regex(R"(evaluated in [0-9.]+ s \([0-9]+ per second\))"),
                            "evaluated in <seconds> s (<rate> per second)");
}

void CheckGolden(const std::string& golden, const std::vector<std::string>& args) {
  const CommandResult r = RunShardtrace(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CompareWithGolden("expected/" + golden, Stable(r.out));
}

TEST_CASE("fit's report of the embedded release config is golden", "[fit][golden]") {
  CheckGolden("fit_mixtral-8x7b_v5p64.txt",
              {"fit", "model_name=mixtral-8x7b", "compile_topology=v5p-64"});
}

TEST_CASE("fit's report of DeepSeek-V3's published v5p-256 recipe is golden", "[fit][golden]") {
  CheckGolden("fit_deepseek3-671b_v5p256_recipe.txt",
              WithBase({"fit", "model_name=deepseek3-671b", "compile_topology=v5p-256",
                        "compile_topology_num_slices=1", "per_device_batch_size=7",
                        "max_target_length=8192", "ici_fsdp_parallelism=128",
                        "weight_dtype=bfloat16", "opt_type=sgd", "remat_policy=custom",
                        "decoder_layer_input=offload"}));
}

TEST_CASE("fit's report of a GPU slice that does not fit is golden", "[fit][golden]") {
  CheckGolden("fit_mixtral-8x7b_gpu8.txt",
              WithBase({"fit", "model_name=mixtral-8x7b", "--devices", "8", "--hbm", "80",
                        "per_device_batch_size=2", "max_target_length=4096"}));
}

TEST_CASE("fit's JSON under gradient accumulation is golden", "[fit][golden]") {
  CheckGolden("fit_qwen3-30b-a3b_v6e8_ga4.json",
              WithBase({"fit", "model_name=qwen3-30b-a3b", "compile_topology=v6e-8",
                        "compile_topology_num_slices=1", "override_model_config=true",
                        "base_num_decoder_layers=4", "per_device_batch_size=8",
                        "gradient_accumulation_steps=4", "max_target_length=4096", "--format",
                        "json"}));
}

TEST_CASE("plan's ranked search is golden", "[plan][golden]") {
  CheckGolden("plan_mixtral-8x7b_l2_v5p32.txt",
              WithBase({"plan", "model_name=mixtral-8x7b", "override_model_config=true",
                        "base_num_decoder_layers=2", "compile_topology=v5p-32",
                        "compile_topology_num_slices=1", "max_target_length=2048",
                        "per_device_batch_size=4", "--top", "5"}));
}

}  // namespace
}  // namespace shardtrace::testing
