// The MoE model files of MaxText 0.2.5 as a user of the release gives them, through the
// command line (issue 27): pyconfig's base_config include, the block each decoder builds
// (Qwen3NextSparseMoeBlock for qwen3_next / qwen3_5), and what MaxText refuses. The model
// files are the release's own, under testdata/maxtext-moe-models/ (PROVENANCE.md there).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/run.h"
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

nlohmann::json TraceJson(const std::vector<std::string>& args) {
  std::vector<std::string> full = {"trace"};
  full.insert(full.end(), args.begin(), args.end());
  full.insert(full.end(), {"--format", "json"});
  const CommandResult r = RunShardtrace(full);
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

// "<scope> <name> <dtype> <shape> <spec> <local shape> <bytes>" of every stored parameter.
std::vector<std::string> Parameters(const nlohmann::json& trace) {
  std::vector<std::string> out;
  for (const nlohmann::json& t : trace["tensors"]) {
    if (t["kind"] != "weight" || t["constraint"] != "kernel_axes") continue;
    out.push_back(t["scope"].get<std::string>() + " " + t["name"].get<std::string>() + " " +
                  t["dtype"].get<std::string>() + " " + t["shape"].dump() + " " +
                  t["partition_spec"].dump() + " " + t["local_shape"].dump() + " " +
                  t["bytes_per_device"].dump());
  }
  return out;
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

TEST_CASE("A release model file named from inside its own folder finds base.yml one folder up",
          "[release]") {
  // `cd configs/models && shardtrace trace qwen3.5-35b-a3b-fp8.yml`: the file's
  // base_config: "base.yml" is not beside it but one folder up. A file named without a folder
  // has an empty parent_path(), and the lookup used to climb from "" twice: "found neither at
  // base.yml nor at base.yml". pyconfig finds it (its configs folder).
  const TempDir dir;
  dir.Write("configs/base.yml", ReadFile(ReleaseBase()));
  dir.Write("configs/models/qwen3.5-35b-a3b-fp8.yml",
            ReadFile(ReleaseConfigs() + "/models/qwen3.5-35b-a3b-fp8.yml"));
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path() / "configs" / "models");
  const CommandResult r = RunShardtrace({"config", "qwen3.5-35b-a3b-fp8.yml", "--devices", "8"});
  std::filesystem::current_path(before);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("files      ../base.yml <- qwen3.5-35b-a3b-fp8.yml\n") &&
                        Catch::Contains("weight_dtype='float8_e4m3fn'"));
}

TEST_CASE("A parallelism key for an axis the model's mesh_axes lack is named in a warning",
          "[release]") {
  // deepseek3-671b-2dfsdp.yml sets mesh_axes without 'tensor': MaxText builds the mesh from
  // mesh_axes only (types.py _resolve_parallelism) and drops ici_tensor_parallelism=4 without
  // a word; so did shardtrace, tracing 64 devices of pure fsdp.
  const CommandResult r =
      RunShardtrace({"config", ReleaseBase(), "model_name=deepseek3-671b-2dfsdp",
                     "ici_tensor_parallelism=4", "ici_fsdp_parallelism=64", "--devices", "64"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("mesh       mesh['fsdp'=64] (64 devices, 1 slice)"));
  CHECK(r.err ==
        "shardtrace: warning: ici_tensor_parallelism=4 has no effect: mesh_axes [diloco, data, "
        "stage, fsdp, fsdp_transpose, expert, context] has no 'tensor' axis, and MaxText builds "
        "the mesh from mesh_axes only\n");
  // The base.yml's own mesh has every axis: no warning.
  CHECK(RunShardtrace({"config", ReleaseBase(), "model_name=deepseek3-671b",
                       "ici_tensor_parallelism=4", "ici_fsdp_parallelism=16", "--devices", "64"})
            .err.empty());
}

TEST_CASE("A warning found before a failure is printed once, before the error line", "[release]") {
  // The unused ici_tensor_parallelism is found with the mesh; the expert count fails after it,
  // in the MoE setup: the Error carries the warning to main (util/error.h).
  const CommandResult r = RunShardtrace(
      {"config", ReleaseBase(), "model_name=deepseek3-671b-2dfsdp", "ici_tensor_parallelism=4",
       "ici_expert_parallelism=3", "ici_fsdp_parallelism=1", "--devices", "3"});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "shardtrace: warning: ici_tensor_parallelism=4 has no effect: mesh_axes [diloco, data, "
        "stage, fsdp, fsdp_transpose, expert, context] has no 'tensor' axis, and MaxText builds "
        "the mesh from mesh_axes only\n"
        "shardtrace: error: num_experts 256 is not divisible by the expert-parallel size 3 (mesh "
        "axes expert); set ici_expert_parallelism to a divisor of 256\n");
}

