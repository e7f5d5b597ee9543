// MaxText's own training-step gradients (testdata/maxtext/cases/step_*: jax.value_and_grad of
// MaxText 0.2.5's block, exported by tools/maxtext_oracle/export_step.py) against shardtrace's
// reverse pass through the simulated devices, through the command a user runs: `check` must
// pass every step case (the loss and every grad_* array at the default tolerance; the bfloat16
// cases' arrays at the tolerances testdata/maxtext/README.md lists under Known disagreements)
// and say how many gradient arrays it compared, which must be every grad_* array of the case.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/npz.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> StepCases() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(testing::SourcePath("testdata/maxtext/cases")))
    if (fs::exists(e.path() / "step.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

int GradientArrays(const fs::path& dir) {
  int n = 0;
  for (const auto& entry : ReadNpz((dir / "tensors.npz").string()))
    n += entry.first.rfind("grad_", 0) == 0;
  return n;
}

// The config.yml of the case at `source`, copied into `dir`: it names its base relative to
// itself, so the copy points at the original's.
void WriteCaseConfig(const fs::path& source, const testing::TempDir& dir) {
  std::string config = testing::ReadFile(source / "config.yml");
  const std::string relative = "\"../../configs/base.yml\"";
  REQUIRE(config.find(relative) != std::string::npos);
  config.replace(config.find(relative), relative.size(),
                 "\"" + testing::SourcePath("testdata/maxtext/configs/base.yml") + "\"");
  dir.Write("config.yml", config);
}

}  // namespace

TEST_CASE("check passes MaxText's training-step gradients on every step case", "[maxtext][step]") {
  const std::vector<fs::path> cases = StepCases();
  REQUIRE(cases.size() >= 12);
  const std::vector<testing::Known> known = testing::KnownDisagreements();
  int listed = 0;
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    INFO("case " << name);
    const testing::CommandResult r = testing::RunShardtrace({"check", "--quiet", dir.string()});
    INFO(r.out << r.err);
    const int grads = GradientArrays(dir);
    CHECK(grads >= 4);
    CHECK(r.out.find(fmt::format("training step: loss and {} gradient arrays compared", grads)) !=
          std::string::npos);
    CHECK(r.out.find("  loss ") != std::string::npos);
    // Every array either passes at the default tolerance, or is a listed known disagreement
    // (testdata/maxtext/README.md: the bfloat16 cases) that still fails there and passes at
    // the tolerance listed.
    std::vector<const testing::Known*> rows;
    for (const testing::Known& k : known)
      if (k.case_name == name) rows.push_back(&k);
    listed += static_cast<int>(rows.size());
    if (rows.empty()) {
      CHECK(r.status == 0);
      CHECK(r.out.rfind("PASS  ", 0) == 0);
      continue;
    }
    for (const testing::Known* k : rows) {
      INFO("listed " << k->array);
      CHECK(r.out.find(fmt::format("\n  {} ", k->array)) != std::string::npos);
      const size_t at = r.out.find(fmt::format("\n  {} ", k->array));
      CHECK(r.out.substr(at, r.out.find('\n', at + 1) - at).find("FAIL") != std::string::npos);
      REQUIRE(k->agrees_at);
      const testing::CommandResult again = testing::RunShardtrace(
          {"check", "--quiet", dir.string(), "--atol", fmt::format("{}", k->agrees_at->first),
           "--rtol", fmt::format("{}", k->agrees_at->second)});
      const size_t row = again.out.find(fmt::format("\n  {} ", k->array));
      REQUIRE(row != std::string::npos);
      CHECK(again.out.substr(row, again.out.find('\n', row + 1) - row).find("pass") !=
            std::string::npos);
    }
    // Nothing fails that is not listed.
    size_t pos = 0;
    while ((pos = r.out.find("FAIL  ", pos + 1)) != std::string::npos) {
      const size_t line = r.out.rfind('\n', pos) + 3;
      const std::string array = r.out.substr(line, r.out.find(' ', line) - line);
      INFO("failing array " << array);
      CHECK(std::any_of(rows.begin(), rows.end(),
                        [&](const testing::Known* k) { return k->array == array; }));
    }
  }
  CHECK(listed >= 7);
}

