#include "check/golden_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "config/case_config.h"
#include "config/override_file.h"
#include "io/npz.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// A training-step case's own arrays, checked before anything runs (golden-format.md,
// "Training step"): each holds floats; the cotangent is finite and shaped like `output`, the
// loss a scalar, and each grad_<name> has its parameter array <name> in the case (its
// gradient means nothing otherwise). A grad_<name> of another shape than the config gives
// <name> fails after the run, beside the forward arrays, so a parameter array of the wrong
// shape is named itself first.
void CheckStepArrays(const std::string& npz, const std::map<std::string, Array>& arrays) {
  for (const std::string& name : StepArrayNames()) {
    const auto found = arrays.find(name);
    if (found == arrays.end()) continue;
    const Array& array = found->second;
    if (!IsFloating(array.dtype))
      Fail("{} (array '{}'): expected float32 values (golden-format.md), found {}", npz, name,
           ToString(array.dtype));
    if (name == "loss") {
      if (!array.shape.empty())
        Fail("{} (array 'loss'): expected a scalar, shape [], found shape {}", npz,
             ShapeToString(array.shape));
      continue;
    }
    if (name == "cotangent") {
      const Shape& output = arrays.at("output").shape;
      if (array.shape != output)
        Fail("{} (array 'cotangent'): expected the shape of 'output', {}, found {}", npz,
             ShapeToString(output), ShapeToString(array.shape));
    } else if (!arrays.contains(name.substr(5))) {
      Fail("{} (array '{}'): the case holds no '{}' array, so it has no gradient to compare", npz,
           name, name.substr(5));
    }
  }
  const std::vector<float>& cotangent = arrays.at("cotangent").values();
  for (size_t i = 0; i < cotangent.size(); ++i)
    if (!std::isfinite(cotangent[i]))
      Fail("{} (array 'cotangent'): expected finite values, found {} at flat index {}", npz,
           cotangent[i], i);
}

}  // namespace

bool GoldenReport::passed() const {
  return std::none_of(checks.begin(), checks.end(), [](const ArrayCheck& c) {
    return c.status == ArrayCheck::Status::kFail || c.status == ArrayCheck::Status::kUnknown;
  });
}

const std::vector<std::string>& GoldenInputNames() {
  static const std::vector<std::string> names = {
      "inputs", "gate_kernel", "gate_bias", "wi_0", "wi_1", "wo", "wi_0_bias", "wi_1_bias",
      "wo_bias", "shared_wi_0", "shared_wi_1", "shared_wo", "mlp_wi_0", "mlp_wi_1", "mlp_wo",
      "shared_expert_gate",
      // gemma4's per-expert scale (ones when absent).
      "per_expert_scale",
      // fp8 weight storage: the scales beside the kernels (docs/fp8-storage.md).
      "wi_0_scale", "wi_1_scale", "wo_scale", "shared_wi_0_scale", "shared_wi_1_scale",
      "shared_wo_scale"};
  return names;
}

const std::vector<std::string>& StepArrayNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = {"cotangent", "loss"};
    for (const std::string& input : GoldenInputNames()) all.push_back("grad_" + input);
    return all;
  }();
  return names;
}

ArrayCheck CompareArrays(const std::string& name, const Array& actual, const Array& expected,
                         double atol, double rtol) {
  ArrayCheck c;
  c.name = name;
  if (actual.shape != expected.shape) {
    c.status = ArrayCheck::Status::kFail;
    c.detail = fmt::format("shape {} but expected {}", ShapeToString(actual.shape),
                           ShapeToString(expected.shape));
    return c;
  }
  const bool exact = !IsFloating(expected.dtype);
  const std::vector<float>& a = actual.values();
  const std::vector<float>& b = expected.values();
  int64_t mismatches = 0, first = -1, nans = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    // NaN where the case holds NaN agrees (numpy's allclose with equal_nan): memory a kernel
    // never writes (megablox's tgmm past its groups) is NaN in MaxText's interpret-mode run.
    if (std::isnan(a[i]) && std::isnan(b[i])) {
      ++nans;
      continue;
    }
    const double diff = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    c.max_abs_error = std::max(c.max_abs_error, diff);
    const bool ok =
        exact ? a[i] == b[i] : diff <= atol + rtol * std::fabs(static_cast<double>(b[i]));
    if (!ok) {
      ++mismatches;
      if (first < 0) first = static_cast<int64_t>(i);
    }
  }
  if (mismatches > 0) {
    c.status = ArrayCheck::Status::kFail;
    c.detail = fmt::format("{} of {} elements differ; first at flat index {}: {} vs expected {}",
                           mismatches, b.size(), first, a[first], b[first]);
  } else {
    c.detail = exact ? "exact" : fmt::format("max |error| {:.3g}", c.max_abs_error);
    if (nans > 0) c.detail += fmt::format(" ({} of {} elements NaN in both)", nans, b.size());
  }
  return c;
}

