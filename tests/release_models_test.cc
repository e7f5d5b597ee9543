// The MoE model files of MaxText 0.2.5 as a user of the release gives them, through the
// command line (issue 27): pyconfig's base_config include, the block each decoder builds
// (Qwen3NextSparseMoeBlock for qwen3_next / qwen3_5), and what MaxText refuses. The model
// files are the release's own, under testdata/maxtext-moe-models/ (PROVENANCE.md there).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

using testing::CommandResult;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::SourcePath;
using testing::TempDir;

std::string ReleaseConfigs() { return SourcePath("testdata/maxtext-moe-models/configs"); }
std::string ReleaseBase() { return ReleaseConfigs() + "/base.yml"; }

// A bad-input failure: status 2, nothing on stdout, exactly one "shardtrace: error:" line.
std::string UserError(const std::vector<std::string>& args) {
  const CommandResult r = RunShardtrace(args);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("shardtrace: error: ", 0) == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  return r.err;
}

TEST_CASE("base_config includes a config file beside the file, then in the configs folder",
          "[release]") {
  const TempDir dir;
  dir.Write("configs/base.yml", ReadFile(ReleaseBase()));
  // Found one folder up (configs/base.yml), as pyconfig falls back to its configs folder.
  const std::string child =
      dir.Write("configs/models/child.yml",
                "base_config: \"base.yml\"\nnum_experts: 4\nnum_experts_per_tok: 2\n"
                "base_moe_mlp_dim: 64\nbase_mlp_dim: 64\nbase_emb_dim: 32\n");
  // Found beside the including file, and itself including child.yml: the outer file wins.
  const std::string outer =
      dir.Write("configs/models/outer.yml", "base_config: child.yml\nnum_experts_per_tok: 3\n");
  const CommandResult r = RunShardtrace({"config", outer, "--devices", "2"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("files      " + dir.File("configs/base.yml") + " <- " + child +
                                    " <- " + outer + "\n"));
  CHECK_THAT(r.out, Catch::Contains("dims       B=24 S=2048 M=32 E=4 K=3 H=64"));

  // model_name= beside the including file is looked up in <its folder>/models, then one up:
  // here configs/models/qwen3-next-80b-a3b.yml.
  dir.Write("configs/models/qwen3-next-80b-a3b.yml",
            ReadFile(ReleaseConfigs() + "/models/qwen3-next-80b-a3b.yml"));
  const CommandResult m = RunShardtrace({"config", outer, "model_name=qwen3-next-80b-a3b"});
  INFO(m.err);
  REQUIRE(m.status == 0);
  CHECK_THAT(m.out, Catch::Contains("E=512 K=10 H=512") &&
                        Catch::Contains("<- " + outer + " <- " +
                                        dir.File("configs/models/qwen3-next-80b-a3b.yml") + "\n"));
}

TEST_CASE("base_config cycles and missing files are refused naming the files", "[release]") {
  const TempDir dir;
  const std::string a = dir.Write("a.yml", "base_config: b.yml\n");
  const std::string b = dir.Write("b.yml", "base_config: \"a.yml\"\n");
  CHECK(UserError({"config", a}) == "shardtrace: error: base_config cycle: " + a + " -> " + b +
                                        " -> " + a + " (each file includes the next)\n");
  const std::string lost = dir.Write("sub/lost.yml", "base_config: nowhere.yml\n");
  CHECK(UserError({"config", lost}) == "shardtrace: error: base_config 'nowhere.yml' (in " + lost +
                                           "): found neither at " + dir.File("sub/nowhere.yml") +
                                           " nor at " + dir.File("nowhere.yml") + "\n");
  const std::string typed = dir.Write("typed.yml", "base_config: [base.yml]\n");
  CHECK_THAT(UserError({"config", typed}),
             Catch::Contains("base_config (in " + typed +
                             "): expected the path of a config file, got ['base.yml']"));
}

TEST_CASE("A model file's base_config is inert when model_name loads it, as in pyconfig",
          "[release]") {
  // qwen3.5-35b-a3b-fp8.yml says base_config: "base.yml"; pyconfig loads model files without
  // includes, so only its own keys apply (here up to its weight_dtype).
  const std::string err = UserError({"config", ReleaseBase(), "model_name=qwen3.5-35b-a3b-fp8"});
  CHECK_THAT(err, !Catch::Contains("base_config") && Catch::Contains("weight_dtype"));
}

}  // namespace
}  // namespace shardtrace
