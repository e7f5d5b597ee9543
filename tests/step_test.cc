// The training step's symbolic model (spmd/step_model.h) through Run and `trace --step`:
// the backward collectives of the MLP block and the sparse EP path, the gradients' shardings,
// what each remat_policy keeps, and the refusals.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

std::vector<std::string> MlpArgs(const std::string& policy) {
  return {"ici_fsdp_parallelism=4", "base_emb_dim=16",         "base_mlp_dim=32",
          "max_target_length=4",    "per_device_batch_size=1", "remat_policy=" + policy};
}

StepResult StepOf(const std::vector<std::string>& args, int64_t devices, Block block) {
  RunRequest request = SymbolicRequest(args, devices, block);
  request.step = true;
  RunResult run = Run(request);
  REQUIRE(run.step.has_value());
  return *run.step;
}

// "op origin axes participants bytes" per backward collective, in backward order.
std::vector<std::string> Rows(const StepResult& step) {
  std::vector<std::string> rows;
  for (const StepCollective& c : step.backward)
    rows.push_back(fmt::format("{} {} {} g{} {}B cpu:{} {}B",
                               c.written ? ToString(c.kind) : HloName(c.kind),
                               c.recompute ? "recompute" : c.written ? "written" : "xla",
                               fmt::join(c.axes, ","), c.participants, c.bytes_per_device,
                               c.xla_cpu_op, c.xla_cpu_result_bytes));
  return rows;
}

}  // namespace

TEST_CASE("MLP block on fsdp=4: each weight gradient is reduce-scattered over fsdp, and full "
          "remat gathers the weights again",
          "[step]") {
  const StepResult step = StepOf(MlpArgs("full"), 4, Block::kMlp);
  // The kernels ([16,32] and [32,16] float32, 512 B per device) are cast to bfloat16 and
  // gathered for the einsums (3 x 256 B sent = 768 B); the batch is on fsdp, so each kernel's
  // gradient holds partial sums over fsdp, reduce-scattered back into its own sharding (on
  // XLA:CPU an all-reduce of the whole float32 [16,32] block, 2048 B, and a slice).
  CHECK(Rows(step) == std::vector<std::string>{
                          "all-gather recompute fsdp g4 768B cpu:all-gather 2048B",
                          "all-gather recompute fsdp g4 768B cpu:all-gather 2048B",
                          "all-gather recompute fsdp g4 768B cpu:all-gather 2048B",
                          "reduce-scatter xla fsdp g4 768B cpu:all-reduce 2048B",
                          "reduce-scatter xla fsdp g4 768B cpu:all-reduce 2048B",
                          "reduce-scatter xla fsdp g4 768B cpu:all-reduce 2048B",
                      });
  REQUIRE(step.gradients.size() == 4);
  CHECK(step.gradients[0].spec.ToString() == "P('fsdp', None)");
  CHECK(step.gradients[2].spec.ToString() == "P(None, 'fsdp')");
  CHECK(step.gradients[3].spec.ToString() == "P('fsdp', None, None)");  // the input's
  CHECK(step.memory.gradient_bytes == 3 * 512);
  CHECK(step.memory.gradient_bytes == step.memory.parameter_bytes);
  CHECK(step.memory.input_gradient_bytes == 128);  // bfloat16 [1,4,16]
  CHECK(step.memory.saved_bytes == 0);
  CHECK(step.forward_bytes_per_device == 3 * 768);
  CHECK(step.backward_bytes_per_device == 6 * 768);
  CHECK(step.recompute_bytes_per_device == 3 * 768);
}

TEST_CASE("remat_policy decides what the MLP block keeps: minimal its wi outputs, none every "
          "residual with no re-gather",
          "[step]") {
  const StepResult minimal = StepOf(MlpArgs("minimal"), 4, Block::kMlp);
  // mlpwi_0 and mlpwi_1 (the wi einsums' bfloat16 [1,4,32] outputs, 256 B each) are what the
  // activation's VJP reads; mlpwo (the output) is read by no VJP and is not kept.
  REQUIRE(minimal.memory.saved.size() == 2);
  CHECK(minimal.memory.saved[0].name == "mlpwi_0");
  CHECK(minimal.memory.saved[1].name == "mlpwi_1");
  CHECK(minimal.memory.saved_bytes == 512);
  CHECK(minimal.memory.recomputed_bytes == minimal.memory.residual_bytes - 512);
  const StepResult none = StepOf(MlpArgs("none"), 4, Block::kMlp);
  CHECK_FALSE(none.policy.wrapped);
  CHECK(none.memory.saved_bytes == none.memory.residual_bytes);
  CHECK(none.memory.recomputed_bytes == 0);
  CHECK(none.recompute_bytes_per_device == 0);
  CHECK(Rows(none).size() == 3);  // the three reduce-scatters only
  const StepResult full = StepOf(MlpArgs("full"), 4, Block::kMlp);
  CHECK(full.memory.residual_bytes == none.memory.residual_bytes);
}

