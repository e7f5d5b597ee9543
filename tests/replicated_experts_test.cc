// Experts left replicated under expert parallelism (issue 27's D1): deepseek3-671b-2dfsdp's
// logical rules map no mesh axis to 'exp', so on a mesh with EP every shard gets all experts and
// MaxText's megablox gmm (group_offset 0) reads the first E/EP of them on every shard. The oracle
// cases shared_2dfsdp_fsdp2_ep2/_ep4 hold MaxText's own numbers and what
// tools/maxtext_oracle/replicated_experts.py measured about them; shardtrace must reproduce
// the numbers and say, in every output, that they are not one device's.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::SourcePath;

constexpr const char* kWarningStart = "the logical rules map no mesh axis to 'exp'";

std::vector<std::string> Release2dFsdp(const std::vector<std::string>& mesh) {
  std::vector<std::string> args = {"trace",
                                   SourcePath("testdata/maxtext-moe-models/configs/base.yml"),
                                   "model_name=deepseek3-671b-2dfsdp",
                                   "max_target_length=4096",
                                   "per_device_batch_size=1",
                                   "enable_checkpointing=false",
                                   "skip_jax_distributed_system=true"};
  args.insert(args.end(), mesh.begin(), mesh.end());
  return args;
}

TEST_CASE("Replicated experts under EP: check reproduces MaxText's wrong-expert numbers and warns",
          "[maxtext][release]") {
  for (const auto& [name, ep, local] : std::vector<std::tuple<std::string, int, int>>{
           {"shared_2dfsdp_fsdp2_ep2", 2, 4}, {"shared_2dfsdp_fsdp2_ep4", 4, 2}}) {
    INFO("case " << name);
    const std::string dir = SourcePath("testdata/maxtext/cases/" + name);
    // What MaxText computed there (replicated_experts.py): not one device's block, but the
    // one-device block with expert e's kernels replaced by expert (e mod E/EP)'s.
    const json measured = json::parse(ReadFile(dir + "/replicated_experts.json"));
    CHECK(measured.at("parameters_equal_to_one_device").get<bool>());
    CHECK(measured.at("local_experts").get<int>() == local);
    CHECK(measured.at("max_abs_diff_vs_hypothesis").get<double>() < 1e-5);
    CHECK(measured.at("max_abs_diff_vs_one_device").get<double>() > 0.1);

    const CommandResult text = RunShardtrace({"check", dir, "--quiet"});
    INFO(text.out << text.err);
    CHECK(text.status == 0);
    CHECK(text.out.find(fmt::format("sparse_matmul/ragged_all_to_all (EP={}", ep)) !=
          std::string::npos);
    CHECK(text.out.find(fmt::format("  warning: {}", kWarningStart)) != std::string::npos);
    CHECK(text.out.find(fmt::format("instead of expert s*{}+j's", local)) != std::string::npos);
    const CommandResult j = RunShardtrace({"check", dir, "--format", "json", "--quiet"});
    const json report = json::parse(j.out).at(0);
    CHECK(report.at("passed").get<bool>());
    REQUIRE(report.at("warnings").size() == 1);
    CHECK(report.at("warnings").at(0).get<std::string>().rfind(kWarningStart, 0) == 0);
  }
}

TEST_CASE("deepseek3-671b-2dfsdp with expert parallelism traces with all experts on every device",
          "[release]") {
  std::vector<std::string> args =
      Release2dFsdp({"ici_fsdp_parallelism=2", "ici_expert_parallelism=4", "--devices", "8"});
  args.insert(args.end(), {"--format", "json", "--quiet"});
  const CommandResult r = RunShardtrace(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json trace = json::parse(r.out);
  REQUIRE(trace.at("warnings").size() == 1);
  const std::string warning = trace.at("warnings").at(0);
  CHECK(warning.rfind(kWarningStart, 0) == 0);
  CHECK(warning.find("each of the 4 shards of 'expert' all 256 experts") != std::string::npos);
  CHECK(warning.find("instead of expert s*64+j's") != std::string::npos);
  // The kernels enter shard_map whole (P(None, None, None)) and each gmm reads groups 0-63.
  int gmms = 0;
  for (const json& op : trace.at("ops")) {
    if (op.at("kind") != "gmm") continue;
    ++gmms;
    CHECK(op.at("attrs").at("group_offset") == "0");
    CHECK(op.at("attrs").at("rhs_groups_read") == "0-63 of 256");
  }
  CHECK(gmms == 3);
  int whole = 0;
  for (const json& t : trace.at("tensors"))
    if (t.at("constraint") == "shard_map_in_specs" &&
        (t.at("name") == "w0" || t.at("name") == "wo")) {
      CHECK(t.at("local_shape").at(0) == 256);
      ++whole;
    }
  CHECK(whole == 2);

  // The table prints it under the header; without EP there is nothing to warn about.
  args = Release2dFsdp({"ici_fsdp_parallelism=2", "ici_expert_parallelism=4", "--devices", "8"});
  const CommandResult table = RunShardtrace(args);
  CHECK(table.out.find(fmt::format("\nwarning: {}", kWarningStart)) != std::string::npos);
  args = Release2dFsdp({"ici_fsdp_parallelism=8", "--devices", "8", "--format", "json"});
  const CommandResult fsdp = RunShardtrace(args);
  REQUIRE(fsdp.status == 0);
  CHECK(!json::parse(fsdp.out).contains("warnings"));
}

TEST_CASE("A page rendered for replicated experts under EP carries the warning in its summary",
          "[release]") {
  testing::TempDir dir;
  const CommandResult r = RunShardtrace(
      {"render", SourcePath("testdata/maxtext/cases/shared_2dfsdp_fsdp2_ep2/config.yml"),
       "--devices", "4", "-o", dir.File("page.md")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string page = ReadFile(dir.File("page.md"));
  const size_t summary = page.find("## Summary");
  const size_t warning = page.find(fmt::format("> **Warning:** {}", kWarningStart));
  REQUIRE(summary != std::string::npos);
  REQUIRE(warning != std::string::npos);
  CHECK(warning > summary);
}

}  // namespace
}  // namespace shardtrace