TEST_CASE("A logical rule naming a mesh axis mesh_axes lack is named in a warning", "[release]") {
  // MaxText drops the unknown axis from the rule without a word, so a typo leaves 'exp'
  // unsharded; shardtrace traces what MaxText runs and names the rule.
  const TempDir dir;
  const std::string config = dir.Write(
      "typo.yml", fmt::format("base_config: \"{}\"\nlogical_axis_rules: [['exp', 'expertt']]\n",
                              ReleaseBase()));
  const CommandResult r =
      RunShardtrace({"config", config, "model_name=mixtral-8x7b", "ici_fsdp_parallelism=2",
                     "ici_expert_parallelism=2", "--devices", "4"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err ==
        "shardtrace: warning: logical_axis_rules: the rule for 'exp' names mesh axis 'expertt', "
        "which mesh_axes [diloco, data, stage, fsdp, fsdp_transpose, context, "
        "context_usp_ulysses, context_autoregressive, tensor, tensor_sequence, expert, "
        "autoregressive] lacks; MaxText drops it, so 'exp' is not sharded over it\n");
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
  // includes, so only its own keys apply (its fp8 weight_dtype among them).
  const CommandResult r =
      RunShardtrace({"config", ReleaseBase(), "model_name=qwen3.5-35b-a3b-fp8"});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, !Catch::Contains("base_config") &&
                        Catch::Contains("dtype='bfloat16' weight_dtype='float8_e4m3fn'"));
}

TEST_CASE("Release model files MaxText's config validation refuses are refused by name",
          "[release]") {
  // deepseek-custom as its header runs it has attention=flash with tokamax splash and a
  // tokenizer; with dot_product attention and no tokenizer, its engram layers are what MaxText
  // refuses ("Engram requires both 'hf_access_token' and 'tokenizer_path'").
  CHECK(
      UserError({"trace", ReleaseBase(), "model_name=deepseek-custom", "attention=dot_product"}) ==
      "shardtrace: error: engram_layers [1, 4] needs both hf_access_token and tokenizer_path "
      "(MaxText loads the Hugging Face tokenizer for its engram layers; its config validation "
      "refuses it otherwise)\n");
  CHECK_THAT(UserError({"trace", ReleaseBase(), "model_name=deepseek4-tiny", "attention=flash"}),
             Catch::Contains("decoder_block 'deepseek4' needs attention=dot_product (or "
                             "attention=flash with use_tokamax_splash=true), got attention "
                             "'flash'"));
  // flash with tokamax splash passes; the trace is a gate-routed layer past the hash layers.
  const CommandResult ok = RunShardtrace({"trace", ReleaseBase(), "model_name=deepseek4-tiny",
                                          "attention=flash", "use_tokamax_splash=true"});
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK_THAT(ok.out, Catch::Contains("first_num_hash_layers 3: layers 0 to 2"));
}

