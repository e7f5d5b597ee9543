// The training step of every MoE model file of MaxText 0.2.5 (issue 25), through the command a
// user runs: `shardtrace trace --step base.yml model_name=M ... --format json` on every case of
// the release sweep (testdata/maxtext-moe-models/sweep/, the meshes of docs/release-models.md).
// Where MaxText builds the block the step must run and be consistent (each gradient shaped,
// typed and sized like its primal, gradient bytes = parameter bytes less the router's bias,
// which is no nnx.Param; remat re-runs no more than the forward sent); where MaxText fails, the
// step is refused with the one line docs/release-models.md lists for the forward. The same run
// writes docs/release-steps.md (make golden). Symbolic: no array is computed.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "emit/human_bytes.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::RunShardtrace;
using testing::SourcePath;

std::string BaseYml() { return SourcePath("testdata/maxtext-moe-models/configs/base.yml"); }

// The release's own command for a model file on a mesh: the sweep's overrides.
CommandResult Step(const std::vector<std::string>& overrides, int devices) {
  std::vector<std::string> args = {"trace", "--step", BaseYml()};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--devices", std::to_string(devices), "--format", "json", "--quiet"});
  return RunShardtrace(args);
}

// What a training step must satisfy whatever the model: the gradients and the totals agree
// with the forward trace they come from. `not_differentiated`: the bytes per device of the
// parameters a MaxText train step does not differentiate (the router's MoEBiasVar).
void CheckStep(const json& trace, int64_t not_differentiated) {
  const json& step = trace.at("step");
  const json& m = step.at("memory");
  CHECK(m.at("gradient_bytes").get<int64_t>() ==
        m.at("parameter_bytes").get<int64_t>() - not_differentiated);
  CHECK(m.at("input_gradient_bytes") == m.at("input_bytes"));
  for (const json& g : step.at("gradients")) {
    const json& primal = trace.at("tensors").at(g.at("tensor").get<size_t>());
    INFO("gradient of " << g.at("name"));
    CHECK(g.at("local_shape") == primal.at("local_shape"));
    CHECK(g.at("dtype") == primal.at("dtype"));
    CHECK(g.at("bytes_per_device") == primal.at("bytes_per_device"));
  }
  CHECK(m.at("peak_bytes").get<int64_t>() ==
        m.at("parameter_bytes").get<int64_t>() + m.at("gradient_bytes").get<int64_t>() +
            m.at("input_bytes").get<int64_t>() + m.at("input_gradient_bytes").get<int64_t>() +
            m.at("peak_temporary_bytes").get<int64_t>());
  const json& totals = step.at("totals");
  int64_t backward = 0;
  for (const json& c : trace.at("backward_collectives")) {
    CHECK(c.at("pass") == "backward");
    backward += c.at("bytes_per_device").get<int64_t>();
  }
  CHECK(totals.at("backward_bytes_sent_per_device").get<int64_t>() == backward);
  CHECK(totals.at("recompute_bytes_sent_per_device").get<int64_t>() <=
        totals.at("forward_bytes_sent_per_device").get<int64_t>());
  CHECK(totals.at("step_bytes_sent_per_device").get<int64_t>() ==
        totals.at("forward_bytes_sent_per_device").get<int64_t>() + backward);
}

}  // namespace

