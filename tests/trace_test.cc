// The tracer end to end: a symbolic full-size DeepSeek-V3 trace (shapes and shardings,
// nothing allocated), MaxText's own sharding dumps reproduced, every golden case, and the
// terminal table of each path pinned as golden text.
#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <set>

#include "check/golden_check.h"
#include "emit/maxtext_dump.h"
#include "emit/trace_json.h"
#include "emit/trace_table.h"
#include "paths/moe_block.h"
#include "run/model_dump.h"
#include "run/run.h"
#include "test_support.h"

// Counts heap bytes so a test can prove symbolic mode allocates no tensor data.
static std::atomic<int64_t> g_allocated{0};
void* operator new(size_t size) {
  g_allocated += static_cast<int64_t>(size);
  if (void* p = std::malloc(size)) return p;
  throw std::bad_alloc();
}
// The replaced operator new allocates with malloc, so free is the matching release; g++
// cannot see that through the replacement and warns.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
// The array and nothrow forms too: the library's defaults of these call the sanitizer's
// allocator, so a mix (new[] from one, delete[] from the other) is reported by ASan as an
// alloc-dealloc mismatch; Catch2 uses the nothrow form.
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocated += static_cast<int64_t>(size);
  return std::malloc(size);
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace shardtrace {
namespace {

using testing::CompareWithGolden;
using testing::SourcePath;

RunResult Symbolic(const std::vector<std::string>& args, int64_t devices,
                   Block block = Block::kMoe) {
  return Run(SymbolicRequest(args, devices, block));
}

const TensorRecord& Find(const Trace& trace, const std::string& name, Constraint constraint) {
  for (const TensorRecord& t : trace.tensors)
    if (t.name == name && t.constraint == constraint) return t;
  FAIL("no tensor " << name << " with constraint " << ToString(constraint));
  throw;
}

}  // namespace

TEST_CASE("A symbolic DeepSeek-V3 671B trace on 256 devices allocates no tensor data", "[trace]") {
  const int64_t before = g_allocated.load();
  const RunResult run = Symbolic({"model_name=deepseek3-671b", "ici_expert_parallelism=64"}, 256);
  const int64_t allocated = g_allocated.load() - before;
  // One bfloat16 [3072,2048,7168] activation alone is 84 GiB; the whole trace must stay tiny.
  CHECK(allocated < 64 * 1024 * 1024);
  CHECK(run.captures.empty());
  CHECK(run.trace.path == "sparse_matmul/ragged_all_to_all (EP=64, TP=1, megablox)");
  for (const TensorRecord& t : run.trace.tensors) CHECK_FALSE(t.summary.has_value());

  const TensorRecord& wi_0 = Find(run.trace, "wi_0", Constraint::kKernelAxes);
  CHECK(wi_0.partition_spec->ToString() == "P('expert', 'fsdp', None)");
  CHECK(run.spmd.tensor(wi_0.id).local_shape == Shape{4, 1792, 2048});
  CHECK(run.spmd.tensor(wi_0.id).bytes_per_device == 4LL * 1792 * 2048 * 4);
  const TensorRecord& x = Find(run.trace, "x", Constraint::kShardMapIn);
  CHECK(x.in_shard_map);
  CHECK(x.shape == Shape{12, 2048, 7168});
  CHECK(x.partition_spec->ToString() == "P(('fsdp', 'expert'), None, None)");
  const Fact* buffer = run.trace.FindFact(FactKind::kRaggedBufferRows);
  REQUIRE(buffer);
  CHECK(buffer->values.at(0) == 12 * 2048 * 8 * 32);  // local rows x min(EP 64, E/K 32)
  CHECK(buffer->Input("rows") == 12 * 2048 * 8);
  CHECK(buffer->Input("expert_parallelism") == 64);
  int ragged = 0;
  for (const OpRecord& op : run.trace.ops) ragged += op.kind == OpKind::kRaggedAllToAll;
  CHECK(ragged == 2);
}

TEST_CASE("shardtrace reproduces MaxText's own sharding dumps for the MoE and MLP blocks",
          "[trace][dump]") {
  struct DumpCase {
    std::string dir, model;
    int64_t ep;
    std::string rule;
    int64_t devices = 16;
  };
  // shard-exp-on-fsdp puts 'exp' on ['expert', 'fsdp']: main (e591f30) takes fsdp out of the
  // kernels' shard_map specs, so w0 enters as P('expert', None, None), the 32 local experts
  // expert parallelism 2 needs (the seed's specs keep fsdp and the seed refuses the run).
  for (const DumpCase& c :
       {DumpCase{"deepseek2-16b_v6e-16_default_ici_fsdp_parallelism--1_ici_expert_parallelism-4",
                 "deepseek2-16b", 4, ""},
        DumpCase{"gpt-oss-20b_tpu7x-16_default_ici_fsdp_parallelism--1_ici_expert_parallelism-2",
                 "gpt-oss-20b", 2, ""},
        DumpCase{"deepseek2-16b_tpu7x-8_shard-exp-on-fsdp_ici_fsdp_parallelism--1_ici_expert_"
                 "parallelism-2",
                 "deepseek2-16b", 2, "shard-exp-on-fsdp", 8}}) {
    INFO(c.dir);
    const nlohmann::ordered_json real = nlohmann::ordered_json::parse(testing::ReadFile(
        SourcePath("testdata/maxtext-sharding-dumps/" + c.dir + "/input_shardings.json")));
    nlohmann::ordered_json expected = nlohmann::ordered_json::array();
    for (const auto& entry : real["Activation Sharding Dump"]) {
      const std::string key = entry.begin().key();
      if (key.rfind("moe/", 0) == 0 || key.rfind("linears/", 0) == 0) expected.push_back(entry);
    }
    REQUIRE(expected.size() >= 6);
    std::vector<std::string> args = {SourcePath("testdata/maxtext-configs/base.yml"),
                                     "model_name=" + c.model, "ici_fsdp_parallelism=-1",
                                     fmt::format("ici_expert_parallelism={}", c.ep)};
    if (!c.rule.empty()) args.push_back("custom_mesh_and_rule=" + c.rule);
    const RunRequest request = SymbolicRequest(args, c.devices);
    CHECK(LoadInputs(request).config.revision().name == "e591f30");
    const auto ours = nlohmann::ordered_json::parse(DumpToMaxtextJson(DumpModel(request)));
    CHECK(ours["Activation Sharding Dump"].dump(2) == expected.dump(2));
  }
}

TEST_CASE("Every golden case reproduces its outputs and routing intermediates", "[trace][golden]") {
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("testdata/goldens"))) {
    INFO(entry.path().string());
    const GoldenReport report = CheckGoldenCase(entry.path().string(), {}, {});
    CHECK(report.passed());
    int compared = 0;
    for (const ArrayCheck& c : report.checks) {
      INFO(c.name << ": " << c.detail);
      CHECK(c.status != ArrayCheck::Status::kFail);
      compared += c.status == ArrayCheck::Status::kPass;
    }
    CHECK(compared >= 4);  // output, gate_logits, top_k_weights, top_k_indices at least
    ++cases;
  }
  CHECK(cases == 8);
}

