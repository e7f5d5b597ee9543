// The step model's collectives against the TPU compiler's: for every block step fixture
// tools/maxtext_oracle/export_tpu_block.py compiled for a TPU topology with libtpu (no TPU
// attached; testdata/maxtext-tpu/blocks/<case>/step.json, the CPU step cases' schema), the
// compiled step's backward collectives and the compiled forward's collectives (HLO op, devices
// per group, result bytes per device, compared as tests/step_compare.h keys them) must be
// shardtrace's, or differ exactly as testdata/maxtext-tpu/block_differences.json lists with a
// reason: a listed difference that disappears fails, and so does an unlisted one. The export
// writes TPU's all-reduce-scatter fusions (an all-reduce whose only user slices the device's
// share) as reduce-scatters and an async -start's result alone. shardtrace's side is the
// product's TPU view (spmd/tpu_collectives.h, LowerForTpu): the forward's written and implied
// collectives and the step model's backward, rewritten by the TPU compiler's measured rules.
// SHARDTRACE_PRINT_TPU_TABLE=1 prints the figures.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "emit/step_text.h"
#include "run/run.h"
#include "shard/sharding.h"
#include "step_compare.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using step_compare::Compiler;
using step_compare::Minus;

using TpuCase = step_compare::StepFixture;

std::vector<TpuCase> TpuCases() {
  return step_compare::LoadStepFixtures("testdata/maxtext-tpu/blocks", true);
}

// Compares one pass; returns whether it is exact and records a difference in `found`.
bool ComparePass(const std::string& name, const std::multiset<std::string>& model,
                 const std::multiset<std::string>& tpu, const nlohmann::json& expected,
                 nlohmann::json& found) {
  const std::vector<std::string> only_model = Minus(model, tpu);
  const std::vector<std::string> only_tpu = Minus(tpu, model);
  if (only_model.empty() && only_tpu.empty()) {
    CHECK_FALSE(expected.contains(name));  // gone: unlist it
    return true;
  }
  found[name] = {{"only_shardtrace", only_model}, {"only_tpu", only_tpu}};
  CHECK(expected.contains(name));
  if (expected.contains(name)) {
    const nlohmann::json& e = expected[name];
    CHECK(e["only_shardtrace"].get<std::vector<std::string>>() == only_model);
    CHECK(e["only_tpu"].get<std::vector<std::string>>() == only_tpu);
    CHECK_FALSE(e["why"].get<std::string>().empty());
  }
  return false;
}

}  // namespace

TEST_CASE(
    "TPU's compiled block steps have the step model's collectives, or differ exactly as "
    "listed with a reason",
    "[tpu][step]") {
  const nlohmann::json expected = nlohmann::json::parse(
      testing::ReadFile(testing::SourcePath("testdata/maxtext-tpu/block_differences.json")));
  nlohmann::json found = {{"backward", nlohmann::json::object()},
                          {"forward", nlohmann::json::object()}};
  int total = 0, backward_exact = 0, forward_exact = 0, both_exact = 0;
  std::string table =
      "| case | remat | backward (TPU) | exact | forward (TPU) | exact | compile s |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const TpuCase& c : TpuCases()) {
    INFO("case " << c.name);
    REQUIRE(c.run.step.has_value());
    REQUIRE(c.step["compiler"]["platform"] == "tpu");
    ++total;
    const std::multiset<std::string> tpu_backward =
        step_compare::Compiled(c.step["collectives"], "backward", Compiler::kTpu);
    const std::multiset<std::string> tpu_forward =
        step_compare::Compiled(c.step["forward_collectives"], "forward", Compiler::kTpu);
    const step_compare::TpuModelKeys model = step_compare::TpuModel(c.run, c.step);
    const bool b =
        ComparePass(c.name, model.backward, tpu_backward, expected["backward"], found["backward"]);
    const bool f =
        ComparePass(c.name, model.forward, tpu_forward, expected["forward"], found["forward"]);
    backward_exact += b;
    forward_exact += f;
    both_exact += b && f;
    table += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} |\n", c.name,
        c.step["remat"].is_null() ? "none" : c.step["remat"]["remat_policy"].get<std::string>(),
        tpu_backward.size(), b ? "yes" : "no", tpu_forward.size(), f ? "yes" : "no",
        c.step["seconds"]["step_compile"].get<double>());
  }
  CHECK(total >= 20);
  // The counts block_differences.json states.
  CHECK(expected["exact"]["cases"] == total);
  CHECK(expected["exact"]["backward"] == backward_exact);
  CHECK(expected["exact"]["forward"] == forward_exact);
  CHECK(expected["exact"]["both"] == both_exact);
  for (const char* pass : {"backward", "forward"})
    for (const auto& [name, e] : expected[pass].items()) {
      INFO("listed " << pass << " case " << name);
      CHECK(found[pass].contains(name));
    }
  if (std::getenv("SHARDTRACE_PRINT_TPU_TABLE"))
    std::cout << "TPU blocks: backward exact on " << backward_exact << " of " << total
              << ", forward exact on " << forward_exact << " of " << total << ", both on "
              << both_exact << " of " << total << "\n"
              << found.dump(1) << "\n"
              << table;
}

TEST_CASE("trace --step prints the TPU-compiled view of a block's collectives",
          "[tpu][step][golden-text]") {
  // A dense step under remat (combined unfused gradients, sharded top_k, the step's
  // scatter-add) and a sparse one on v5p-16 (windowed einsums, decomposed all_gathers).
  for (const TpuCase& c : TpuCases()) {
    if (c.name != "tpu_dense_fsdp4_remat_full" && c.name != "tpu_sparse_fsdp2_ep4") continue;
    INFO("case " << c.name);
    REQUIRE(c.run.tpu_step.has_value());
    testing::CompareWithGolden("expected/step_" + c.name + ".txt",
                               StepToText(c.run.trace, *c.run.step, &*c.run.tpu_step));
  }
}

}  // namespace shardtrace