TEST_CASE("Sparse EP=2 x fsdp=2: ragged all-to-alls reversed, the kernels' psum over fsdp from "
          "shard_map's transpose is a reduce-scatter on TPU and an all-reduce on XLA:CPU",
          "[step]") {
  std::vector<std::string> args = testing::SmallMoeDims();
  for (const char* kv : {"ici_fsdp_parallelism=2", "ici_expert_parallelism=2", "num_experts=4",
                         "sparse_matmul=true", "megablox=false"})
    args.push_back(kv);
  const StepResult step = StepOf(args, 4, Block::kMoe);
  std::vector<std::string> backward;
  for (const std::string& r : Rows(step))
    if (r.find("recompute") == std::string::npos) backward.push_back(r);
  // w0/w1/wo: P('expert', 'fsdp', None) [4,16,32] float32, gathered over fsdp into the in_spec
  // P('expert', None, None): the [2,16,32] block (4 KiB) summed over fsdp and sliced back.
  // The reversed ragged all-to-alls write into buffers shaped like the forward's operands:
  // the ragged buffer (16 rows x 16 float32, 1 KiB) and the sorted rows (8 x 16, 512 B);
  // JAX's transpose exchanges each one's input and output offsets (int32[2]) first.
  CHECK(backward == std::vector<std::string>{
                        "ragged_all_to_all written expert g2 128B cpu:ragged-all-to-all 1024B",
                        "all_to_all written expert g2 4B cpu:all-to-all 8B",
                        "all_to_all written expert g2 4B cpu:all-to-all 8B",
                        "ragged_all_to_all written expert g2 128B cpu:ragged-all-to-all 512B",
                        "all_to_all written expert g2 4B cpu:all-to-all 8B",
                        "all_to_all written expert g2 4B cpu:all-to-all 8B",
                        "psum_scatter written fsdp g2 1024B cpu:all-reduce 4096B",
                        "psum_scatter written fsdp g2 1024B cpu:all-reduce 4096B",
                        "psum_scatter written fsdp g2 1024B cpu:all-reduce 4096B",
                        "reduce-scatter xla expert,fsdp g4 96B cpu:all-reduce 256B",
                    });
}

TEST_CASE("trace --step of DeepSeek-V3 on EP32 x FSDP8 reports the step's peak and "
          "communication with the remat policy it assumed",
          "[step][cli]") {
  const testing::CommandResult r =
      testing::RunShardtrace({"trace", "--step", "model_name=deepseek3-671b", "--devices", "256",
                              "ici_expert_parallelism=32", "ici_fsdp_parallelism=8"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("remat_policy=full: saves nothing inside the layer") != std::string::npos);
  CHECK(r.out.find("step peak ") != std::string::npos);
  CHECK(r.out.find("step communication 17.2 GiB per device = forward 5.7 GiB + backward 11.5 GiB "
                   "(of which remat re-runs 5.7 GiB)") != std::string::npos);
}

TEST_CASE("trace --step refuses inference and the graph formats", "[step][cli]") {
  const testing::CommandResult inference =
      testing::RunShardtrace({"trace", "--step", "model_call_mode=inference"});
  CHECK(inference.status == 2);
  CHECK(inference.err ==
        "shardtrace: error: --step: model_call_mode=inference traces a forward pass only; a "
        "training step needs model_call_mode other than inference\n");
  const testing::CommandResult dot = testing::RunShardtrace({"trace", "--step", "--format", "dot"});
  CHECK(dot.status == 2);
  CHECK(dot.err.find("--step: the dot output draws the forward pass only") != std::string::npos);
}

TEST_CASE("remat_policy values MaxText refuses are refused with the key named", "[step][cli]") {
  const testing::CommandResult r =
      testing::RunShardtrace({"trace", "--step", "remat_policy=sometimes"});
  CHECK(r.status == 2);
  CHECK(r.err.find("shardtrace: error: remat_policy: expected one of full, minimal") == 0);
  CHECK(r.err.find("found 'sometimes'") != std::string::npos);
}

}  // namespace shardtrace