GoldenReport CheckGoldenCase(const std::string& case_dir, const std::vector<std::string>& base_args,
                             const CheckOptions& options) {
  // The case's mesh is its *_parallelism keys: no --devices.
  RunRequest request = SymbolicRequest(base_args, std::nullopt);
  // A case file that says its keys are command-line overrides (config/case_config.h) is
  // given as one: it names its base unless the user gave one. Any other case's keys are
  // overrides of the user's base (or the embedded one).
  const std::string case_file = case_dir + "/config.yml";
  if (IsCaseConfig(case_file))
    request.args.push_back(case_file);
  else
    request.case_config = OverridesFromYamlFile(case_file);
  request.args.insert(request.args.end(), options.extra_args.begin(), options.extra_args.end());
  const std::optional<RunInputs> loaded = [&]() -> std::optional<RunInputs> {
    try {
      return LoadInputs(request);
    } catch (const Error& e) {
      // Name the case file: its keys arrive as overrides, so the loader cannot.
      throw Error(fmt::format("{}/config.yml: {}", case_dir, e.what()), e.warnings());
    }
  }();
  const RunInputs& in = *loaded;
  if (in.config.Bool("use_random_routing"))
    Fail("{}: use_random_routing cannot be reproduced outside JAX's PRNG; golden checks exclude it",
         case_dir);
  const std::string npz = case_dir + "/tensors.npz";
  const std::map<std::string, Array> arrays = ReadNpz(npz, options.progress);
  // Without `output` a case would check nothing that matters and pass.
  if (!arrays.contains("output"))
    Fail("{} (array 'output'): expected the block output every golden case carries, found none",
         npz);
  request.block = IsDenseMlpCase(arrays) ? Block::kMlp : Block::kMoe;
  request.evaluation = Evaluation::kNumeric;
  request.arrays = &arrays;
  request.arrays_source = npz;
  request.summaries = false;  // a check prints verdicts, never per-tensor summaries
  request.threads = options.threads;
  request.progress = options.progress;
  request.budget_bytes = options.budget_bytes;
  const auto cotangent = arrays.find("cotangent");
  const bool step = cotangent != arrays.end();
  if (!step)
    for (const std::string& name : StepArrayNames())
      if (name != "cotangent" && arrays.contains(name))
        Fail(
            "{} (array '{}'): a training step's expected arrays need the 'cotangent' they were "
            "computed with; found none",
            npz, name);
  if (step) {
    CheckStepArrays(npz, arrays);
    request.cotangent = &cotangent->second;
  }
  const RunResult run = Run(request);
  const Block block = request.block;
  const MoeSetup& setup = run.setup.setup;

  GoldenReport report{case_dir,
                      block == Block::kMlp ? run.trace.path : setup.PathLabel(),
                      in.config.revision().Title(),
                      {},
                      run.trace.warnings,
                      step,
                      0,
                      run.setup.warnings};
  for (const Capture id : GoldenCaptures()) {
    const std::string name(CaptureName(id));
    const auto expected = arrays.find(name);
    if (expected == arrays.end()) {
      report.checks.push_back({name, ArrayCheck::Status::kSkipped, "not in the case", 0});
      continue;
    }
    const Array* actual = run.captures.Find(id);
    if (!actual) {
      report.checks.push_back({name, ArrayCheck::Status::kFail,
                               fmt::format("the {} path does not produce '{}' for this config",
                                           setup.PathLabel(), name),
                               0});
      continue;
    }
    if (actual->shape != expected->second.shape)
      Fail("{}: array '{}' has shape {} but the config implies {}", npz, name,
           ShapeToString(expected->second.shape), ShapeToString(actual->shape));
    report.checks.push_back(
        CompareArrays(name, *actual, expected->second, options.atol, options.rtol));
  }
  if (step) {
    // The loss, then each gradient the case holds, in StepArrayNames() order.
    for (const std::string& name : StepArrayNames()) {
      const auto expected = arrays.find(name);
      if (name == "cotangent" || expected == arrays.end()) continue;
      const Array* actual = nullptr;
      if (name == "loss") {
        actual = &run.gradients->loss;
      } else {
        const auto found = run.gradients->arrays.find(name.substr(5));
        if (found != run.gradients->arrays.end()) actual = &found->second;
        ++report.gradients_compared;
      }
      if (actual == nullptr) {
        report.checks.push_back(
            {name, ArrayCheck::Status::kFail,
             fmt::format("the block has no parameter '{}' for this config", name.substr(5)), 0});
        continue;
      }
      if (actual->shape != expected->second.shape)
        Fail("{}: array '{}' has shape {} but the config implies {}", npz, name,
             ShapeToString(expected->second.shape), ShapeToString(actual->shape));
      report.checks.push_back(
          CompareArrays(name, *actual, expected->second, options.atol, options.rtol));
    }
  }
  for (const auto& [name, array] : arrays) {
    const auto& in_names = GoldenInputNames();
    const auto& step_names = StepArrayNames();
    if (std::find(step_names.begin(), step_names.end(), name) != step_names.end()) continue;
    const std::optional<Capture> out = CaptureByName(name);
    const auto& golden = GoldenCaptures();
    if (std::find(in_names.begin(), in_names.end(), name) == in_names.end() &&
        !(out && std::find(golden.begin(), golden.end(), *out) != golden.end()))
      report.checks.push_back(
          {name, ArrayCheck::Status::kUnknown, "unknown array name (not in golden-format.md)", 0});
  }
  return report;
}

}  // namespace shardtrace