TEST_CASE("A golden check fails when the config no longer matches the case", "[trace][golden]") {
  CheckOptions options;
  options.extra_args = {"capacity_factor=0.5", "sparse_matmul=false"};
  const GoldenReport report =
      CheckGoldenCase(SourcePath("testdata/goldens/dense_dropless_mixtral"), {}, options);
  CHECK_FALSE(report.passed());
}

TEST_CASE("The trace table of every path matches its golden text", "[trace][golden-text]") {
  const std::vector<std::string> small = {"base_emb_dim=16",         "base_mlp_dim=32",
                                          "base_moe_mlp_dim=32",     "num_experts=8",
                                          "num_experts_per_tok=2",   "max_target_length=8",
                                          "per_device_batch_size=1", "decoder_block=mixtral"};
  struct TextCase {
    std::string name;
    std::vector<std::string> args;
    int64_t devices;
    Block block = Block::kMoe;
  };
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> args = small;
    args.insert(args.end(), extra);
    return args;
  };
  const std::vector<TextCase> cases = {
      {"dense_dropless", with({"sparse_matmul=false", "load_balance_loss_weight=0.01"}), 4},
      {"dense_dropping",
       with({"sparse_matmul=false", "capacity_factor=1.5", "ici_expert_parallelism=2"}), 4},
      {"dense_inference_cp2",
       with({"sparse_matmul=false", "capacity_factor=2", "model_call_mode=inference",
             "ici_context_autoregressive_parallelism=2"}),
       4},
      {"sparse_ep1", with({"megablox=false"}), 2},
      {"sparse_ep4_tp2", with({"ici_expert_parallelism=4", "ici_tensor_parallelism=2"}), 8},
      {"sparse_decode_ep2", with({"ici_expert_parallelism=2", "per_device_batch_size=0.5"}), 2},
      {"sparse_ring_ep2", with({"ici_expert_parallelism=2", "use_ring_of_experts=true"}), 4},
      {"sparse_two_stage_ag",
       with({"moe_fsdp_use_two_stage_all_gather=true", "ici_fsdp_transpose_parallelism=2"}), 4},
      {"deepseek3_grouped",
       {"model_name=deepseek3-tiny", "n_routing_groups=4", "topk_routing_group=2",
        "ici_expert_parallelism=4", "max_target_length=16", "per_device_batch_size=1"},
       8},
      {"sparse_pipeline_ep2_chunks2",
       with({"ici_expert_parallelism=2", "shardtrace_pr3981_emb_chunks=2"}), 4},
      {"mlp_block", with({}), 4, Block::kMlp},
      {"shared_experts",
       {"model_name=deepseek3-tiny", "max_target_length=16", "per_device_batch_size=1"},
       4,
       Block::kShared},
  };
  for (const TextCase& c : cases) {
    INFO(c.name);
    const RunResult run = Symbolic(c.args, c.devices, c.block);
    CompareWithGolden("expected/trace_" + c.name + ".txt", TraceToTable(run.trace, run.spmd));
  }
}