TEST_CASE(
    "trace --step runs on every MoE model file of the release, or refuses it with the reason "
    "docs/release-models.md lists",
    "[release][step]") {
  const std::string documented = testing::ReadFile(SourcePath("docs/release-models.md"));
  const std::vector<fs::path> files = testing::ReleaseSweepFiles();
  CHECK(files.size() == 35);
  int ran = 0, refused = 0;
  std::string table;
  for (const fs::path& file : files) {
    const json sweep = json::parse(testing::ReadFile(file));
    const std::string model = sweep.at("model");
    std::map<std::string, std::string> cells;
    for (const json& c : sweep.at("cases")) {
      const std::string mesh = c.at("mesh");
      INFO("model " << model << ", case " << mesh);
      const CommandResult r =
          Step(c.at("overrides").get<std::vector<std::string>>(), c.at("devices").get<int>());
      INFO("stderr: " << r.err);
      const bool forward_fails = c.contains("forward") && c.at("forward").contains("error");
      if (c.contains("error") || forward_fails) {
        // Refused as the forward is, with the line the release page documents.
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK(r.err.rfind("shardtrace: error: ", 0) == 0);
        CHECK(r.err.find('\n') == r.err.size() - 1);
        CHECK(documented.find("`" + r.err.substr(0, r.err.size() - 1) + "`") != std::string::npos);
        ++refused;
        cells[mesh] = "refused, as MaxText";
        continue;
      }
      REQUIRE(r.status == 0);
      const json trace = json::parse(r.out);
      // MaxText's leaf types (sweep_models.py): the routed bias of deepseek routing is a
      // MoEBiasVar, not an nnx.Param (gpt-oss's gate bias is a Param, and has a gradient).
      int64_t bias_var = 0;
      for (const json& leaf : c.at("leaves"))
        if (leaf.at("type") == "MoEBiasVar") bias_var += leaf.at("bytes_per_device").get<int64_t>();
      CheckStep(trace, bias_var);
      ++ran;
      const json& m = trace.at("step").at("memory");
      const json& totals = trace.at("step").at("totals");
      cells[mesh] = fmt::format("{}, {}", HumanBytes(m.at("peak_bytes").get<int64_t>()),
                                HumanBytes(totals.at("step_bytes_sent_per_device")));
    }
    std::string row = "| " + model + " |";
    for (const auto& mesh : testing::ReleaseSweepMeshes())
      row += " " + (cells.count(mesh.first) ? cells[mesh.first] : "-") + " |";
    table += row + "\n";
  }
  CHECK(ran == 167);
  CHECK(refused == 12);
  const auto [mesh_head, mesh_rule] = testing::ReleaseSweepMeshColumns();
  const std::string head = "| model file |" + mesh_head, rule = "|---|" + mesh_rule;
  const std::string page = fmt::format(
      "# The training step of the release's MoE models\n\n"
      "<!-- Generated by tests/release_step_test.cc from testdata/maxtext-moe-models/ (`make "
      "golden`); do not edit. -->\n\n"
      "`trace --step` on every case of [release-models.md](release-models.md), the command a "
      "user of the release runs:\n\n"
      "    shardtrace trace --step base.yml model_name=M max_target_length=4096 "
      "per_device_batch_size=1 <mesh keys> --format json\n\n"
      "Each cell is the step's peak per device and its communication per device (forward + "
      "backward, remat's re-run forward included), for one decoder layer's MoE block under "
      "base.yml's `remat_policy` (`full`); docs/step.md says what they count. Measured: {} "
      "cases run, {} refused (the cases MaxText cannot build or run, with the forward's own "
      "line, listed in release-models.md).\n\n"
      "The test requires of every case that runs: each gradient has its primal's local shape, "
      "dtype and bytes (the fp8 kernels of the `*-fp8` files: float8_e4m3fn); gradient bytes "
      "equal parameter bytes less deepseek routing's `gate.bias` (a MoEBiasVar moved by the "
      "loss-free bias update, not by a gradient; gpt-oss's gate bias is a parameter and has one); "
      "the input's gradient has the input's bytes; "
      "the peak is the sum of its parts; remat re-runs no more than the forward sent.\n\n"
      "{}\n{}\n{}",
      ran, refused, head, rule, table);
  testing::CompareWithGolden("../docs/release-steps.md", page);
}

