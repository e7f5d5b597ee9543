// The summary every visualization page (generate and render) opens with, at most 40 lines:
// the path and the conditions that chose it; the per-device budget of the forward pass
// (parameters, block input, peak temporaries with the largest buffer named, communication
// per layer written in moe.py and inserted by XLA) and how the peak fits the HBM of common
// accelerators; the collectives per layer; and the knobs that change this, each a traced
// variant (knob_variants.h). Every figure is read from the run's totals (TraceTotals,
// SpmdResult::memory) or a variant's: this file formats, it never adds up or estimates.
#pragma once

#include <string>
#include <vector>

#include "model/whole_step.h"

#include "ir/trace.h"
#include "pages/knob_variants.h"
#include "spmd/step_model.h"
#include "spmd/trace_totals.h"

namespace shardtrace {

// An accelerator's HBM per device.
struct Accelerator {
  std::string name;  // "TPU v5e"
  double gib = 0;    // 16
};

// TPU v5e 16 GiB, TPU v6e 32 GiB, TPU v5p 95 GiB, H100 80 GiB, H200 141 GiB.
std::vector<Accelerator> DefaultAccelerators();

// `--hbm NAME=GIB` ("MI300X=192"): throws Error naming the flag's text when it is not a name,
// '=' and a positive number of GiB.
Accelerator ParseAccelerator(const std::string& text);

struct SummaryInput {
  const Trace* trace = nullptr;      // the page's run
  const SpmdResult* spmd = nullptr;  // its SPMD result (the memory); null: no budget table
  // The run's training step (RunResult::step), shown beside the forward budget; null for an
  // inference config, which has no backward pass.
  const StepResult* step = nullptr;
  TraceTotals totals;                // the run's (RunResult::totals)
  std::vector<KnobRun> knobs;    // TraceKnobs(...): the config as given first
  std::vector<Accelerator> accelerators = DefaultAccelerators();
  std::string legend;  // markdown naming the legend ("[legend](README.md#legend)")
  // The whole training step on the config's compile_topology (model/whole_step.h), when the
  // config names one: then the HBM line is the whole step's, and the per-layer line says
  // "one layer".
  const FitResult* fit = nullptr;
};

// The "## Summary" section, ending with a newline.
std::string SummaryMarkdown(const SummaryInput& in);

}  // namespace shardtrace
