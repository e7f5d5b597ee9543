// Golden checks: run the block a golden case's config.yml selects, on the case's inputs and
// weights (tensors.npz), and compare every expected array it carries with what the run
// captured: floats with |a-b| <= atol + rtol*|b|, ints and bools exactly. Format:
// testdata/golden-format.md. Missing expected arrays are reported as skipped; unknown
// array names are reported, never ignored. A training-step case (one with `cotangent`) also
// runs the reverse pass and compares `loss` and every `grad_<name>` array it holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "numeric/array.h"
#include "paths/moe_params.h"
#include "util/warnings.h"

namespace shardtrace {

class Progress;

struct ArrayCheck {
  std::string name;
  enum class Status { kPass, kFail, kSkipped, kUnknown } status = Status::kPass;
  std::string detail;  // max error / first mismatch / why skipped
  double max_abs_error = 0;
};

struct GoldenReport {
  std::string case_dir;
  std::string path;              // the MoE path the config selected
  std::string maxtext_revision;  // MaxTextRevision::Title(): whose moe.py ran
  std::vector<ArrayCheck> checks;
  // The trace's warnings (Trace::warnings): where this mesh makes MaxText compute something
  // else than one device would, which the case's arrays then hold too.
  std::vector<std::string> warnings;
  // A training-step case: the loss and the grad_* arrays were compared (checks lists them).
  bool step = false;
  int gradients_compared = 0;  // grad_* arrays compared (pass or fail)
  // The case's config warnings (RunSetup::warnings): `check` prints them on stderr.
  std::vector<Warning> config_warnings;
  bool passed() const;
};

struct CheckOptions {
  double atol = 1e-5;
  double rtol = 1e-4;
  std::vector<std::string> extra_args;  // more key=value overrides / --devices via the caller
  int threads = 0;                      // RunOptions::threads
  Progress* progress = nullptr;         // status line while reading and computing
  int64_t budget_bytes = kNumericBudgetBytes;  // RunOptions::budget_bytes (--max-memory)
};

// The inputs (parameters) a golden case may hold; its expected outputs are GoldenCaptures()
// (ir/captures.h), and for a training step `loss` and `grad_<input>` (StepArrayNames).
const std::vector<std::string>& GoldenInputNames();
// The arrays of a training step a case may hold: its input "cotangent", then the expected
// "loss", "grad_inputs", "grad_gate_kernel", ... (one per GoldenInputNames() entry).
const std::vector<std::string>& StepArrayNames();

// Compares one expected array with an actual one (shape, then values).
ArrayCheck CompareArrays(const std::string& name, const Array& actual, const Array& expected,
                         double atol, double rtol);

// REQUIRES case_dir holds config.yml and tensors.npz. `base_args` are CONFIG paths and
// overrides placed before the case's own config (normally empty: the embedded base).
GoldenReport CheckGoldenCase(const std::string& case_dir, const std::vector<std::string>& base_args,
                             const CheckOptions& options);

}  // namespace shardtrace
