// The step model's backward collectives against XLA: for every training-step case MaxText
// 0.2.5 exported (testdata/maxtext/cases/step_*/step.json, value_and_grad compiled by
// XLA:CPU), the collectives of the compiled step marked backward (remat's re-run forward
// included) must be the model's, as XLA:CPU compiles them (HLO op, devices per group, result
// bytes per device), or differ exactly as testdata/maxtext/step_differences.json lists with a
// reason. XLA's all-reduce combiner sends the backward's all-reduces (and the forward's loss
// scalar) as one op; its parts are compared one by one, the forward's parts left out. A
// collective over a group of one device moves nothing (shard_map's psum over mesh axes of
// size 1) and is left out on both sides. A parameter the model gathers for a backward einsum
// (StepCollective::argument) is matched against XLA's reshards of step arguments, which XLA
// issues once where the argument enters and the export marks forward (argument_reshard). Where
// XLA:CPU compiled the step, the model's arguments and peak temporaries are printed beside
// memory_analysis()'s with SHARDTRACE_PRINT_XLA_TABLE=1.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "run/run.h"
#include "step_compare.h"
#include "test_support.h"

namespace shardtrace {
namespace {


using step_compare::Compiler;
using step_compare::Minus;

std::multiset<std::string> XlaBackward(const nlohmann::json& step) {
  return step_compare::Compiled(step["collectives"], "backward", Compiler::kXlaCpu);
}

std::multiset<std::string> ModelBackward(const StepResult& step, const nlohmann::json& xla) {
  return step_compare::ModelBackward(step, xla);
}

using StepCase = step_compare::StepFixture;

std::vector<StepCase> StepCases() { return step_compare::LoadStepFixtures("testdata/maxtext/cases", false); }

}  // namespace

TEST_CASE(
    "XLA's backward collectives are the step model's, or differ exactly as listed with a "
    "reason",
    "[maxtext][step]") {
  const nlohmann::json expected = nlohmann::json::parse(
      testing::ReadFile(testing::SourcePath("testdata/maxtext/step_differences.json")));
  nlohmann::json found = nlohmann::json::object();
  int exact = 0, total = 0, communicating = 0, communicating_exact = 0;
  int memory_compared = 0, memory_close = 0;
  std::string table =
      "| case | remat | backward (XLA) | exact | step args (model) | XLA args | model peak "
      "temps | XLA temp |\n|---|---|---|---|---|---|---|---|\n";
  for (const StepCase& c : StepCases()) {
    INFO("case " << c.name);
    REQUIRE(c.run.step.has_value());
    const StepResult& step = *c.run.step;
    const std::multiset<std::string> model = ModelBackward(step, c.step);
    const std::multiset<std::string> xla = XlaBackward(c.step);
    const std::vector<std::string> only_model = Minus(model, xla);
    const std::vector<std::string> only_xla = Minus(xla, model);
    ++total;
    const bool same = only_model.empty() && only_xla.empty();
    std::string args = "-", xla_args = "-", temps = "-", xla_temp = "-";
    if (!xla.empty()) ++communicating;
    if (!xla.empty() && same) ++communicating_exact;
    // Step memory: the model's peak temporaries against XLA:CPU's temp, within 25% where the
    // figure is no CPU artifact (the sparse paths' ragged_dot lowering takes megabytes of
    // scratch on XLA:CPU, as in the forward cases) or listed with a reason.
    if (c.step.contains("memory_analysis") && c.run.trace.path.rfind("sparse_matmul", 0) != 0) {
      const double ours = static_cast<double>(step.memory.peak_temporary_bytes());
      const double theirs = c.step["memory_analysis"]["temp_size_in_bytes"].get<double>();
      const bool close = std::abs(ours - theirs) <= 0.25 * theirs;
      ++memory_compared;
      memory_close += close ? 1 : 0;
      CHECK(close != expected["memory"].contains(c.name));
    }
    if (c.step.contains("memory_analysis")) {
      const nlohmann::json& m = c.step["memory_analysis"];
      const int64_t ours = step.memory.parameter_bytes + step.memory.input_bytes;
      const int64_t theirs = m["argument_size_in_bytes"].get<int64_t>();
      args = fmt::format("{:.1f}", ours / 1024.0);
      xla_args = fmt::format("{:.1f}", theirs / 1024.0);
      temps = fmt::format("{:.1f}", step.memory.peak_temporary_bytes() / 1024.0);
      xla_temp = fmt::format("{:.1f}", m["temp_size_in_bytes"].get<int64_t>() / 1024.0);
    }
    table += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} |\n", c.name,
        c.step["remat"].is_null() ? "none" : c.step["remat"]["remat_policy"].get<std::string>(),
        xla.size(), same ? "yes" : "no", args, xla_args, temps, xla_temp);
    if (same) {
      ++exact;
      CHECK_FALSE(expected["collectives"].contains(c.name));  // gone: unlist it
      continue;
    }
    found[c.name] = {{"only_shardtrace", only_model}, {"only_xla", only_xla}};
    CHECK(expected["collectives"].contains(c.name));
    if (!expected["collectives"].contains(c.name)) continue;
    const nlohmann::json& e = expected["collectives"][c.name];
    CHECK(e["only_shardtrace"].get<std::vector<std::string>>() == only_model);
    CHECK(e["only_xla"].get<std::vector<std::string>>() == only_xla);
    CHECK_FALSE(e["why"].get<std::string>().empty());
  }
  CHECK(total >= 12);
  // The cases with backward communication (the others compile to none and agree trivially).
  CHECK(communicating >= 12);
  CHECK(communicating_exact * 12 >= communicating * 10);  // at least 10 of every 12 exact
  CHECK(memory_compared >= 6);
  for (const auto& [name, e] : expected["collectives"].items()) {
    INFO("listed case " << name);
    CHECK(found.contains(name));
  }
  if (std::getenv("SHARDTRACE_PRINT_XLA_TABLE"))
    std::cout << "step: exact " << exact << " of " << total << "; with backward communication "
              << communicating_exact << " of " << communicating << "; memory within 25% "
              << memory_close << " of " << memory_compared << "\n"
              << found.dump(2) << "\n"
              << table;
}

}  // namespace shardtrace

