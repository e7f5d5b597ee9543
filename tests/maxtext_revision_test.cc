// The MaxText revision a config runs (config/maxtext_revision.h): recognised from the keys its
// base.yml defines, named with --maxtext-revision, the nearest for a base.yml between
// revisions, and named alike by every output of every command.
#include "config/maxtext_revision.h"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using testing::RunShardtrace;
using testing::SourcePath;

const std::string kRelease = SourcePath("testdata/maxtext/configs/base.yml");
const std::string kMain = SourcePath("testdata/maxtext-configs/base.yml");

std::string RevisionName(const std::vector<std::string>& files, std::string_view flag = {}) {
  return Config::Load(ConfigSource{files, {}}, flag).revision().name;
}

}  // namespace

TEST_CASE("Each revision's base.yml is recognised by its fingerprint", "[revision]") {
  CHECK(RevisionName({}) == "313890777");
  CHECK(RevisionName({kMain}) == "e591f30");
  CHECK(RevisionName({kRelease}) == "0.2.5");
  const MaxTextRevision release = Config::Load(ConfigSource{{kRelease}, {}}).revision();
  CHECK(release.Title() == "MaxText 0.2.5 (the PyPI release)");
  CHECK(release.why == kRelease +
                           " defines moe_x_sorted, moe_use_direct_token_gather, "
                           "moe_topk_before_ep_all_gather, shard_embed_moe_on_fsdp, "
                           "moe_mlp_tp_size, log_required_ragged_buffer_factor");
  CHECK(release.behaviour.lb_loss_density_per_top_k);
  CHECK(release.behaviour.router_embed_axis == "embed_router");
}

TEST_CASE(
    "A named revision (--maxtext-revision) overrides the fingerprint; an unknown one is refused",
    "[revision]") {
  CHECK(RevisionName({kMain}, "seed") == "313890777");
  CHECK(RevisionName({}, "0.2.5") == "0.2.5");
  CHECK(RevisionName({}, "main") == "e591f30");
  const testing::CommandResult bad = RunShardtrace({"config", "--maxtext-revision", "0.2.4"});
  CHECK(bad.status == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err ==
        "shardtrace: error: unknown MaxText revision '0.2.4' (--maxtext-revision): expected one "
        "of 313890777 (seed), e591f30 (main), 0.2.5 (release)\n");
}

TEST_CASE("Naming the release with no config file loads its own embedded files", "[revision]") {
  const testing::CommandResult r = RunShardtrace(
      {"config", "--maxtext-revision", "0.2.5", "model_name=deepseek3-671b", "--format", "json"});
  REQUIRE(r.status == 0);
  const nlohmann::json config = nlohmann::json::parse(r.out);
  CHECK(config.at("files") ==
        nlohmann::json::array({"embedded release/base.yml (MaxText 0.2.5)",
                               "embedded release/models/deepseek3-671b.yml (MaxText 0.2.5)"}));
  // The seed era's embedded files stay the default, and main has none of its own.
  for (const char* revision : {"seed", "main"}) {
    const testing::CommandResult other =
        RunShardtrace({"config", "--maxtext-revision", revision, "model_name=deepseek3-671b",
                       "--format", "json"});
    REQUIRE(other.status == 0);
    CHECK(nlohmann::json::parse(other.out).at("files").at(0) ==
          "embedded base.yml (MaxText 313890777)");
  }
}

TEST_CASE("A base.yml between revisions gets the nearest, and says so", "[revision]") {
  // A checkout of mid-2026: token chunks already added, tensor_transpose not yet removed.
  const MaxTextRevision both =
      DetectRevision({"num_moe_token_chunks", "moe_dispatch_no_expert_sharding", "enable_nnx",
                      "ici_tensor_transpose_parallelism"},
                     "base.yml");
  CHECK(both.name == "e591f30");
  CHECK(both.why ==
        "base.yml matches more than one revision's fingerprint; nearest: e591f30 (100% of "
        "num_moe_token_chunks, moe_dispatch_no_expert_sharding, enable_nnx); "
        "--maxtext-revision picks another");
  const MaxTextRevision partial =
      DetectRevision({"moe_x_sorted", "moe_mlp_tp_size", "shard_embed_moe_on_fsdp"}, "b.yml");
  CHECK(partial.name == "0.2.5");
  CHECK(partial.why.find("matches no revision's fingerprint; nearest: 0.2.5 (50% of") !=
        std::string::npos);
}

