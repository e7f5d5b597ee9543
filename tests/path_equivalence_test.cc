// Cross-path equivalences: every dropless path computes the same function, so on the same
// weights and inputs (seeded; float32 everywhere) dense dropless, dense dropping with a
// capacity too large to drop, and sparse_matmul on every mesh (EP 1/2/4/8, TP 1/2, batch
// sharded or global batch 1, ring of experts) must agree to float32 summation tolerance.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "config/config.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "shard/mesh.h"
#include "test_support.h"

namespace shardtrace {
namespace {

constexpr int64_t kBatch = 8;

std::vector<std::string> SmallMoe(const std::string& decoder) {
  return {"dtype=float32",
          "weight_dtype=float32",
          "matmul_precision=highest",
          "base_emb_dim=16",
          "base_mlp_dim=24",
          "base_moe_mlp_dim=24",
          "num_experts=8",
          "num_experts_per_tok=2",
          "max_target_length=8",
          "decoder_block=" + decoder,
          "load_balance_loss_weight=0.01"};
}

// Runs the MoE block with `overrides` on `devices` devices, keeping the global batch at
// `batch` so the seeded parameters are identical across meshes.
RunResult Run(std::vector<std::string> overrides, int64_t devices, int64_t batch = kBatch) {
  overrides.push_back(
      fmt::format("per_device_batch_size={}", static_cast<double>(batch) / devices));
  RunRequest request = SymbolicRequest(overrides, devices);
  request.evaluation = Evaluation::kNumeric;
  request.seed = 7;
  RunResult run = shardtrace::Run(request);
  REQUIRE(run.setup.setup.batch == batch);
  return run;
}

using testing::MaxDiff;

std::vector<std::string> With(std::vector<std::string> base,
                              std::initializer_list<std::string> extra) {
  base.insert(base.end(), extra);
  return base;
}

}  // namespace

TEST_CASE("Dense dropping with a capacity that drops nothing equals dense dropless", "[paths]") {
  const auto base = SmallMoe("mixtral");
  const RunResult dropless = Run(With(base, {"sparse_matmul=false", "capacity_factor=-1"}), 1);
  const RunResult dropping = Run(With(base, {"sparse_matmul=false", "capacity_factor=8"}), 1);
  CHECK(MaxDiff(dropless.captures.At(Capture::kOutput), dropping.captures.At(Capture::kOutput)) <
        1e-5);
  // A capacity of 1 drops tokens, so the outputs must then differ.
  const RunResult tight = Run(With(base, {"sparse_matmul=false", "capacity_factor=0.25"}), 1);
  CHECK(MaxDiff(dropless.captures.At(Capture::kOutput), tight.captures.At(Capture::kOutput)) >
        1e-3);
}

TEST_CASE("Every sparse_matmul mesh agrees with dense dropless", "[paths]") {
  const auto base = SmallMoe("mixtral");
  const RunResult reference = Run(With(base, {"sparse_matmul=false", "capacity_factor=-1"}), 1);
  struct Case {
    std::vector<std::string> overrides;
    int64_t devices;
    int64_t batch;
  };
  const std::vector<Case> cases = {
      {{"megablox=true"}, 1, kBatch},
      {{"megablox=false"}, 1, kBatch},
      {{"use_tokamax_gmm=true"}, 1, kBatch},
      {{"ici_expert_parallelism=2"}, 2, kBatch},
      {{"ici_expert_parallelism=4"}, 4, kBatch},
      {{"ici_expert_parallelism=8"}, 8, kBatch},
      {{"ici_expert_parallelism=2", "ici_fsdp_parallelism=2"}, 4, kBatch},
      {{"ici_tensor_parallelism=2"}, 2, kBatch},
      {{"ici_expert_parallelism=2", "ici_tensor_parallelism=2"}, 4, kBatch},
      {{"ici_expert_parallelism=4", "ici_tensor_parallelism=2"}, 8, kBatch},
      {{"ici_expert_parallelism=2", "use_ring_of_experts=true"}, 2, kBatch},
      {{"ici_expert_parallelism=4", "use_ring_of_experts=true"}, 4, kBatch},
      {{"ici_expert_parallelism=8", "use_ring_of_experts=true"}, 8, kBatch},
      {{"ici_expert_parallelism=2", "ici_tensor_parallelism=2", "use_ring_of_experts=true"},
       4,
       kBatch},
      {{"ici_expert_parallelism=2", "ragged_buffer_factor=4.0"}, 2, kBatch},
      // The custom_mesh_and_rule files: cp-as-ep routes over ('context', 'expert').
      {{"custom_mesh_and_rule=cp-as-ep", "ici_context_parallelism=2", "ici_expert_parallelism=2"},
       4,
       kBatch},
      {{"custom_mesh_and_rule=ep-as-cp", "ici_expert_parallelism=2"}, 4, kBatch},
      {{"custom_mesh_and_rule=pure-fsdp"}, 4, kBatch},
  };
  for (const Case& c : cases) {
    auto overrides = base;
    overrides.insert(overrides.end(), c.overrides.begin(), c.overrides.end());
    overrides.push_back("ici_fsdp_parallelism=-1");
    INFO(fmt::format("{} on {} devices", fmt::join(c.overrides, " "), c.devices));
    const RunResult run = Run(overrides, c.devices, c.batch);
    CHECK(MaxDiff(reference.captures.At(Capture::kOutput), run.captures.At(Capture::kOutput)) <
          1e-5);
    CHECK(MaxDiff(reference.captures.At(Capture::kTopKIndices),
                  run.captures.At(Capture::kTopKIndices)) == 0);
  }
}

TEST_CASE("Decode with global batch 1 agrees with dense dropless for EP 1, 2, 4, 8", "[paths]") {
  const auto base = SmallMoe("mixtral");
  const RunResult reference = Run(With(base, {"sparse_matmul=false", "capacity_factor=-1"}), 1, 1);
  for (const int64_t ep : {1, 2, 4, 8}) {
    INFO("EP " << ep);
    const RunResult run =
        Run(With(base, {fmt::format("ici_expert_parallelism={}", ep), "ici_fsdp_parallelism=1"}),
            ep, 1);
    CHECK(MaxDiff(reference.captures.At(Capture::kOutput), run.captures.At(Capture::kOutput)) <
          1e-5);
  }
  const RunResult tp = Run(With(base, {"ici_expert_parallelism=2", "ici_tensor_parallelism=2",
                                       "ici_fsdp_parallelism=1"}),
                           4, 1);
  CHECK(MaxDiff(reference.captures.At(Capture::kOutput), tp.captures.At(Capture::kOutput)) < 1e-5);
}

TEST_CASE("DeepSeek-style routing with shared experts agrees across dense and sparse paths",
          "[paths]") {
  auto base = SmallMoe("deepseek");
  base.insert(base.end(), {"routed_score_func=sigmoid", "routed_bias=true",
                           "routed_scaling_factor=2.5", "shared_experts=1", "mlp_bias=false"});
  const RunResult reference = Run(With(base, {"sparse_matmul=false", "capacity_factor=-1"}), 1);
  const RunResult sparse =
      Run(With(base, {"ici_expert_parallelism=4", "ici_fsdp_parallelism=-1"}), 4);
  CHECK(MaxDiff(reference.captures.At(Capture::kOutput), sparse.captures.At(Capture::kOutput)) <
        1e-5);
}

TEST_CASE("gpt_oss with mlp_bias agrees between dense dropless and sparse EP 2", "[paths]") {
  auto base = SmallMoe("gpt_oss");
  base.insert(base.end(), {"mlp_bias=true", "routed_bias=true", "mlp_activations=[sigmoid,linear]",
                           "mlp_activations_limit=1.0"});
  const RunResult reference = Run(With(base, {"sparse_matmul=false", "capacity_factor=-1"}), 1);
  for (const std::string& mesh :
       {std::string("ici_expert_parallelism=2"), std::string("ici_tensor_parallelism=2")}) {
    INFO(mesh);
    const RunResult sparse = Run(With(base, {mesh, "ici_fsdp_parallelism=-1"}), 2);
    CHECK(MaxDiff(reference.captures.At(Capture::kOutput), sparse.captures.At(Capture::kOutput)) <
          1e-5);
  }
  const RunResult ring =
      Run(With(base, {"ici_expert_parallelism=2", "use_ring_of_experts=true"}), 2);
  CHECK(MaxDiff(reference.captures.At(Capture::kOutput), ring.captures.At(Capture::kOutput)) <
        1e-5);
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("The refactored route/dispatch/gmm pipeline, chunked or not, equals the seed wrapper",
          "[paths][pipeline]") {
  const auto base = SmallMoe("mixtral");
  struct Case {
    std::vector<std::string> mesh;
    int64_t devices;
    int64_t batch;
  };
  const std::vector<Case> meshes = {
      {{"ici_fsdp_parallelism=1"}, 1, kBatch},
      {{"ici_fsdp_parallelism=2"}, 2, kBatch},
      {{"ici_fsdp_parallelism=2", "ici_expert_parallelism=2"}, 4, kBatch},
      {{"ici_fsdp_parallelism=-1", "ici_expert_parallelism=4", "ici_tensor_parallelism=2"},
       8,
       kBatch},
      {{"ici_fsdp_parallelism=2", "ici_expert_parallelism=2", "use_ring_of_experts=true"},
       4,
       kBatch},
      {{"ici_fsdp_parallelism=1", "ici_expert_parallelism=2"}, 2, 1},
  };
  for (const Case& m : meshes) {
    auto seed_args = base;
    seed_args.insert(seed_args.end(), m.mesh.begin(), m.mesh.end());
    const RunResult seed = Run(seed_args, m.devices, m.batch);
    for (const int chunks : {1, 2, 4}) {
      INFO(fmt::format("{} on {} devices, shardtrace_pr3981_emb_chunks={}", fmt::join(m.mesh, " "),
                       m.devices, chunks));
      auto args = seed_args;
      args.push_back(fmt::format("shardtrace_pr3981_emb_chunks={}", chunks));
      const RunResult pipeline = Run(args, m.devices, m.batch);
      CHECK(pipeline.trace.path.find("pipeline") != std::string::npos);
      CHECK(MaxDiff(seed.captures.At(Capture::kOutput), pipeline.captures.At(Capture::kOutput)) <
            1e-5);
      CHECK(MaxDiff(seed.captures.At(Capture::kLbLoss), pipeline.captures.At(Capture::kLbLoss)) <
            1e-6);
      int gathers = 0;
      for (const OpRecord& op : pipeline.trace.ops)
        gathers += op.kind == OpKind::kAllGather &&
                   pipeline.trace.tensors[op.outputs[0]].name == "w0_chunk";
      // One all-gather of wi_0 per chunk when fsdp shards the embedding.
      const bool fsdp = pipeline.trace.mesh.find("'fsdp'") != std::string::npos;
      CHECK(gathers == (chunks > 1 && fsdp ? chunks : 0));
    }
  }
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("The masked-loop reference equals dense dropless with plain top-k routing", "[paths]") {
  for (const std::string& decoder : {std::string("mixtral"), std::string("gpt_oss")}) {
    INFO(decoder);
    auto base = SmallMoe(decoder);
    if (decoder == "gpt_oss")
      base.insert(base.end(), {"mlp_bias=true", "mlp_activations=[sigmoid,linear]"});
    base.insert(base.end(), {"sparse_matmul=false", "capacity_factor=-1"});
    base.push_back(fmt::format("per_device_batch_size={}", kBatch));
    RunRequest request = SymbolicRequest(base, 1);
    request.evaluation = Evaluation::kNumeric;
    request.seed = 11;
    const RunResult dense = shardtrace::Run(request);
    request.masked_loop = true;
    const RunResult loop = shardtrace::Run(request);
    CHECK(loop.trace.path.rfind("masked_loop", 0) == 0);
    CHECK(MaxDiff(dense.captures.At(Capture::kOutput), loop.captures.At(Capture::kOutput)) < 1e-5);
  }
}

}  // namespace shardtrace

namespace shardtrace {

TEST_CASE("Routing variants agree between dense dropless and sparse expert parallelism",
          "[paths][routing]") {
  struct Variant {
    std::string name;
    std::vector<std::string> overrides;
  };
  const std::vector<Variant> variants = {
      {"llama4 (sigmoid-scaled inputs, unit combine weights, K=1)",
       {"decoder_block=llama4", "num_experts_per_tok=1"}},
      {"gemma4 (softmax over all experts at the top-k)",
       {"decoder_block=gemma4", "base_mlp_dim=24"}},
      {"qwen3 norm_topk_prob", {"decoder_block=qwen3_moe", "norm_topk_prob=true"}},
      {"deepseek3 grouped routing",
       {"decoder_block=deepseek", "model_name=deepseek3-tiny", "override_model_config=true",
        "routed_score_func=sigmoid", "routed_bias=true", "n_routing_groups=4",
        "topk_routing_group=2", "base_emb_dim=16", "base_mlp_dim=24", "base_moe_mlp_dim=24",
        "num_experts=8", "num_experts_per_tok=2", "shared_experts=1", "first_num_dense_layers=0"}},
      {"float32 gate logits and activations",
       {"float32_gate_logits=true", "activations_in_float32=true"}},
  };
  for (const Variant& v : variants) {
    INFO(v.name);
    auto base = SmallMoe("mixtral");
    base.insert(base.end(), v.overrides.begin(), v.overrides.end());
    const RunResult dense = Run(With(base, {"sparse_matmul=false", "capacity_factor=-1"}), 1);
    const RunResult sparse =
        Run(With(base, {"ici_expert_parallelism=2", "ici_fsdp_parallelism=2"}), 4);
    CHECK(MaxDiff(dense.captures.At(Capture::kOutput), sparse.captures.At(Capture::kOutput)) <
          1e-5);
    CHECK(MaxDiff(dense.captures.At(Capture::kTopKWeights),
                  sparse.captures.At(Capture::kTopKWeights)) < 1e-6);
  }
}

TEST_CASE("Weight-sharding variants of sparse_matmul compute the same output", "[paths]") {
  const auto base = SmallMoe("mixtral");
  const RunResult reference = Run(base, 1);
  for (const std::vector<std::string>& v : std::vector<std::vector<std::string>>{
           {"shard_exp_on_fsdp=true", "ici_fsdp_parallelism=4"},
           {"use_2d_fsdp_sharding=true", "ici_fsdp_parallelism=4"},
           {"moe_fsdp_use_two_stage_all_gather=true", "ici_fsdp_parallelism=2",
            "ici_fsdp_transpose_parallelism=2"},
           {"ici_tensor_transpose_parallelism=2", "ici_fsdp_parallelism=2"},
       }) {
    INFO(fmt::format("{}", fmt::join(v, " ")));
    auto args = base;
    args.insert(args.end(), v.begin(), v.end());
    const RunResult variant = Run(args, 4);
    CHECK(MaxDiff(reference.captures.At(Capture::kOutput), variant.captures.At(Capture::kOutput)) <
          1e-5);
  }
}

TEST_CASE("tensor_transpose with expert parallelism fails where the seed's moe.py fails",
          "[paths]") {
  // moe.py sizes the reverse all-to-all buffer by M/TP (tensor only) while wo's output is
  // split by tensor_transpose: the seed's ragged_all_to_all gets mismatched shapes.
  auto args = SmallMoe("mixtral");
  args.insert(args.end(), {"ici_tensor_transpose_parallelism=2", "ici_expert_parallelism=2"});
  CHECK_THROWS_WITH(Run(args, 4),
                    Catch::Contains("ragged_all_to_all") && Catch::Contains("differ past dim 0"));
}

TEST_CASE("A ragged buffer too small for the routed rows is reported as dropped rows", "[paths]") {
  auto base = SmallMoe("mixtral");
  base.insert(base.end(),
              {"ici_expert_parallelism=4", "ici_fsdp_parallelism=1", "ragged_buffer_factor=0.5"});
  const RunResult run = Run(base, 4);
  const Fact* dropped = run.trace.FindFact(FactKind::kRowsDropped, "x");
  REQUIRE(dropped);
  double total = 0;
  for (const double x : dropped->values) total += x;
  CHECK(total > 0);
  CHECK(dropped->Input("buffer_rows") > 0);
  const RunResult reference = Run(SmallMoe("mixtral"), 1);
  CHECK(MaxDiff(reference.captures.At(Capture::kOutput), run.captures.At(Capture::kOutput)) > 1e-3);
}

TEST_CASE("Inference-mode dense dropping gives the same output for 1 and 2 context groups",
          "[paths]") {
  auto base = SmallMoe("mixtral");
  base.insert(base.end(),
              {"sparse_matmul=false", "capacity_factor=16", "model_call_mode=inference"});
  const RunResult one = Run(base, 1);
  const RunResult two =
      Run(With(base, {"ici_context_autoregressive_parallelism=2", "ici_fsdp_parallelism=1"}), 2);
  const TensorRecord* mask = two.trace.At(two.trace.dispatch_mask);
  REQUIRE(mask != nullptr);
  CHECK(mask->stable_id == "RoutedMoE/dense_matmul/dispatch_mask#0");
  CHECK(mask->shape.size() == 5);
  CHECK(mask->shape[1] == 2);  // N = 2 context groups
  CHECK(MaxDiff(one.captures.At(Capture::kOutput), two.captures.At(Capture::kOutput)) < 1e-5);
}

}  // namespace shardtrace
