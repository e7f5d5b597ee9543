// The forward runs of a whole-model step's blocks, shared between fits that differ only in
// what the step analysis reads: plan fits each mesh and batch under several remat policies,
// and a block's trace, its SPMD analysis and its forward collectives do not depend on the
// policy (the tracer never reads remat_policy or a custom policy's per-tensor keys;
// spmd/step_model.h does). A fit keys each run by its block, device count and arguments
// without those keys (config/remat_policy.h IsRematKey), and analyses the step for
// its own policy on the shared run. The step analyses are kept too, by the policy as the block
// sees it (the names its trace tags: full, save_qkv_proj and an offloaded decoder_layer_input
// are one policy inside an MoE block). Thread-safe; a cache lives for one command.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "run/run.h"

namespace shardtrace {

class BlockCache {
 public:
  // The run stored under `key`, or null.
  std::shared_ptr<const RunResult> Find(const std::string& key) const;
  // Stores `run` unless `key` is stored already; returns the stored one.
  std::shared_ptr<const RunResult> Store(const std::string& key,
                                         std::shared_ptr<const RunResult> run);
  // The same for a step analysis of a stored run under one policy.
  std::shared_ptr<const StepResult> FindStep(const std::string& key) const;
  std::shared_ptr<const StepResult> StoreStep(const std::string& key,
                                              std::shared_ptr<const StepResult> step);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const RunResult>, std::less<>> runs_;
  std::map<std::string, std::shared_ptr<const StepResult>, std::less<>> steps_;
};

}  // namespace shardtrace
