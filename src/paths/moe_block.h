// The blocks shardtrace runs, as MaxText's decoder layers call them: RoutedMoE.__call__
// (GateLogit, kernel casts, path selection into dense_matmul / sparse_matmul),
// RoutedAndSharedMoE (routed experts + shared-expert MlpBlock, summed), qwen3.py's
// Qwen3NextSparseMoeBlock (routed + sigmoid(gate) * shared expert) and the dense MlpBlock. RunBlock
// records one block into a Trace; run/run.h is the one pipeline around it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/captures.h"
#include "ir/trace.h"
#include "paths/moe_params.h"
#include "paths/moe_setup.h"

namespace shardtrace {

class Config;
class Progress;
class Mesh;

enum class Block { kMoe, kMlp, kShared };
Block ParseBlock(const std::string& name);  // "moe" | "mlp" | "shared"

// A training step's gradients (issue 25; testdata/golden-format.md): the loss
// sum(float32(output) * cotangent) + lb_loss (lb_loss as the block returns it, 0 when it returns
// none; the bias update is not differentiated) and its gradient with respect to the block input
// and every parameter, computed by the reverse pass through the simulated devices.
struct Gradients {
  Array loss;  // float32 []
  // float32, by golden-format name: "inputs", then each of Trace::parameters ("gate_kernel",
  // "wi_0", "shared_wo", ...). A parameter no cotangent reaches (a bias that only decides the
  // routing) has a zero gradient, as in JAX.
  std::map<std::string, Array> arrays;
};

struct BlockRun {
  Trace trace;
  Captures captures;                   // the numeric arrays golden checks and trees read
  std::optional<Gradients> gradients;  // when RunOptions::cotangent was given
};

// True when the decoder wraps the routed experts in RoutedAndSharedMoE.
bool UsesSharedExperts(const MoeSetup& setup);
// True when the layer's MoE holds a shared-expert MlpBlock: RoutedAndSharedMoE's
// shared_experts or Qwen3NextSparseMoeBlock's shared_expert (`--block shared`).
bool HasSharedExpertMlp(const MoeSetup& setup);

struct RunOptions {
  bool numeric = false;
  // Run the masked-loop reference (paths/masked_loop.h) instead of the path
  // RoutedMoE.__call__ would select.
  bool masked_loop = false;
  // Per-tensor values summaries (min/max/mean), for outputs that print them.
  bool summaries = true;
  // Threads simulating devices (and experts) in numeric runs: 0 = hardware_concurrency,
  // 1 = serial. The trace is bit-identical for every value.
  int threads = 0;
  // Status line (op and device being computed); null for none.
  Progress* progress = nullptr;
  // What a numeric run may hold (CheckNumericSize over every simulated device); --max-memory.
  int64_t budget_bytes = kNumericBudgetBytes;
  // A numeric run given the cotangent of the output (float32, the output's shape) also
  // differentiates the training step's loss (Gradients); not owned.
  const Array* cotangent = nullptr;
  // The file the cotangent comes from, which errors about it name (empty: none).
  std::string cotangent_source;
};

BlockRun RunBlock(const Config& config, const Mesh& mesh, const MoeSetup& setup,
                  const MoeParams& params, Block block, const RunOptions& options);
// Shorthand: summaries on, all hardware threads.
BlockRun RunBlock(const Config& config, const Mesh& mesh, const MoeSetup& setup,
                  const MoeParams& params, Block block, bool numeric, bool masked_loop = false);

// The blocks a model's decoder layers run, in MaxText's order: a dense MlpBlock (when the
// model has dense layers), the routed MoE block, then its shared experts.
std::vector<Block> ModelBlocks(const MoeSetup& setup);

}  // namespace shardtrace
