// The comparison room from the command line: compare-dump against MaxText's own sharding
// dumps (both must agree; a hand-edited copy must fail naming the tensor), trace diff and
// render. Output is pinned as golden text in testdata/expected/.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "check/sharding_dump.h"
#include "emit/text_table.h"
#include "run/run.h"
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
  CHECK(r.err == "shardtrace: error: MaxText sharding_info file (" + dir.path().string() +
                     "/named_shardings.json): expected an existing file, found no such file\n");
}

}  // namespace
}  // namespace shardtrace

namespace shardtrace {
namespace {

using testing::CompareWithGolden;
using testing::RunShardtrace;

TEST_CASE("diff: EP 1 vs 4 changes the path, names the key, adds the all-to-alls",
          "[compare][diff]") {
  const auto r = RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8", "--a",
                                "ici_expert_parallelism=1", "--b", "ici_expert_parallelism=4"});
  CHECK(r.status == 1);
  CHECK(r.err.empty());
  CompareWithGolden("expected/diff_ep1_vs_ep4.txt", r.out);
  CHECK(r.out.find("-> B sparse_matmul/ragged_all_to_all (EP=4, TP=1, megablox); selected by "
                   "ici_expert_parallelism") != std::string::npos);
  CHECK(r.out.find("  added    RoutedMoE/sparse_matmul/wrapper/ragged_all_to_all:x#0") !=
        std::string::npos);
  CHECK(r.out.find("  communication sent per layer") != std::string::npos);
}

TEST_CASE("diff: shard_exp_on_fsdp moves the expert kernels' fsdp sharding", "[compare][diff]") {
  const auto r = RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8", "--a",
                                "shard_exp_on_fsdp=false", "--b", "shard_exp_on_fsdp=true"});
  CHECK(r.status == 1);
  CompareWithGolden("expected/diff_shard_exp_on_fsdp.txt", r.out);
  // The cast kernels carry no statement of their own: what changes is the sharding XLA's
  // propagation gives them, and the diff says so apart from the written specs.
  CHECK(r.out.find("propagated P(None, 'fsdp', None) -> P('fsdp', None, None); local "
                   "[8,512,14336] -> [1,4096,14336]") != std::string::npos);
  CHECK(r.out.find("spec P(None, 'fsdp', None) -> P('fsdp', None, None)") != std::string::npos);
}

TEST_CASE("diff: use_2d_fsdp_sharding as Markdown for a PR review", "[compare][diff]") {
  const auto r =
      RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8", "--format", "markdown",
                     "--a", "use_2d_fsdp_sharding=false", "--b", "use_2d_fsdp_sharding=true"});
  CHECK(r.status == 1);
  CompareWithGolden("expected/diff_2d_fsdp.md", r.out);
  CHECK(r.out.rfind("**shardtrace diff: sharding differs: 1 config keys", 0) == 0);
}

TEST_CASE("diff: TP on/off as JSON: a psum_scatter is added and the expert kernels halve",
          "[compare][diff]") {
  const auto r = RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8",
                                "ici_expert_parallelism=2", "--format", "json", "--a",
                                "ici_tensor_parallelism=1", "--b", "ici_tensor_parallelism=2"});
  CHECK(r.status == 1);
  CompareWithGolden("expected/diff_tp_on_off.json", r.out);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json["schema"] == 3);
  CHECK(json["same"] == false);
  // A side says which spec a statement wrote and which XLA's propagation gives, never a bare
  // null for a propagated sharding: the block input arrives as the decoder layer shards it.
  bool input = false;
  for (const auto& t : json["tensors"])
    if (t["key"] == "inputs#0") {
      input = true;
      CHECK(t["b"]["written_spec"].is_null());
      CHECK(t["b"]["placement"] == "argument");
      CHECK(t["b"]["propagated_spec"] == "P(('fsdp', 'expert'), None, 'tensor')");
    }
  CHECK(input);
  CHECK(json["path"]["selected_by"] == nlohmann::json::array({"ici_tensor_parallelism"}));
  bool psum_scatter = false;
  for (const auto& c : json["collectives"])
    psum_scatter |= c["change"] == "added" && c["b"]["kind"] == "psum_scatter" &&
                    c["b"]["axes"] == nlohmann::json::array({"tensor"});
  CHECK(psum_scatter);
  CHECK(json["totals_delta"]["written_collective_sent_bytes_per_device"] == 960LL * 1024 * 1024);
}