TEST_CASE("The trace JSON of the EP=2 sparse path matches its golden file",
          "[trace][golden-text]") {
  const std::vector<std::string> args = {
      "base_emb_dim=16",         "base_mlp_dim=32",       "base_moe_mlp_dim=32",
      "num_experts=4",           "num_experts_per_tok=2", "max_target_length=4",
      "per_device_batch_size=1", "decoder_block=mixtral", "ici_expert_parallelism=2"};
  const RunResult run = Symbolic(args, 2);
  CompareWithGolden("expected/trace_sparse_ep2.json", TraceToJson(run.trace, run.spmd));
}

TEST_CASE("Trace JSON is byte-identical across runs and carries every field", "[trace]") {
  const std::vector<std::string> args = {"model_name=mixtral-8x7b", "ici_expert_parallelism=4"};
  const RunResult run_a = Symbolic(args, 8), run_b = Symbolic(args, 8);
  const std::string a = TraceToJson(run_a.trace, run_a.spmd);
  const std::string b = TraceToJson(run_b.trace, run_b.spmd);
  CHECK(a == b);
  const auto j = nlohmann::json::parse(a);
  const auto& first_weight = j["tensors"][1];
  for (const char* field :
       {"name", "kind", "dtype", "dims", "shape", "logical_axes", "constraint", "partition_spec",
        "physical", "local_shape", "bytes_per_device", "scope", "condition", "summary"})
    CHECK(first_weight.contains(field));
  CHECK(first_weight["kind"] == "weight");
  CHECK(first_weight["constraint"] == "kernel_axes");
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("The dense-dropping dump names entries as MaxText's frame inspection does",
          "[trace][dump]") {
  std::vector<std::string> keys;
  for (const DumpEntry& e :
       DumpModel(SymbolicRequest({"model_name=mixtral-8x7b", "sparse_matmul=false",
                                  "capacity_factor=1.25", "ici_expert_parallelism=4"},
                                 8)))
    keys.push_back(e.description + ": " + e.type);
  const std::vector<std::string> expected = {
      "moe/gate_logits: bfloat16[96,2048,8]",
      "Unknown: int32[96,1,1]",  // arange(B)[:, None, None] is a temporary: no variable name
      "Unknown: int32[2048,1]",
      "moe/expert_mask_fused: int32[96,4096,8]",
      "moe/expert_token_count: int32[96,2048,2,8]",
      "moe/dispatch_mask: bool[96,2048,8,640]",  // C = int(max(ceil(2048*2/8)*1.25, 1.25)) = 640
      "moe/combine_mask: bfloat16[96,2048,8,640]",
      "moe/dispatch: bfloat16[8,96,640,4096]",
      "moe/kernel: bfloat16[8,4096,14336]",  // the EP all-gather helper's local variable
      "moe/layer_w0: bfloat16[8,96,640,14336]",
      "moe/layer_w1: bfloat16[8,96,640,14336]",
      "moe/kernel: bfloat16[8,14336,4096]",
      "moe/intermediate_layer: bfloat16[8,96,640,4096]",
  };
  CHECK(keys == expected);
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("A golden case whose arrays or keys disagree with its config is an input error",
          "[trace][golden]") {
  testing::TempDir dir;
  const std::string source = testing::SourcePath("testdata/goldens/sparse_ep1_mixtral");
  const std::string config = testing::ReadFile(source + "/config.yml");
  const std::string npz = testing::ReadFile(source + "/tensors.npz");
  // Arrays of the wrong shape: the case now claims 16 tokens per sequence, its npz holds 8.
  std::string longer = config;
  const size_t at = longer.find("max_target_length: 8");
  REQUIRE(at != std::string::npos);
  longer.replace(at, std::string("max_target_length: 8").size(), "max_target_length: 16");
  dir.Write("long/config.yml", longer);
  dir.Write("long/tensors.npz", npz);
  CHECK_THROWS_WITH(
      CheckGoldenCase((dir / "long").string(), {}, {}),
      Catch::Contains(
          "tensors.npz: array 'inputs' has shape [4,8,16] but the config implies [4,16,16]"));
  dir.Write("typo/config.yml", config + "num_expertz: 3\n");
  dir.Write("typo/tensors.npz", npz);
  CHECK_THROWS_WITH(CheckGoldenCase((dir / "typo").string(), {}, {}),
                    Catch::Contains("typo/config.yml: unknown config key 'num_expertz'"));
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("Every embedded MoE model traces symbolically on every path at full size", "[trace]") {
  const std::vector<std::string> models = {"deepseek2-16b",  "deepseek2-236b", "deepseek3-671b",
                                           "deepseek3-test", "deepseek3-tiny", "gemma4-26b",
                                           "gpt-oss-20b",    "llama4-17b-16e", "mixtral-8x22b",
                                           "mixtral-8x7b",   "qwen3-30b-a3b"};
  struct PathCase {
    std::vector<std::string> overrides;
    std::string label;
  };
  const std::vector<PathCase> paths = {
      {{}, "sparse_matmul/ragged_all_to_all"},
      {{"sparse_matmul=false", "capacity_factor=-1"}, "dense_matmul (dropless)"},
      {{"use_ring_of_experts=true"}, "sparse_matmul/ring_of_experts"},
      {{"shardtrace_pr3981_emb_chunks=2"}, "2 emb chunks"},
  };
  for (const std::string& model : models) {
    for (const PathCase& p : paths) {
      INFO(model << " " << p.label);
      std::vector<std::string> args = {"model_name=" + model, "ici_expert_parallelism=4"};
      args.insert(args.end(), p.overrides.begin(), p.overrides.end());
      const RunResult run = Symbolic(args, 16);
      CHECK(run.trace.path.find(p.label) != std::string::npos);
      const TensorRecord* output = run.trace.At(run.trace.output);
      REQUIRE(output != nullptr);
      CHECK(output->shape == run.trace.At(run.trace.input)->shape);
      std::set<std::string> ids;
      for (const TensorRecord& t : run.trace.tensors) {
        CHECK(ids.insert(t.stable_id).second);
        CHECK(run.trace.Find(t.stable_id) == &t);
      }
    }
  }
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("config and explain print exactly their golden text", "[cli][golden-text]") {
  struct Case {
    std::string file;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases = {
      {"config_deepseek3-671b_ep64.txt",
       {"config", "model_name=deepseek3-671b", "ici_expert_parallelism=64", "--devices", "256"}},
      {"config_mixtral_dense_dropping.json",
       {"config", "model_name=mixtral-8x7b", "sparse_matmul=false", "capacity_factor=1.25",
        "--format", "json"}},
      {"explain_exp_embed_moe_mlp_moe.txt",
       {"explain", "--axes", "exp,embed_moe,mlp_moe", "--shape", "64,2048,1408",
        "ici_expert_parallelism=2", "--devices", "8"}},
  };
  for (const Case& c : cases) {
    INFO(c.file);
    const testing::CommandResult r = testing::RunShardtrace(c.args);
    CHECK(r.status == 0);
    CompareWithGolden("expected/" + c.file, r.out);
  }
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("Stable tensor ids name scope, name and occurrence, and unrelated ops do not shift them",
          "[trace]") {
  const std::vector<std::string> base = {"model_name=mixtral-8x7b", "ici_expert_parallelism=4"};
  const RunResult plain = Symbolic(base, 16);
  CHECK(plain.trace.tensors[0].stable_id == "inputs#0");
  const TensorRecord* gate = plain.trace.Find("RoutedMoE/gate/output#0");
  REQUIRE(gate != nullptr);
  CHECK(gate->shape == Shape{192, 2048, 8});
  CHECK(plain.trace.At(plain.trace.top_k_indices)->stable_id ==
        "RoutedMoE/sparse_matmul/wrapper/permute/get_topk/top_k_indices#0");
  // The load-balance loss adds ops in the permute scope (and before later scopes); every
  // tensor of the plain trace keeps its id and its shape.
  std::vector<std::string> with_loss = base;
  with_loss.push_back("load_balance_loss_weight=0.01");
  const RunResult loss = Symbolic(with_loss, 16);
  REQUIRE(loss.trace.tensors.size() > plain.trace.tensors.size());
  for (const TensorRecord& t : plain.trace.tensors) {
    INFO(t.stable_id);
    const TensorRecord* same = loss.trace.Find(t.stable_id);
    REQUIRE(same != nullptr);
    CHECK(same->shape == t.shape);
    CHECK(same->dims == t.dims);
  }
}

}  // namespace shardtrace
