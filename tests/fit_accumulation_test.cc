// Gradient accumulation through `shardtrace fit` (model/gradient_accumulation.h): the step of N
// microbatches is the step of one beside an accumulator shaped like the gradients, with the
// whole batch among its inputs and every collective run N times; the TPU fixtures
// (mixtral_l2_v5p8_ga2, qwen3_30b_l4_v6e8_ga4, compiled held out) hold it to the compiler.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::RunShardtrace;
using testing::SourcePath;

json Fit(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"fit",
                                   SourcePath("testdata/maxtext-moe-models/configs/base.yml"),
                                   "model_name=qwen3-30b-a3b",
                                   "compile_topology=v6e-8",
                                   "override_model_config=true",
                                   "base_num_decoder_layers=4",
                                   "per_device_batch_size=2",
                                   "max_target_length=4096",
                                   "--format",
                                   "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CommandResult r = RunShardtrace(args);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("gradient accumulation is the step of one microbatch beside the accumulator", "[fit]") {
  const json one = Fit({});
  const json four = Fit({"gradient_accumulation_steps=4"});
  const json& c1 = one.at("components");
  const json& c4 = four.at("components");
  CHECK(c1.at("gradient_accumulator") == 0);
  // The accumulator is zeros like the parameters (all of them trainable here).
  const int64_t gradients = c1.at("parameters").get<int64_t>();
  CHECK(c4.at("gradient_accumulator") == gradients);
  CHECK(c4.at("batch") == 4 * c1.at("batch").get<int64_t>());
  CHECK(four.at("argument_size_in_bytes").get<int64_t>() ==
        one.at("argument_size_in_bytes").get<int64_t>() + 3 * c1.at("batch").get<int64_t>());
  CHECK(four.at("temp_size_in_bytes").get<int64_t>() ==
        one.at("temp_size_in_bytes").get<int64_t>() + gradients);
  REQUIRE(four.at("collectives").size() == one.at("collectives").size());
  for (size_t i = 0; i < one.at("collectives").size(); ++i) {
    CHECK(four.at("collectives")[i].at("count") ==
          4 * one.at("collectives")[i].at("count").get<int64_t>());
    CHECK(four.at("collectives")[i].at("bytes_per_device") ==
          4 * one.at("collectives")[i].at("bytes_per_device").get<int64_t>());
  }
}

}  // namespace shardtrace