// Each side of a diff counts the communication `trace` reports for that config: written and
// XLA-inserted apart, and their sum (issue 21: side A used to show 0 B beside 3.9 GiB of kernel
// all-gathers XLA inserts for FSDP).
TEST_CASE("diff: each side's communication equals trace's totals for it", "[compare][diff]") {
  const std::vector<std::string> common = {"model_name=mixtral-8x7b", "--devices", "4"};
  const std::vector<std::vector<std::string>> sides = {
      {"ici_fsdp_parallelism=4"}, {"ici_fsdp_parallelism=2", "ici_expert_parallelism=2"}};
  std::vector<std::string> diff_args = {"diff", "--format", "json"};
  diff_args.insert(diff_args.end(), common.begin(), common.end());
  for (const std::string& o : sides[0]) diff_args.insert(diff_args.end(), {"--a", o});
  for (const std::string& o : sides[1]) diff_args.insert(diff_args.end(), {"--b", o});
  const auto r = RunShardtrace(diff_args);
  REQUIRE(r.status == 1);
  const nlohmann::json diff = nlohmann::json::parse(r.out);
  for (size_t i = 0; i < sides.size(); ++i) {
    std::vector<std::string> trace_args = {"trace", "--format", "json"};
    trace_args.insert(trace_args.end(), common.begin(), common.end());
    trace_args.insert(trace_args.end(), sides[i].begin(), sides[i].end());
    const auto t = RunShardtrace(trace_args);
    REQUIRE(t.status == 0);
    const nlohmann::json totals = nlohmann::json::parse(t.out).at("totals");
    const nlohmann::json& side = diff.at(i == 0 ? "a" : "b").at("totals");
    const int64_t written = totals.at("collective_bytes_sent_per_device");
    const int64_t implied = totals.at("implied_collective_bytes_sent_per_device");
    INFO("side " << (i == 0 ? "A" : "B"));
    CHECK(implied > 0);
    CHECK(side.at("written_collective_sent_bytes_per_device") == written);
    CHECK(side.at("implied_collective_sent_bytes_per_device") == implied);
    CHECK(side.at("collective_sent_bytes_per_device") == written + implied);
  }
  // Side A: 3 kernels [8,4096,14336] float32, cast to bfloat16 where they lie and the copies
  // all-gathered over fsdp=4 (each device sends its 224 MiB block to 3 peers: 672 MiB a
  // kernel), and the [4096,8] gate kernel likewise (48 KiB).
  CHECK(diff["a"]["totals"]["implied_collective_sent_bytes_per_device"] ==
        3 * (8LL * 4096 * 14336 * 2 / 4 * 3) + 4096 * 8 * 2 / 4 * 3);
}

TEST_CASE("diff: custom_mesh_and_rule cp-as-ep vs ep-as-cp", "[compare][diff]") {
  const auto r = RunShardtrace({"diff", "model_name=deepseek3-671b", "--devices", "256",
                                "ici_expert_parallelism=64", "--a", "custom_mesh_and_rule=cp-as-ep",
                                "--b", "custom_mesh_and_rule=ep-as-cp"});
  CHECK(r.status == 1);
  CompareWithGolden("expected/diff_cp_as_ep_vs_ep_as_cp.txt", r.out);
}

TEST_CASE("diff: the seed-era base.yml against current main's, same model", "[compare][diff]") {
  const auto r =
      RunShardtrace({"diff", "src/config/maxtext/base.yml", "testdata/maxtext-configs/base.yml",
                     "model_name=mixtral-8x7b", "ici_expert_parallelism=4", "sparse_matmul=false",
                     "--devices", "16"});
  CHECK(r.status == 1);
  CompareWithGolden("expected/diff_seed_vs_main_base.txt", r.out);
  // Main's activation_batch_moe also shards over 'expert': the dense path's batch moves.
  CHECK(r.out.find("  activation_batch_moe\n    A [data, fsdp, fsdp_transpose]\n    B [data, "
                   "fsdp, fsdp_transpose, expert]") != std::string::npos);
}

TEST_CASE("diff: ring of experts vs all-to-all, the collectives a reviewer counts by hand",
          "[compare][diff]") {
  const auto r = RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8",
                                "ici_expert_parallelism=4", "--a", "use_ring_of_experts=true",
                                "--b", "use_ring_of_experts=false"});
  CHECK(r.status == 1);
  CompareWithGolden("expected/diff_ring_vs_all_to_all.txt", r.out);
  CHECK(r.out.find("selected by use_ring_of_experts") != std::string::npos);
  for (const char* row : {"  removed  RoutedMoE/sparse_matmul/wrapper/all_gather:x#0 ",
                          "  removed  RoutedMoE/sparse_matmul/wrapper/psum_scatter:output#0 ",
                          "  added    RoutedMoE/sparse_matmul/wrapper/ragged_all_to_all:x#0 "}) {
    INFO(row);
    CHECK(r.out.find(row) != std::string::npos);
  }
}

