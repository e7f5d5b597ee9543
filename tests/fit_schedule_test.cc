// `fit`'s two orders of a gmm block's backward on TPU (model/block_step.h): the weight
// gradients after every activation gradient, TPU's scheduler's choice with memory to spare,
// and each weight gradient as its dot's backward runs where the first would take the step
// past the scheduler's memory limit. Through the CLI, on configs the TPU fixtures compiled
// (testdata/maxtext-tpu/steps: pair_mixtral_l2_v5p8_s8192_pdb24 and _pdb32).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace shardtrace::testing {
namespace {

using nlohmann::json;

json MixtralAtSequence8192(int batch) {
  const CommandResult r = RunShardtrace(
      {"fit", SourcePath("testdata/maxtext-moe-models/configs/base.yml"), "model_name=mixtral-8x7b",
       "compile_topology=v5p-8", "override_model_config=true", "base_num_decoder_layers=2",
       fmt::format("per_device_batch_size={}", batch), "max_target_length=8192", "--format",
       "json"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

std::vector<std::string> SchedulerNotes(const json& fit) {
  std::vector<std::string> notes;
  for (const json& n : fit.at("notes"))
    if (n.get<std::string>().find("scheduler past its memory limit") != std::string::npos)
      notes.push_back(n);
  return notes;
}

TEST_CASE("past the scheduler's memory limit the MoE backward runs each weight gradient at once",
          "[fit]") {
  // Batch 32 compiles at 93% of HBM, its fullest moment three bf16[524288,14336] and no
  // weight gradient pending; with the weight gradients last it would pass 95%.
  const json at32 = MixtralAtSequence8192(32);
  CHECK(at32.at("fits").get<bool>());
  CHECK(SchedulerNotes(at32) ==
        std::vector<std::string>{
            "TPU's scheduler past its memory limit: each MoE weight gradient as its dot's "
            "backward runs, 6.0 GiB under the weight gradients last (its choice with memory to "
            "spare; model/block_step.h)"});
  // The compiler's temp_size_in_bytes is 85,811,658,752 B (the fixture); fit's 0.04% under.
  CHECK(at32.at("temp_size_in_bytes").get<int64_t>() == 85781135392);

  // Batch 24 stays under the limit with the weight gradients last (90.5% of HBM by fit's
  // count): no fallback. The compiler took the lean order there too (listed: 'peak band').
  const json at24 = MixtralAtSequence8192(24);
  CHECK(at24.at("fits").get<bool>());
  CHECK(SchedulerNotes(at24).empty());
  CHECK(at24.at("temp_size_in_bytes").get<int64_t>() == 83464044576);
}

}  // namespace
}  // namespace shardtrace::testing
