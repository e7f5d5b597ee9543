// What one run of a block is asked to be: the MaxText-style arguments (config files, then
// key=value overrides), the device count, which block, symbolic or numeric, and where numeric
// weights come from. Every command and test builds one of these and hands it to Run
// (run/run.h); a flag that changes how a block runs is a field here and nowhere else, so no
// command can silently run another configuration than the one the user asked for.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/override_file.h"
#include "config/parsed_yaml_cache.h"
#include "numeric/array.h"
#include "paths/moe_block.h"

namespace shardtrace {

class Progress;

enum class Evaluation {
  kSymbolic,  // shapes, shardings and bytes at full size; no values
  kNumeric,   // values computed on every simulated device
};

struct RunRequest {
  // MaxText's CLI order: config files first, then key=value overrides.
  std::vector<std::string> args;
  // A golden case's config.yml keys: they go after the config files and before `args`'
  // overrides, so a user's key=value still wins; its warnings lead the run's.
  FileOverrides case_config;
  std::optional<int64_t> devices;  // --devices; unset: the mesh's own product
  Block block = Block::kMoe;
  Evaluation evaluation = Evaluation::kSymbolic;
  // The masked-loop reference (paths/masked_loop.h) instead of the path RoutedMoE.__call__
  // selects.
  bool masked_loop = false;
  uint64_t seed = 0;  // numeric weights and inputs when `arrays` is null
  // Numeric weights and inputs from a golden case's tensors.npz (`arrays_source` names it in
  // errors). A block the arrays do not hold (the MlpBlock of a MoE case) runs on seeded
  // weights with the arrays' inputs. Not owned; must outlive Run.
  const std::map<std::string, Array>* arrays = nullptr;
  std::string arrays_source;
  int threads = 0;  // simulated-device threads; 0 = all cores, 1 = serial
  // What a numeric run may hold (--max-memory), checked before anything is allocated.
  int64_t budget_bytes = kNumericBudgetBytes;
  // The training step (`trace --step`): also the backward pass's collectives, the gradients
  // and the step's memory under the config's remat_policy (RunResult::step). Refused for
  // model_call_mode=inference, which has no backward pass.
  bool step = false;
  bool summaries = true;  // per-tensor min/max/mean in numeric traces
  // A training step (numeric): the cotangent of the block output (float32, its shape), from
  // which Run differentiates loss = sum(float32(output) * cotangent) + lb_loss into
  // RunResult::gradients. Not owned; must outlive Run. Errors about it name `arrays_source`,
  // where a golden case's cotangent comes from.
  const Array* cotangent = nullptr;
  Progress* progress = nullptr;
  // Parsed config files shared with other runs of the same files (plan's configs); not owned.
  ParsedYamlCache* yaml_cache = nullptr;

  bool numeric() const { return evaluation == Evaluation::kNumeric; }
};

// A symbolic run of `block` for these arguments: what most commands ask for.
RunRequest SymbolicRequest(std::vector<std::string> args, std::optional<int64_t> devices,
                           Block block = Block::kMoe);

// `request` with the key=value overrides `more` (a key already set takes the new value).
RunRequest WithOverrides(RunRequest request, const std::vector<std::string>& more);

}  // namespace shardtrace
