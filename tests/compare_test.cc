// The comparison room from the command line: compare-dump against MaxText's own sharding
// dumps (both must agree; a hand-edited copy must fail naming the tensor), trace diff and
// render. Output is pinned as golden text in testdata/expected/.
#include <catch2/catch.hpp>
#include <filesystem>

#include "check/sharding_dump.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using testing::CompareWithGolden;
using testing::RunShardtrace;

constexpr char kDeepseekDump[] =
    "testdata/maxtext-sharding-dumps/"
    "deepseek2-16b_v6e-16_default_ici_fsdp_parallelism--1_ici_expert_parallelism-4";
constexpr char kGptOssDump[] =
    "testdata/maxtext-sharding-dumps/"
    "gpt-oss-20b_tpu7x-16_default_ici_fsdp_parallelism--1_ici_expert_parallelism-2";
constexpr char kEditedDump[] =
    "testdata/compare-dump/edited/"
    "deepseek2-16b_v6e-16_default_ici_fsdp_parallelism--1_ici_expert_parallelism-4";
constexpr char kHeadBase[] = "testdata/maxtext-configs/base.yml";

TEST_CASE("compare-dump: both MaxText dumps agree with the trace of the same run",
          "[compare][dump]") {
  const auto deepseek = RunShardtrace({"compare-dump", kDeepseekDump, kHeadBase});
  CHECK(deepseek.err.empty());
  CHECK(deepseek.status == 0);
  CompareWithGolden("expected/compare_dump_deepseek2-16b.txt", deepseek.out);
  const auto gpt_oss = RunShardtrace({"compare-dump", kGptOssDump, kHeadBase, "--format", "json"});
  CHECK(gpt_oss.err.empty());
  CHECK(gpt_oss.status == 0);
  CompareWithGolden("expected/compare_dump_gpt-oss-20b.json", gpt_oss.out);
  // Parameters and activations are really compared: every MoE kernel of both dumps is there.
  CHECK(deepseek.out.find("agree   decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/wo ") !=
        std::string::npos);
  CHECK(gpt_oss.out.find("\"only_in_dump\": 0") != std::string::npos);
  CHECK(gpt_oss.out.find("\"agree\": 24") != std::string::npos);
}

TEST_CASE("compare-dump: a hand-edited dump fails naming the tensor and the field",
          "[compare][dump]") {
  const auto r = RunShardtrace({"compare-dump", kEditedDump, kHeadBase, "--format", "markdown"});
  CHECK(r.status == 1);
  CHECK(r.err.empty());
  CompareWithGolden("expected/compare_dump_edited.md", r.out);
  CHECK(r.out.find("| `decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/wo` | spec | "
                   "`P('expert', 'fsdp', None)` | `P('expert', None, 'fsdp')` |") !=
        std::string::npos);
  CHECK(r.out.find("1 differ") != std::string::npos);
}

TEST_CASE("compare-dump: model, overrides and devices come from MaxText's own layout",
          "[compare][dump]") {
  testing::TempDir dir;
  const std::string nested = (dir /
                              "sharding_info/deepseek2-16b/v6e-16/slice_1/"
                              "rule_default_ici_fsdp_parallelism=-1_ici_expert_parallelism=4")
                                 .string();
  std::filesystem::create_directories(nested);
  for (const char* f : {"named_shardings.json", "logical_shardings.json", "input_shardings.json"})
    std::filesystem::copy_file(testing::SourcePath(std::string(kDeepseekDump) + "/" + f),
                               nested + "/" + f);
  const InferredRun run = InferRun(ReadShardingDump(nested));
  CHECK(run.model_name == "deepseek2-16b");
  CHECK(run.topology == "v6e-16");
  CHECK(run.rule == "default");
  CHECK(run.overrides ==
        std::vector<std::string>{"ici_fsdp_parallelism=-1", "ici_expert_parallelism=4"});
  CHECK(run.devices == 16);
  // A flag overrides what the name says: EP 2 on the same mesh size differs from the dump.
  const auto r = RunShardtrace(
      {"compare-dump", nested, testing::SourcePath(kHeadBase), "ici_expert_parallelism=2"});
  CHECK(r.status == 1);
  CHECK(r.out.find("mesh      dump mesh['fsdp'=4, 'expert'=4], trace mesh['fsdp'=8, "
                   "'expert'=2]: DIFFER") != std::string::npos);
}

TEST_CASE("compare-dump: a directory without the dump files exits 2 naming the file",
          "[compare][dump]") {
  testing::TempDir dir;
  const auto r = RunShardtrace({"compare-dump", dir.path().string()});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("shardtrace: error: ") == 0);
  CHECK(r.err.find("named_shardings.json: cannot read") != std::string::npos);
}

}  // namespace
}  // namespace shardtrace
