// `shardtrace plan`: the meshes and knobs of a model on a slice, each fitted (model/
// whole_step.h) and its step time estimated (plan/step_time.h), ranked. The search space is
// every factorization of the slice's devices over the ICI axes (data, fsdp, tensor, expert by
// default; an axis the user fixes with its ici_*_parallelism key is not varied) times the
// remat policies (MaxText's ten and an offloading custom one, unless remat_policy is fixed)
// times sparse_matmul true and false for a model with experts (unless fixed) times each
// `--vary KEY=v1,v2,...`. A config MaxText would refuse, or shardtrace cannot shard, is kept as
// excluded with its one-line reason. Every config is evaluated in this process, over all
// cores; a space larger than the budget is refused before any work.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/unmodelled.h"
#include "model/whole_step.h"
#include "plan/step_time.h"

namespace shardtrace {

class Progress;

// The largest space plan searches unless told otherwise (--max-configs): a few seconds here.
inline constexpr int64_t kDefaultMaxConfigs = 5000;

struct PlanRequest {
  std::vector<std::string> args;  // MaxText's argv: config files, fixed key=value
  std::vector<std::pair<std::string, std::vector<std::string>>> vary;  // --vary KEY=v1,v2
  // --axes: the mesh axes whose ici_*_parallelism the devices are factorized over; empty: data,
  // fsdp, tensor and expert; {"all"}: every axis of the config's mesh_axes.
  std::vector<std::string> axes;
  int top = 10;
  int threads = 0;  // 0: all cores
  int64_t max_configs = kDefaultMaxConfigs;  // refused above this many (--max-configs)
  HardwareFile hardware;  // --hardware FILE (empty: the embedded chip table)
  Progress* progress = nullptr;
};

struct PlannedConfig {
  std::vector<std::string> overrides;  // key=value that differ from the user's
  std::string mesh;
  bool fits = false;
  FitMemory memory;
  int64_t hbm_bytes = 0;
  int64_t headroom_bytes = 0;
  bool near_line = false;  // fit's: within its measured error of the line (TPU)
  std::vector<Unmodelled> unmodelled;  // fit's (FitResult::unmodelled)
  StepTime time;
  bool pareto = false;  // no other fitting config has both more headroom and a shorter step
};

struct ExcludedConfig {
  std::vector<std::string> overrides;
  std::string reason;
};

struct PlanResult {
  std::string model_name;
  std::string revision;
  Target target;
  std::vector<std::string> user_args;
  int64_t evaluated = 0;
  double seconds = 0;  // wall time of the search
  std::vector<PlannedConfig> fits;  // most tokens per second per device first
  std::vector<PlannedConfig> near;  // do not fit, smallest shortfall first
  std::vector<ExcludedConfig> excluded;
  std::vector<std::string> assumptions;
  std::vector<Warning> warnings;
};

// Throws Error naming the flag or key for a bad request, or a space over the budget.
PlanResult Plan(const PlanRequest& request);

}  // namespace shardtrace