TEST_CASE(
    "A ragged buffer on the ring of experts without the ragged sort is refused as MaxText does",
    "[release]") {
  // types.py's validate_ragged_buffer_factor (main and the release); the seed has no such check
  // and no use_ragged_sort in its base.yml.
  const std::vector<std::string> ring = {"trace",
                                         ReleaseBase(),
                                         "base_emb_dim=16",
                                         "base_mlp_dim=32",
                                         "base_moe_mlp_dim=32",
                                         "num_experts=8",
                                         "num_experts_per_tok=2",
                                         "sparse_matmul=true",
                                         "megablox=true",
                                         "use_ring_of_experts=true",
                                         "ici_expert_parallelism=2",
                                         "--devices",
                                         "2"};
  std::vector<std::string> args = ring;
  args.push_back("ragged_buffer_factor=1");
  CHECK(UserError(args) ==
        "shardtrace: error: ragged_buffer_factor=1.0 with use_ring_of_experts=true needs "
        "use_ragged_sort=true (the ring's buffer is the Pallas ragged sort's); MaxText's config "
        "validation refuses it\n");
  args = ring;
  args.push_back("eval_ragged_buffer_factor=2");
  CHECK_THAT(UserError(args), Catch::Contains("eval_ragged_buffer_factor=2.0 with"));
  args.push_back("use_ring_of_experts=false");  // the ragged all-to-all takes a buffer factor
  CHECK(RunShardtrace(args).status == 0);
}

TEST_CASE("qwen3_next and qwen3_5 trace Qwen3NextSparseMoeBlock with its shared expert and gate",
          "[release]") {
  const nlohmann::json trace =
      TraceJson({ReleaseBase(), "model_name=qwen3.5-35b-a3b", "--devices", "8"});
  CHECK(trace["block"] == "moe");
  // Every leaf of MaxText's Qwen3NextSparseMoeBlock state (routed_experts/{gate/kernel, wi_0,
  // wi_1, wo}, shared_expert/{wi_0,wi_1,wo}/kernel, shared_expert_gate/kernel), float32 as the
  // release's base.yml stores them, on fsdp=8.
  const std::vector<std::string> expected = {
      "Qwen3NextSparseMoeBlock/RoutedMoE gate.kernel float32 [2048,256] [\"fsdp\",null] "
      "[256,256] 262144",
      "Qwen3NextSparseMoeBlock/RoutedMoE wi_0 float32 [256,2048,512] [null,\"fsdp\",null] "
      "[256,256,512] 134217728",
      "Qwen3NextSparseMoeBlock/RoutedMoE wi_1 float32 [256,2048,512] [null,\"fsdp\",null] "
      "[256,256,512] 134217728",
      "Qwen3NextSparseMoeBlock/RoutedMoE wo float32 [256,512,2048] [null,null,\"fsdp\"] "
      "[256,512,256] 134217728",
      "Qwen3NextSparseMoeBlock/shared_expert/wi_0 wi_0 float32 [2048,512] [\"fsdp\",null] "
      "[256,512] 524288",
      "Qwen3NextSparseMoeBlock/shared_expert/wi_1 wi_1 float32 [2048,512] [\"fsdp\",null] "
      "[256,512] 524288",
      "Qwen3NextSparseMoeBlock/shared_expert wo float32 [512,2048] [null,\"fsdp\"] [512,256] "
      "524288",
      "Qwen3NextSparseMoeBlock/shared_expert_gate shared_expert_gate.kernel float32 [2048,1] "
      "[\"fsdp\",null] [256,1] 1024"};
  CHECK(Parameters(trace) == expected);
  CHECK(trace["memory"]["parameter_bytes"] == 404489216);
  bool sigmoid = false;
  for (const nlohmann::json& op : trace["ops"])
    sigmoid |= op["kind"].get<std::string>().find("sigmoid") != std::string::npos;
  CHECK(sigmoid);

  // --block shared: the shared expert alone (width moe_mlp_dim, not shared_experts x it).
  const nlohmann::json shared = TraceJson(
      {ReleaseBase(), "model_name=qwen3-next-80b-a3b", "--devices", "8", "--block", "shared"});
  CHECK(shared["path"] == "Qwen3NextSparseMoeBlock.shared_expert (MlpBlock)");
  CHECK(Parameters(shared).size() == 3);
  CHECK(shared["memory"]["parameter_bytes"] == 3 * 524288);
}

}  // namespace
}  // namespace shardtrace