TEST_CASE("check fails a step case whose gradient is wrong, naming the array", "[maxtext][step]") {
  // One gradient of a real case, scaled: a reverse pass that dropped a factor must not pass.
  const fs::path source = testing::SourcePath("testdata/maxtext/cases/step_sparse_ep2");
  std::map<std::string, Array> arrays = ReadNpz((source / "tensors.npz").string());
  Array& wo = arrays.at("grad_wo");
  std::vector<float> halved = wo.values();
  for (float& v : halved) v *= 0.5f;
  wo = Array::FromData(wo.shape, wo.dtype, std::move(halved));
  testing::TempDir dir;
  WriteCaseConfig(source, dir);
  WriteNpz(dir.File("tensors.npz"), arrays);
  const testing::CommandResult r =
      testing::RunShardtrace({"check", "--quiet", dir.path().string()});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK(r.out.find("grad_wo           FAIL") != std::string::npos);
  // The same case without its cotangent: its expected gradients mean nothing, so it is refused.
  arrays.erase("cotangent");
  WriteNpz(dir.File("tensors.npz"), arrays);
  const testing::CommandResult missing =
      testing::RunShardtrace({"check", "--quiet", dir.path().string()});
  CHECK(missing.status == 2);
  CHECK(missing.err.find("'cotangent'") != std::string::npos);
}

TEST_CASE("check refuses a step case's malformed arrays in one line naming the array",
          "[maxtext][step]") {
  // A hostile user's step case: each array of a real case altered one way. What makes the
  // expected gradients meaningless is bad input (exit 2, one line naming the array and what
  // was expected), found before anything runs; a gradient that merely differs is a failed
  // check (exit 1).
  const fs::path source = testing::SourcePath("testdata/maxtext/cases/step_dense_dropless");
  const std::map<std::string, Array> original = ReadNpz((source / "tensors.npz").string());
  testing::TempDir dir;
  WriteCaseConfig(source, dir);
  const std::string npz = dir.File("tensors.npz");
  const auto check = [&](const std::map<std::string, Array>& arrays) {
    WriteNpz(npz, arrays);
    return testing::RunShardtrace({"check", "--quiet", dir.path().string()});
  };
  const auto with = [&](const std::string& name, const Array& array) {
    std::map<std::string, Array> arrays = original;
    arrays.insert_or_assign(name, array);
    return arrays;
  };
  const Array& wo = original.at("grad_wo");
  const Array& cotangent = original.at("cotangent");
  struct Case {
    std::string what;
    std::map<std::string, Array> arrays;
    std::string error;
  };
  std::vector<float> nan_first = cotangent.values();
  nan_first[0] = std::nanf("");
  const std::vector<Case> refused = {
      {"a gradient of the wrong shape",
       with("grad_wo", Array::FromData({8, 16, 32}, wo.dtype, wo.values())),
       ": array 'grad_wo' has shape [8,16,32] but the config implies [8,32,16]"},
      // A parameter array of the wrong shape is named itself, not through its gradient.
      {"a parameter of the wrong shape",
       with("inputs", Array::Filled({2, 4, 16}, DType::kFloat32, 1.0f)),
       ": array 'inputs' has shape [2,4,16] but the config implies [2,8,16]"},
      {"an integer gradient",
       with("grad_wo",
            Array::FromData(wo.shape, DType::kInt32, std::vector<float>(wo.values().size(), 0.0f))),
       " (array 'grad_wo'): expected float32 values (golden-format.md), found int32"},
      {"a loss that is not a scalar", with("loss", Array::Filled({1}, DType::kFloat32, 0.5f)),
       " (array 'loss'): expected a scalar, shape [], found shape [1]"},
      {"a gradient of a parameter the case lacks",
       with("grad_gate_bias", Array::Filled({8}, DType::kFloat32, 0.0f)),
       " (array 'grad_gate_bias'): the case holds no 'gate_bias' array, so it has no gradient to "
       "compare"},
      {"a cotangent of the wrong shape",
       with("cotangent", Array::Filled({2, 4, 16}, DType::kFloat32, 1.0f)),
       " (array 'cotangent'): expected the shape of 'output', [2,8,16], found [2,4,16]"},
      // A case whose output and cotangent agree with each other but not with the config.
      {"a cotangent and output of the wrong shape",
       [&] {
         std::map<std::string, Array> arrays =
             with("cotangent", Array::Filled({2, 4, 16}, DType::kFloat32, 1.0f));
         arrays.insert_or_assign("output", arrays.at("cotangent"));
         return arrays;
       }(),
       ": array 'cotangent' has shape [2,4,16], expected the block output's [2,8,16]"},
      {"a cotangent holding NaN",
       with("cotangent", Array::FromData(cotangent.shape, cotangent.dtype, nan_first)),
       " (array 'cotangent'): expected finite values, found nan at flat index 0"},
  };
  for (const Case& c : refused) {
    INFO(c.what);
    const testing::CommandResult r = check(c.arrays);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "shardtrace: error: " + npz + c.error + "\n");
  }
  // A gradient name golden-format.md does not define is a failed check, as any unknown array.
  const testing::CommandResult unknown = check(with("grad_foo", wo));
  CHECK(unknown.status == 1);
  CHECK(
      unknown.out.find("grad_foo          UNKNOWN  unknown array name (not in golden-format.md)") !=
      std::string::npos);
}

}  // namespace shardtrace
