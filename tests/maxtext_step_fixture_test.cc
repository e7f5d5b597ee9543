// The training-step fixtures (testdata/maxtext/cases/step_*, exported by
// tools/maxtext_oracle/export_step.py from jax.value_and_grad of MaxText's own block) hold the
// step convention of testdata/golden-format.md: a float32 `cotangent` of `output`'s shape, a
// scalar `loss`, `grad_inputs` of the input's shape and one `grad_<name>` of `<name>`'s shape for
// every parameter array of the case; step.json marks every collective of the compiled step's HLO
// forward, backward or mixed (a combined one, its parts each forward or backward). This holds the fixtures to that convention (what `check` and the step
// model read); the gradients' values are checked by `check` itself.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check/golden_check.h"
#include "io/npz.h"
#include "numeric/dtype.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

// SHARDTRACE_MAXTEXT_DIR: a fresh export (make maxtext-verify), as for the forward cases.
fs::path OracleCases() {
  const char* env = std::getenv("SHARDTRACE_MAXTEXT_DIR");
  return (env && *env ? fs::path(env) : fs::path(testing::SourcePath("testdata/maxtext"))) / "cases";
}

std::vector<fs::path> StepCaseDirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(OracleCases()))
    if (fs::exists(e.path() / "step.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST_CASE("Every MaxText step fixture holds a gradient for each parameter and the input",
          "[maxtext][step]") {
  const std::vector<std::string>& inputs = GoldenInputNames();
  int cases = 0;
  for (const fs::path& dir : StepCaseDirs()) {
    const std::string name = dir.filename().string();
    INFO("case " << name);
    CHECK(name.rfind("step_", 0) == 0);
    const std::map<std::string, Array> arrays = ReadNpz((dir / "tensors.npz").string());
    REQUIRE(arrays.count("output") == 1);
    REQUIRE(arrays.count("cotangent") == 1);
    CHECK(arrays.at("cotangent").shape == arrays.at("output").shape);
    CHECK(arrays.at("cotangent").dtype == DType::kFloat32);
    REQUIRE(arrays.count("loss") == 1);
    CHECK(arrays.at("loss").shape.empty());
    int grads = 0;
    for (const auto& [array, value] : arrays) {
      if (std::find(inputs.begin(), inputs.end(), array) == inputs.end()) continue;
      INFO("array " << array);
      const std::string grad = array == "inputs" ? "grad_inputs" : "grad_" + array;
      REQUIRE(arrays.count(grad) == 1);
      CHECK(arrays.at(grad).shape == value.shape);
      CHECK(arrays.at(grad).dtype == DType::kFloat32);
      ++grads;
    }
    // Every grad_* names an array of the case: nothing differentiated that the case lacks.
    for (const auto& [array, value] : arrays)
      if (array.rfind("grad_", 0) == 0) {
        const std::string of = array == "grad_inputs" ? "inputs" : array.substr(5);
        INFO("gradient " << array);
        CHECK(arrays.count(of) == 1);
      }
    CHECK(grads >= 4);  // the input and at least three kernels
    const nlohmann::json step = nlohmann::json::parse(testing::ReadFile(dir / "step.json"));
    for (const nlohmann::json& c : step.at("collectives")) {
      const std::string pass = c.at("pass").get<std::string>();
      CHECK((pass == "forward" || pass == "backward" || pass == "mixed"));
      CHECK(c.at("result_bytes").get<int64_t>() > 0);
      // A combined collective's parts carry the passes and add up to its bytes.
      if (pass == "mixed") REQUIRE(c.contains("parts"));
      if (c.contains("parts")) {
        int64_t bytes = 0;
        for (const nlohmann::json& p : c.at("parts")) bytes += p.at("bytes").get<int64_t>();
        CHECK(bytes == c.at("result_bytes").get<int64_t>());
      }
    }
    ++cases;
  }
  CHECK(cases >= 20);
}

}  // namespace
}  // namespace shardtrace
