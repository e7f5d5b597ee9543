// MaxText's own training-step gradients (testdata/maxtext/cases/step_*: jax.value_and_grad of
// MaxText 0.2.5's block, exported by tools/maxtext_oracle/export_step.py) against shardtrace's
// reverse pass through the simulated devices, through the command a user runs: `check` must
// pass every step case (the loss and every grad_* array within the forward's tolerances; the
// bfloat16 case at the tolerance its forward case documents) and say how many gradient arrays
// it compared, which must be every grad_* array of the case.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
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

}  // namespace

TEST_CASE("check passes MaxText's training-step gradients on every step case", "[maxtext][step]") {
  const std::vector<fs::path> cases = StepCases();
  REQUIRE(cases.size() >= 12);
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    INFO("case " << name);
    std::vector<std::string> args = {"check", "--quiet", dir.string()};
    // bfloat16 activations: the tolerance the forward bf16 cases document (testdata/maxtext
    // README, Known disagreements: rounding points differ from XLA's).
    if (name.find("_bf16") != std::string::npos)
      args.insert(args.end(), {"--atol", "2e-3", "--rtol", "2e-2"});
    const testing::CommandResult r = testing::RunShardtrace(args);
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("PASS  ") == 0);
    const int grads = GradientArrays(dir);
    CHECK(grads >= 4);
    CHECK(r.out.find(fmt::format("training step: loss and {} gradient arrays compared", grads)) !=
          std::string::npos);
    CHECK(r.out.find("loss ") != std::string::npos);
  }
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
  // The case's config names its base relative to itself: point it at the original's.
  std::string config = testing::ReadFile(source / "config.yml");
  const std::string relative = "\"../../configs/base.yml\"";
  REQUIRE(config.find(relative) != std::string::npos);
  config.replace(config.find(relative), relative.size(),
                 "\"" + testing::SourcePath("testdata/maxtext/configs/base.yml") + "\"");
  dir.Write("config.yml", config);
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

}  // namespace shardtrace
