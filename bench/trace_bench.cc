// Timings (never asserted in tests): the symbolic full-size DeepSeek-V3 trace the issues
// promise "well under a second", and a numeric EP=8 run on a small config.
#include <benchmark/benchmark.h>

#include "paths/moe_block.h"
#include "run/run.h"

namespace shardtrace {
namespace {

void RunTrace(benchmark::State& state, const std::vector<std::string>& args, int64_t devices,
              bool numeric) {
  RunRequest request = SymbolicRequest(args, devices);
  if (numeric) request.evaluation = Evaluation::kNumeric;
  request.seed = 1;
  for (auto _ : state) {
    RunResult run = Run(request);
    benchmark::DoNotOptimize(run.trace.tensors.data());
  }
}

void BM_SymbolicDeepSeekV3_EP64_256Devices(benchmark::State& state) {
  RunTrace(state, {"model_name=deepseek3-671b", "ici_expert_parallelism=64"}, 256, false);
}
BENCHMARK(BM_SymbolicDeepSeekV3_EP64_256Devices)->Unit(benchmark::kMillisecond);

void BM_SymbolicDeepSeekV3_DenseDropping(benchmark::State& state) {
  RunTrace(state,
           {"model_name=deepseek3-671b", "sparse_matmul=false", "capacity_factor=1.25",
            "ici_expert_parallelism=64"},
           256, false);
}
BENCHMARK(BM_SymbolicDeepSeekV3_DenseDropping)->Unit(benchmark::kMillisecond);

void BM_NumericEP8Small(benchmark::State& state) {
  RunTrace(state,
           {"dtype=float32", "base_emb_dim=64", "base_mlp_dim=128", "base_moe_mlp_dim=128",
            "num_experts=16", "num_experts_per_tok=2", "max_target_length=64",
            "per_device_batch_size=2", "decoder_block=mixtral", "ici_expert_parallelism=8"},
           8, true);
}
BENCHMARK(BM_NumericEP8Small)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardtrace

BENCHMARK_MAIN();