TEST_CASE("diff: identical sides exit 0; bad arguments exit 2", "[compare][diff]") {
  const auto same = RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8", "--a",
                                   "learning_rate=1e-4", "--b", "learning_rate=2e-4"});
  CHECK(same.status == 0);
  CHECK(same.out.find("same sharding: 1 config keys") != std::string::npos);
  const auto three = RunShardtrace({"diff", "a.yml", "b.yml", "c.yml"});
  CHECK(three.status == 2);
  CHECK(three.err ==
        "shardtrace: error: diff takes at most two CONFIG files (A and B), got 3: "
        "a.yml, b.yml, c.yml\n");
  const auto bad = RunShardtrace({"diff", "--a", "ici_expert_parallelism"});
  CHECK(bad.status == 2);
  CHECK(bad.err == "shardtrace: error: --a ici_expert_parallelism: expected key=value\n");
  // A side that cannot be traced is named (the error used to be the same for either side).
  const auto side_a = RunShardtrace(
      {"diff", "model_name=mixtral-8x7b", "--devices", "4", "--a", "ici_expert_parallelism=3"});
  CHECK(side_a.status == 2);
  CHECK(side_a.err ==
        "shardtrace: error: diff side A: ICI parallelism: 4 devices per slice is not divisible by "
        "expert=3 = 3, so 'fsdp' (-1) cannot be filled\n");
  const auto side_b = RunShardtrace(
      {"diff", "model_name=mixtral-8x7b", "--devices", "4", "--b", "ici_expert_paralelism=2"});
  CHECK_THAT(side_b.err, Catch::StartsWith("shardtrace: error: diff side B: unknown config key "
                                           "'ici_expert_paralelism'"));
  testing::TempDir dir;
  const auto written = RunShardtrace({"diff", "model_name=mixtral-8x7b", "--devices", "8", "--a",
                                      "ici_expert_parallelism=1", "--b", "ici_expert_parallelism=4",
                                      "-o", dir.File("d.txt")});
  CHECK(written.status == 1);
  CHECK(written.out.empty());
  CHECK(testing::ReadFile(dir / "d.txt") ==
        testing::ReadFile(testing::SourcePath("testdata/expected/diff_ep1_vs_ep4.txt")));
}

}  // namespace
}  // namespace shardtrace