// The fp8 storage of qwen3.5-35b-a3b-fp8 on the sweep's fsdp=8 (docs/step.md, "fp8 weight
// storage"): the dequantized kernels' cotangents are reduced in bfloat16 (the forward gathers
// the dequantized kernels in bfloat16), and the kernels' gradients are float8_e4m3fn.
TEST_CASE(
    "trace --step of qwen3.5-35b-a3b-fp8 on fsdp=8: float8_e4m3fn kernel gradients, bfloat16 "
    "reduce-scatters, the step's peak and communication",
    "[release][step]") {
  const CommandResult r = Step({"model_name=qwen3.5-35b-a3b-fp8", "max_target_length=4096",
                                "per_device_batch_size=1", "ici_fsdp_parallelism=8"},
                               8);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json trace = json::parse(r.out);
  CheckStep(trace, 0);
  std::map<std::string, std::string> dtype;
  for (const json& g : trace.at("step").at("gradients"))
    dtype[g.at("name").get<std::string>()] = g.at("dtype").get<std::string>();
  CHECK(dtype["wi_0"] == "float8_e4m3fn");
  CHECK(dtype["wo"] == "float8_e4m3fn");
  CHECK(dtype["wi_0_scale"] == "float32");
  CHECK(dtype["wi_0.kernel_scale"] == "float32");
  CHECK(dtype["gate.kernel"] == "bfloat16");  // unquantized_modules keeps the router in dtype
  // The routed kernels' shard_map psum over fsdp, sliced back: [256,2048,512] bfloat16 per
  // device whole (512 MiB), 7/8 of it sent.
  int scatters = 0;
  for (const json& c : trace.at("backward_collectives")) {
    if (c.at("kind") != "psum_scatter") continue;
    ++scatters;
    CHECK(c.at("dtype") == "bfloat16");
    CHECK(c.at("bytes_per_device") == 469762048);
  }
  CHECK(scatters == 3);
  const json& m = trace.at("step").at("memory");
  CHECK(m.at("parameter_bytes") == 101212768);
  CHECK(m.at("gradient_bytes") == 101212768);
  CHECK(m.at("peak_bytes") == 3057195200);
  const json& totals = trace.at("step").at("totals");
  CHECK(totals.at("forward_bytes_sent_per_device") == 1416629760);
  CHECK(totals.at("backward_bytes_sent_per_device") == 2833259520);
}

// deepseek3-671b-2dfsdp (fsdp on two logical axes) on fsdp=8 x fsdp_transpose=4: the backward
// reduce-scatters, over the same axes, every byte the forward all-gathered (the routed kernels'
// shard_map psum over both axes sliced back, the shared experts' weight gradients), and
// all-reduces only the router kernel's gradient over fsdp_transpose, on which the kernel is
// replicated while the batch is sharded.
TEST_CASE(
    "trace --step of deepseek3-671b-2dfsdp on fsdp x fsdp_transpose: the backward "
    "reduce-scatters what the forward gathered",
    "[release][step]") {
  const CommandResult r =
      Step({"model_name=deepseek3-671b-2dfsdp", "max_target_length=4096", "per_device_batch_size=1",
            "ici_fsdp_parallelism=8", "ici_fsdp_transpose_parallelism=4"},
           32);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json trace = json::parse(r.out);
  CheckStep(trace, 1024);  // gate.bias, float32[256] replicated: a MoEBiasVar
  int64_t gathered = 0, scattered = 0, reduced = 0;
  for (const json& c : trace.at("totals").at("collectives")) {
    CHECK(c.at("kind") == "all-gather");
    gathered += c.at("bytes_sent_per_device").get<int64_t>();
  }
  for (const json& c : trace.at("backward_collectives")) {
    if (c.at("recompute")) continue;
    const std::string kind = c.at("kind");
    const std::string name = trace.at("tensors").at(c.at("tensor").get<size_t>()).at("name");
    INFO(kind << " of " << name);
    if (kind == "reduce-scatter" || kind == "psum_scatter") {
      scattered += c.at("bytes_per_device").get<int64_t>();
    } else {
      CHECK(kind == "all-reduce");
      CHECK(name == "gate.kernel");
      CHECK(c.at("axes") == json::array({"fsdp_transpose"}));
      reduced += c.at("bytes_per_device").get<int64_t>();
    }
  }
  CHECK(gathered == 21932474368);
  CHECK(scattered == gathered);
  CHECK(reduced == 688128);  // bfloat16 [896,256], 2 x 3/4 of it
  CHECK(trace.at("step").at("totals").at("recompute_bytes_sent_per_device") == gathered);
}

}  // namespace shardtrace