namespace shardtrace {

// What the remat policy keeps for the backward: the model's saved residuals (per device, times
// the devices: each kept residual of these cases is split over all of them) against JAX's own
// saved_residuals of the same jax.checkpoint-wrapped block, leaving out the block's arguments
// and constants (kept by the caller, not the policy). What a policy offloads JAX lists as
// the outputs of its device_put to pinned_host: those are held to the model's offloaded bytes,
// the rest to its saved bytes. A difference must be listed under "saved" in
// step_differences.json with the two figures.
TEST_CASE("The remat policy keeps what JAX's saved_residuals lists", "[maxtext][step]") {
  const nlohmann::json expected = nlohmann::json::parse(
      testing::ReadFile(testing::SourcePath("testdata/maxtext/step_differences.json")));
  int compared = 0, offloaded = 0;
  for (const StepCase& c : StepCases()) {
    if (c.step["remat"].is_null()) continue;
    INFO("case " << c.name);
    int64_t jax = 0, jax_offloaded = 0;
    for (const nlohmann::json& e : c.step["saved_residuals"]["entries"]) {
      const std::string source = e["source"].get<std::string>();
      if (source.rfind("from the argument", 0) == 0 || source.rfind("from a constant", 0) == 0)
        continue;
      (source.rfind("output of device_put", 0) == 0 ? jax_offloaded : jax) +=
          e["bytes"].get<int64_t>();
    }
    const int64_t devices = c.run.setup.mesh.num_devices();
    const int64_t ours = c.run.step->memory.saved_bytes * devices;
    CHECK(c.run.step->memory.offloaded_bytes * devices == jax_offloaded);
    offloaded += jax_offloaded > 0 ? 1 : 0;
    ++compared;
    if (expected["saved"].contains(c.name)) {
      const nlohmann::json& e = expected["saved"][c.name];
      CHECK(e["shardtrace"].get<int64_t>() == ours);
      CHECK(e["jax"].get<int64_t>() == jax);
      CHECK_FALSE(e["why"].get<std::string>().empty());
    } else {
      CHECK(ours == jax);
    }
  }
  CHECK(compared >= 6);
  CHECK(offloaded >= 1);
}

}  // namespace shardtrace
