// The MoE (with its shared experts) and dense MLP blocks of a whole-model step, each run once
// through the one pipeline (run/run.h: a symbolic RunRequest with `step`), and read as the figures
// a layer of the model adds: what the remat policy keeps on the device or offloads, the block's
// temporaries at their peak (its gathered weights, unreduced gradients, residuals and cotangents,
// spmd/step_memory.h), and its forward and backward collectives. The model room composes these; it
// never re-derives a block.
#pragma once

#include <vector>

#include "config/remat_policy.h"
#include "model/attention_step.h"
#include "model/block_cache.h"
#include "run/run.h"
#include "run/run_request.h"

namespace shardtrace::model_internal {

struct BlockRuns {
  std::vector<BlockFigures> moe, mlp;  // empty, or one layer's figures
  std::vector<std::string> notes;
};

struct BlocksNeeded {
  bool moe = false, mlp = false;
  // The MoE layers hold shared experts: MaxText runs them inside the MoE block
  // (RoutedAndSharedMoE, Qwen3-Next's sparse block), whose trace (Block::kMoe) holds them, so
  // they are no block of their own.
  bool shared = false;
};

// What of the target the blocks' figures depend on.
struct BlockTarget {
  bool tpu = false;
  int slices = 1;  // compile_topology_num_slices
  // The chip's Chip::narrow_combine_rows: the combine's rows relayout in the activation dtype.
  bool narrow_combine_rows = false;
  // The chip's Chip::windowed_dense_backward (model/block_step.cc, WindowedBackwardKernels).
  bool windowed_dense_backward = false;
};

// `target.tpu`: the target is a TPU, whose compiler fuses each weight gradient's reduction into the
// dot that produces it, and whose scheduler orders a gmm block's backward one of two ways
// (model/block_step.cc): with memory to spare, every activation gradient before the weight
// gradients (BlockFigures::backward_peak_bytes); where memory is not ample, each weight gradient
// as its dot's backward runs, which holds less (lean_backward_peak_bytes).
// `setup` is Prepare(base): the config is loaded once for every block.
// `cache`: forward runs shared with other fits (model/block_cache.h); null: none.
BlockRuns RunBlocks(const RunRequest& base, const RunSetup& setup, const BlocksNeeded& needed,
                    const BlockTarget& target, BlockCache* cache);

}  // namespace shardtrace::model_internal