namespace shardtrace {
namespace {

using testing::CompareWithGolden;
using testing::RunShardtrace;

// Every line inside a ``` block of a markdown page, with its line number.
std::vector<std::pair<int, std::string>> CodeLines(const std::string& page) {
  std::vector<std::pair<int, std::string>> out;
  bool in_code = false;
  int n = 0;
  size_t pos = 0;
  while (pos < page.size()) {
    const size_t end = page.find('\n', pos);
    const std::string line = page.substr(pos, end == std::string::npos ? end : end - pos);
    ++n;
    if (line.rfind("```", 0) == 0)
      in_code = !in_code;
    else if (in_code)
      out.push_back({n, line});
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

TEST_CASE("render: DeepSeek-V3 on 256 devices from a MaxText base.yml", "[compare][render]") {
  testing::TempDir dir;
  const auto r =
      RunShardtrace({"render", "testdata/maxtext-configs/base.yml", "model_name=deepseek3-671b",
                     "ici_expert_parallelism=64", "--devices", "256", "-o", dir.File("page.md")});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  const std::string page = testing::ReadFile(dir / "page.md");
  CompareWithGolden("expected/render_deepseek3-671b_ep64.md", page);
  const auto code = CodeLines(page);
  CHECK(code.size() > 300);
  for (const auto& [n, line] : code) {
    INFO("line " << n << ": " << line);
    CHECK(DisplayWidth(line) <= 120);
  }
  // The trees come from a reduced numeric run of the same path, and the page says so.
  CHECK(page.find("from a reduced numeric run of the same path on the same mesh: B=256 S=4 "
                  "M=256 E=256 K=8 H=32 instead of B=3072 S=2048 M=7168 E=256 K=8 H=2048") !=
        std::string::npos);
  CHECK(page.find("T0 (sum of weights") != std::string::npos);
  // generate's sparse trees and send matrices, drawn for the first 8 of 256 devices.
  CHECK(page.find("## Tree: sorted_inputs (per device)") != std::string::npos);
  CHECK(page.find("## Tree: x (the ragged_all_to_all receive buffer, per device)") !=
        std::string::npos);
  CHECK(page.find("(devices 8-255 not shown: the first 8 of 256 devices are drawn.)") !=
        std::string::npos);
  CHECK(page.find("  device  to 0  to 1  to 2  to 3  to 4  to 5  to 6  to 7  to 8-63  total\n") !=
        std::string::npos);
  CHECK(page.find("Device 8 (") == std::string::npos);
  // The kernel specs with expert parallelism off: one column per variant, a row per weight
  // and scope (the routed experts' [E,M,H] wi_0 and the shared MlpBlock's [M,F] wi_0 apart).
  CHECK(page.find("| `wi_0` (kernel_axes) | `P('expert', 'fsdp', None)` | `P('fsdp', None, None)` "
                  "| `P('fsdp', None, None)` | `P(None, 'fsdp', None)` |") != std::string::npos);
  CHECK(page.find("| `shared wi_0` (kernel_axes) | `P(('fsdp', 'expert'), None)` | "
                  "`P('fsdp', None)` |") != std::string::npos);
  CHECK(page.find("```mermaid\n%%{init: ") != std::string::npos);
  // Unconstrained activations are never sized per device at their global size: the bfloat16
  // inputs [3072,2048,7168] (84.0 GiB globally) take the batch sharding the first
  // constraint asks for, 12 of 3072 sequences per device.
  CHECK(page.find("  inputs            336.0 MiB\n") != std::string::npos);
  CHECK(page.find("inputs            84.0 GiB") == std::string::npos);
}

TEST_CASE("render: a small dense-dropping config runs its own numbers for the mask trees",
          "[compare][render]") {
  const auto r =
      RunShardtrace({"render", "base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32",
                     "num_experts_per_tok=2", "max_target_length=4", "per_device_batch_size=1",
                     "decoder_block=mixtral", "num_experts=4", "sparse_matmul=false",
                     "capacity_factor=1", "ici_expert_parallelism=2", "--devices", "4"});
  CHECK(r.status == 0);
  CompareWithGolden("expected/render_small_dense_dropping.md", r.out);
  CHECK(r.out.find("from a numeric run of this config (B=4 S=4 M=16 E=4 K=2 H=32, seed 1)") !=
        std::string::npos);
  // The same sections as the documented dense-dropping page: masks, variants, mermaid.
  CHECK(r.out.find("## Tree: dispatch_mask") != std::string::npos);
  CHECK(r.out.find("## Tree: combine_mask") != std::string::npos);
  CHECK(r.out.find("## Config variants") != std::string::npos);
  CHECK(r.out.find("| EP off (`ici_expert_parallelism=1`) |") != std::string::npos);
  CHECK(r.out.find("```mermaid\n%%{init: ") != std::string::npos);
  for (const auto& [n, line] : CodeLines(r.out)) {
    INFO("line " << n << ": " << line);
    CHECK(DisplayWidth(line) <= 120);
  }
}

TEST_CASE("render: a big decode config keeps its path in the reduced run of its trees",
          "[compare][render]") {
  const auto r =
      RunShardtrace({"render", "model_name=mixtral-8x7b", "ici_expert_parallelism=4",
                     "sparse_matmul=true", "per_device_batch_size=0.25", "max_target_length=1",
                     "model_call_mode=inference", "--devices", "4"});
  CHECK(r.status == 0);
  // Batch and sequence only shrink: the global batch stays 1, so the batch stays replicated.
  CHECK(r.out.find("a reduced numeric run of the same path on the same mesh: B=1 S=1 M=16 E=8 "
                   "K=2 H=32 instead of B=1 S=1 M=4096 E=8 K=2 H=14336") != std::string::npos);
  CHECK(r.out.find("## Tree: sorted_inputs after local_permute(is_offset=True) (per device)") !=
        std::string::npos);
  CHECK(r.out.find("another path") == std::string::npos);
}

TEST_CASE("render: a block the model does not have exits 2", "[compare][render]") {
  const auto r = RunShardtrace({"render", "model_name=mixtral-8x7b", "--block", "shared"});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("shardtrace: error: --block shared: decoder_block mixtral", 0) == 0);
}

}  // namespace
}  // namespace shardtrace

namespace shardtrace {
namespace {

TEST_CASE("--help lists the comparison commands", "[compare][cli]") {
  const auto r = testing::RunShardtrace({"--help"});
  CHECK(r.status == 0);
  for (const char* command : {"diff", "render", "compare-dump"}) {
    INFO(command);
    CHECK(r.out.find(std::string("\n  ") + command + " ") != std::string::npos);
  }
}

}  // namespace
}  // namespace shardtrace