TEST_CASE("Every output names the revision the run followed", "[revision]") {
  const std::vector<std::string> run = {kRelease,
                                        "base_emb_dim=64",
                                        "base_mlp_dim=128",
                                        "base_moe_mlp_dim=128",
                                        "num_experts=8",
                                        "num_experts_per_tok=2",
                                        "ici_expert_parallelism=2",
                                        "--devices",
                                        "4"};
  const auto with = [&](std::vector<std::string> head, std::vector<std::string> tail = {}) {
    head.insert(head.end(), run.begin(), run.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return RunShardtrace(head);
  };
  const std::string title = "MaxText 0.2.5 (the PyPI release)";
  const testing::CommandResult table = with({"trace"});
  REQUIRE(table.status == 0);
  CHECK(table.out.find("\nmoe.py " + title + " (" + kRelease + " defines moe_x_sorted") !=
        std::string::npos);
  const testing::CommandResult json = with({"trace", "--format", "json"});
  CHECK(nlohmann::json::parse(json.out)["maxtext_revision"] == title);
  CHECK(with({"config"}).out.find("moe.py     " + title) != std::string::npos);
  CHECK(nlohmann::json::parse(with({"dump"}).out)["shardtrace"]["maxtext_revision"] == title);
  CHECK(
      with({"diff"}, {"--a", "ici_expert_parallelism=1"}).out.find("moe.py " + title + " (both)") !=
      std::string::npos);
  const testing::CommandResult page = with({"render"});
  REQUIRE(page.status == 0);
  CHECK(page.out.find("| source | `maxtext/layers/moe.py` at " + title + " |") !=
        std::string::npos);
  // Its moe.py references are the release's (config/moe_lines.h): sparse_matmul starts at line
  // 2149 of 0.2.5's moe.py (922 of the seed's), and the release constrains the kernels in its
  // local _fsdp_all_gather (3599; the seed's _maybe_shard_with_pspec is 1434).
  CHECK(page.out.find("# RoutedMoE/sparse_matmul  (moe.py:2149)\n") != std::string::npos);
  CHECK(page.out.find("# maybe_shard_with_pspec, moe.py:3599\n") != std::string::npos);
  CHECK(page.out.find("`get_topk` (moe.py:1277-1359; numbers in parentheses") != std::string::npos);
  CHECK(page.out.find("moe.py:922") == std::string::npos);
  CHECK(page.out.find("moe.py:1434") == std::string::npos);
  // The flag names the revision for every run a command derives: both sides of a diff.
  const testing::CommandResult forced =
      with({"diff"}, {"--maxtext-revision", "main", "--a", "ici_expert_parallelism=1"});
  CHECK(forced.out.find("moe.py MaxText e591f30 (main of 2026-08-22) (both)") != std::string::npos);
  const testing::CommandResult check =
      RunShardtrace({"check", SourcePath("testdata/goldens/sparse_ep2_mixtral")});
  CHECK(check.out.find("  moe.py: MaxText 313890777 (the seed revision)\n") != std::string::npos);
}

TEST_CASE("shard-exp-on-fsdp with EP=2 runs as each revision runs it", "[revision]") {
  const std::vector<std::string> args = {"dump",
                                         kMain,
                                         "model_name=deepseek2-16b",
                                         "custom_mesh_and_rule=shard-exp-on-fsdp",
                                         "ici_fsdp_parallelism=-1",
                                         "ici_expert_parallelism=2",
                                         "--devices",
                                         "8"};
  // e591f30 drops fsdp from the kernels' specs (tests/trace_test.cc compares the dump with
  // MaxText's); the seed keeps it, and its ragged_dot gets 8 of the 32 local experts.
  CHECK(RunShardtrace(args).status == 0);
  std::vector<std::string> seed = args;
  seed.insert(seed.end(), {"--maxtext-revision", "seed"});
  const testing::CommandResult refused = RunShardtrace(seed);
  CHECK(refused.status == 2);
  CHECK(refused.err ==
        "shardtrace: error: sparse_matmul: w0 enters shard_map as [8,2048,1408] per device (8 of "
        "the 64 experts) but expert parallelism 2 over 'expert' needs 32 local experts; the "
        "logical rules shard 'exp' as P(('expert', 'fsdp'), None, None)\n");
}

TEST_CASE("The release refuses the key shard_exp_on_fsdp with EP=2 where its ragged_dot fails",
          "[revision]") {
  // MaxText 0.2.5 on 4 CPU devices (fsdp=2 x expert=2): shard_exp_on_fsdp=true on the sparse
  // path fails ("expected rhs group dimension size to be 4, got 8"); the custom rule file
  // shard-exp-on-fsdp runs (case sparse_rule_shard_exp_on_fsdp_ep2), and so does the dense
  // path (dense_shard_exp_on_fsdp_ep2): `check` of both cases passes in the [maxtext] tests.
  const std::vector<std::string> small = {"trace",
                                          SourcePath("testdata/maxtext/configs/base.yml"),
                                          "base_emb_dim=16",
                                          "base_mlp_dim=32",
                                          "base_moe_mlp_dim=32",
                                          "num_experts=8",
                                          "num_experts_per_tok=2",
                                          "max_target_length=8",
                                          "per_device_batch_size=2",
                                          "decoder_block=mixtral",
                                          "ici_expert_parallelism=2",
                                          "ici_fsdp_parallelism=2",
                                          "--devices",
                                          "4",
                                          "--quiet"};
  std::vector<std::string> key = small;
  key.push_back("shard_exp_on_fsdp=true");
  const testing::CommandResult refused = RunShardtrace(key);
  CHECK(refused.status == 2);
  CHECK_THAT(refused.err, Catch::StartsWith("shardtrace: error: sparse_matmul: w0 enters "
                                            "shard_map as [8,16,32] per device") &&
                              Catch::Contains("needs 4 local experts"));
  std::vector<std::string> rule = small;
  rule.push_back("custom_mesh_and_rule=shard-exp-on-fsdp");
  CHECK(RunShardtrace(rule).status == 0);
  std::vector<std::string> dense = key;
  dense.push_back("sparse_matmul=false");
  CHECK(RunShardtrace(dense).status == 0);
}

TEST_CASE("padded_base_moe_mlp_dim pads wo as well in the release, wi_0/wi_1 only before",
          "[revision]") {
  const std::vector<std::string> dims = {"base_emb_dim=64",       "base_mlp_dim=128",
                                         "base_moe_mlp_dim=128",  "num_experts=4",
                                         "num_experts_per_tok=2", "padded_base_moe_mlp_dim=160"};
  std::vector<std::string> args = {"trace", kRelease, "--format", "json"};
  args.insert(args.end(), dims.begin(), dims.end());
  const testing::CommandResult r = RunShardtrace(args);
  REQUIRE(r.status == 0);
  std::map<std::string, std::vector<int64_t>> shapes;

  const nlohmann::json trace = nlohmann::json::parse(r.out);
  for (const auto& t : trace.at("tensors"))
    if (t.at("kind") == "weight")
      shapes.try_emplace(t.at("name").get<std::string>(),
                         t.at("shape").get<std::vector<int64_t>>());
  CHECK(shapes.at("wi_0") == std::vector<int64_t>{4, 64, 160});
  CHECK(shapes.at("wi_1") == std::vector<int64_t>{4, 64, 160});
  CHECK(shapes.at("wo") == std::vector<int64_t>{4, 160, 64});
  // The seed and main keep wo at [E, 128, M]: refused by the key (testdata/bad has the line).
  for (const char* revision : {"seed", "main"}) {
    std::vector<std::string> older = args;
    older.insert(older.end(), {"--maxtext-revision", revision});
    const testing::CommandResult refused = RunShardtrace(older);
    CHECK(refused.status == 2);
    CHECK_THAT(refused.err, Catch::Contains("padded_base_moe_mlp_dim=160 pads wi_0/wi_1"));
  }
}

// gmm_up's `mask` (moe.py e591f30:1952-1984, 0.2.5:2909-2941) and wo's (e591f30:2239-2242,
// 0.2.5:3225-3228): with mlp_bias, main and the release zero the rows past the routed ones
// after each bias add; the seed adds the biases unmasked.
TEST_CASE("With mlp_bias, main and the release mask the padding rows after each bias add",
          "[revision]") {
  const std::vector<std::string> dims = {"base_emb_dim=64",       "base_mlp_dim=128",
                                         "base_moe_mlp_dim=128",  "num_experts=4",
                                         "num_experts_per_tok=2", "mlp_bias=true"};
  for (const auto& [revision, masked] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"seed", {}},
           {"main", {"layer_w0", "layer_w1", "intermediate_output"}},
           {"release", {"layer_w0", "layer_w1", "intermediate_output"}}}) {
    std::vector<std::string> args = {"trace", kRelease, "--format", "json", "--maxtext-revision",
                                     revision};
    args.insert(args.end(), dims.begin(), dims.end());
    const testing::CommandResult r = RunShardtrace(args);
    INFO(revision << ": " << r.err);
    REQUIRE(r.status == 0);
    const nlohmann::json trace = nlohmann::json::parse(r.out);
    std::vector<std::string> wheres;
    for (const auto& op : trace.at("ops")) {
      if (op.at("kind") != "where") continue;
      const int out = op.at("outputs").at(0).get<int>();
      wheres.push_back(trace.at("tensors").at(out).at("name").get<std::string>());
      // Each reads the bias add's output.
      const int in = op.at("inputs").at(0).get<int>();
      bool from_add = false;
      for (const auto& producer : trace.at("ops"))
        for (const auto& o : producer.at("outputs"))
          from_add |= o.get<int>() == in && producer.at("kind") == "add";
      CHECK(from_add);
    }
    CHECK(wheres == masked);
  }
}

}  // namespace shardtrace
