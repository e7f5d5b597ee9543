// The MaxText oracle fixtures (testdata/maxtext/, exported by tools/maxtext_oracle/ from
// MaxText's own moe.py on JAX CPU devices) reproduced by shardtrace, with no Python: every
// numeric case through `check`, every case's MaxText sharding dump through the dump
// comparison, and the collectives of the compiled HLO against the trace's. Disagreements are
// allowed only where testdata/maxtext/README.md lists them, and a listed one must still differ
// exactly as listed. SHARDTRACE_MAXTEXT_DIR points the tests at a freshly exported directory
// (make maxtext-verify).
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "check/dump_comparison.h"
#include "check/golden_check.h"
#include "check/sharding_dump.h"
#include "io/npz.h"
#include "numeric/dtype.h"
#include "paths/moe_block.h"
#include "paths/moe_params.h"
#include "paths/moe_setup.h"
#include "run/run.h"
#include "spmd/xla_spmd.h"
#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;
using testing::Known;
using testing::KnownDisagreements;
using testing::ReadFile;
using testing::SourcePath;

fs::path OracleDir() {
  const char* env = std::getenv("SHARDTRACE_MAXTEXT_DIR");
  return env && *env ? fs::path(env) : fs::path(SourcePath("testdata/maxtext"));
}

// The forward cases. A training-step case (step_*, with step.json instead of compiled.json and
// gradients in its tensors.npz) is held by maxtext_step_fixture_test.cc.
std::vector<fs::path> CaseDirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(OracleDir() / "cases"))
    if (e.is_directory() && !fs::exists(e.path() / "step.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Runs one case's checks; an exception (a config shardtrace rejects, a malformed fixture) fails
// that case by name and lets the others run.
template <typename Fn>
void ForCase(const fs::path& dir, const Fn& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    FAIL_CHECK("case " << dir.filename().string() << ": " << e.what());
  }
}

// `shardtrace check CASE --format json` (in process, as a user runs it, with nothing else:
// the case names its base), parsed: array name -> status ("pass", "FAIL", ...).
std::map<std::string, std::string> CheckCase(const fs::path& dir,
                                             std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"check", dir.string(), "--format", "json", "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  const testing::CommandResult r = testing::RunShardtrace(args);
  INFO(r.err);
  REQUIRE((r.status == 0 || r.status == 1));
  std::map<std::string, std::string> statuses;
  const nlohmann::json report = nlohmann::json::parse(r.out);  // alive for the loop below
  for (const auto& a : report.at(0).at("arrays"))
    statuses[a.at("array").get<std::string>()] = a.at("status").get<std::string>();
  return statuses;
}

TEST_CASE("Every MaxText oracle case is reproduced by check, or differs exactly as listed",
          "[maxtext]") {
  const std::vector<Known> known = KnownDisagreements();
  int numeric = 0;
  std::set<std::string> seen_known;
  for (const fs::path& dir : CaseDirs()) {
    if (!fs::exists(dir / "tensors.npz")) continue;
    ++numeric;
    ForCase(dir, [&] {
      const std::string name = dir.filename().string();
      INFO("case " << name);
      const std::map<std::string, std::string> report = CheckCase(dir);
      CHECK(report.count("output") == 1);
      for (const auto& [array, status] : report) {
        if (status == "pass" || status == "skipped") continue;
        INFO("array " << array << ": " << status);
        const auto k = std::find_if(known.begin(), known.end(), [&, &a = array](const Known& k) {
          return k.case_name == name && k.array == a;
        });
        CHECK(k != known.end());  // an unlisted disagreement
      }
      for (const Known& k : known) {
        if (k.case_name != name) continue;
        seen_known.insert(k.case_name + "/" + k.array);
        INFO("listed disagreement " << k.array);
        REQUIRE(report.count(k.array) == 1);
        CHECK(report.at(k.array) == "FAIL");  // still differs at the default tolerance
        if (k.agrees_at) {
          const std::map<std::string, std::string> again =
              CheckCase(dir, {"--atol", fmt::format("{}", k.agrees_at->first), "--rtol",
                              fmt::format("{}", k.agrees_at->second)});
          REQUIRE(again.count(k.array) == 1);
          CHECK(again.at(k.array) == "pass");  // ... and only by as much as listed
        }
      }
    });
  }
  CHECK(numeric >= 44);
  for (const Known& k : known) {
    INFO("listed case " << k.case_name << " array " << k.array);
    // A training-step case's rows are held by maxtext_step_check_test.cc.
    if (fs::exists(OracleDir() / "cases" / k.case_name / "tensors.npz") &&
        !fs::exists(OracleDir() / "cases" / k.case_name / "step.json"))
      CHECK(seen_known.count(k.case_name + "/" + k.array) == 1);
  }
}

TEST_CASE("The sparse path with expert parallelism > 1 is checked against MaxText's numbers",
          "[maxtext]") {
  // XLA:CPU cannot compile ragged-all-to-all: these cases' numbers come from MaxText run with
  // tools/maxtext_oracle/ragged_a2a.py in its place, their collectives from the real
  // program's optimized HLO (PROVENANCE.md). check must take the EP path shardtrace names and
  // pass, and the HLO must hold the real ragged all-to-alls (the ring sends none).
  const std::vector<std::tuple<std::string, std::string, int>> cases = {
      {"sparse_ep2", "sparse_matmul/ragged_all_to_all (EP=2,", 2},
      {"sparse_ep4", "sparse_matmul/ragged_all_to_all (EP=4,", 2},
      {"sparse_ep2_decode", "sparse_matmul/ragged_all_to_all, batch replicated (EP=2,", 1},
      {"sparse_ep4_decode", "sparse_matmul/ragged_all_to_all, batch replicated (EP=4,", 1},
      {"sparse_ep2_fsdp2", "sparse_matmul/ragged_all_to_all (EP=2,", 2},
      {"sparse_ep2_tp2", "sparse_matmul/ragged_all_to_all (EP=2, TP=2,", 2},
      {"sparse_ep2_tp4", "sparse_matmul/ragged_all_to_all (EP=2, TP=4,", 2},
      // ragged_buffer_factor=1: the buffer drops rows, and the release truncates the group
      // sizes to what arrived (shardtrace summed them whole, as the seed does, until these).
      {"sparse_ep2_rbf1", "sparse_matmul/ragged_all_to_all (EP=2,", 2},
      {"sparse_ep4_rbf1", "sparse_matmul/ragged_all_to_all (EP=4,", 2},
      // The release psums the bias update's expert counts over the batch axes (expert here).
      {"shared_deepseek3_ep2", "sparse_matmul/ragged_all_to_all (EP=2,", 2},
      {"sparse_ep2_ring", "sparse_matmul/ring_of_experts (EP=2,", 0},
      // The ring gathers a replicated batch (decode) as 2 copies; check compares the first
      // (it stopped with "top_k_weights has shape [1,8,2] but the config implies [2,8,2]").
      {"sparse_ep2_ring_decode", "sparse_matmul/ring_of_experts (EP=2,", 0},
  };
  for (const auto& [name, path, ragged] : cases) {
    INFO("case " << name);
    const fs::path dir = OracleDir() / "cases" / name;
    REQUIRE(fs::exists(dir / "tensors.npz"));
    const testing::CommandResult r =
        testing::RunShardtrace({"check", dir.string(), "--format", "json", "--quiet"});
    INFO(r.err);
    CHECK(r.status == 0);
    const nlohmann::json report = nlohmann::json::parse(r.out);
    CHECK(report.at(0).at("path").get<std::string>().rfind(path, 0) == 0);
    CHECK(report.at(0).at("passed").get<bool>());
    const nlohmann::json compiled = nlohmann::json::parse(ReadFile(dir / "compiled.json"));
    int hlo_ragged = 0;
    for (const nlohmann::json& c : compiled.at("collectives"))
      hlo_ragged += c.at("op") == "ragged_all_to_all";
    CHECK(hlo_ragged == ragged);
  }
}

TEST_CASE("Every MaxText oracle sharding dump agrees with shardtrace's trace of the case",
          "[maxtext]") {
  // `shardtrace compare-dump CASE/sharding` alone, as a user runs it: the case's config.yml
  // names the run; what a lone block's dump lacks is decided (and said) by compare-dump.
  int compared = 0;
  for (const fs::path& dir : CaseDirs()) {
    INFO("case " << dir.filename().string());
    ForCase(dir, [&] {
      const testing::CommandResult r =
          testing::RunShardtrace({"compare-dump", (dir / "sharding").string(), "--format", "json"});
      INFO(r.err);
      REQUIRE((r.status == 0 || r.status == 1));
      const nlohmann::json json = nlohmann::json::parse(r.out);
      for (const auto& t : json.at("tensors"))
        if (t.at("status") != "agree") FAIL_CHECK(t.dump());
      CHECK(r.status == 0);
      CHECK(json.at("counts").at("agree").get<int>() > 0);
      ++compared;
    });
  }
  CHECK(compared >= 25);
}

TEST_CASE("A case's config.yml traces the dims MaxText ran", "[maxtext]") {
  // `trace CASE/config.yml`: the case's keys are command-line overrides over its base and
  // model file (as MaxText ran them), so every parameter and the input have the shapes of the
  // arrays MaxText exported.
  int traced = 0;
  for (const fs::path& dir : CaseDirs()) {
    if (!fs::exists(dir / "tensors.npz")) continue;
    INFO("case " << dir.filename().string());
    ForCase(dir, [&] {
      const std::map<std::string, Array> arrays = ReadNpz((dir / "tensors.npz").string());
      // The exported block: "mlp" for a dense MlpBlock case, else RoutedMoE's (shared too).
      const std::string block =
          nlohmann::json::parse(ReadFile(dir / "compiled.json"))["block"] == "mlp" ? "mlp" : "moe";
      const testing::CommandResult r = testing::RunShardtrace(
          {"trace", (dir / "config.yml").string(), "--block", block, "--format", "json"});
      INFO(r.err);
      REQUIRE(r.status == 0);
      std::map<std::string, Shape> traced_shapes;
      const nlohmann::json trace = nlohmann::json::parse(r.out);
      for (const auto& t : trace.at("tensors"))
        traced_shapes.try_emplace(t.at("name").get<std::string>(), t.at("shape").get<Shape>());
      int same = 0;
      // (array in tensors.npz, tensor in the trace): a dense case's kernels are mlp_*.
      const std::string prefix = block == "mlp" ? "mlp_" : "";
      for (const std::string name : {"wi_0", "wi_1", "wo"}) {
        INFO(prefix + name);
        REQUIRE(arrays.count(prefix + name) == 1);
        REQUIRE(traced_shapes.count(name) == 1);
        CHECK(traced_shapes.at(name) == arrays.at(prefix + name).shape);
        ++same;
      }
      CHECK(traced_shapes.at("inputs") == arrays.at("inputs").shape);
      CHECK(same == 3);
      ++traced;
    });
  }
  CHECK(traced >= 25);
}

// The HLO op a collective shardtrace writes (a shard_map body's jax.lax call) compiles to.
std::string HloOp(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kPsum:
      return "all_reduce";
    case CollectiveKind::kPsumScatter:
      return "reduce_scatter";
    case CollectiveKind::kRaggedAllToAll:
      return "ragged_all_to_all";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kCollectivePermute:
      return "collective_permute";
    case CollectiveKind::kSlice:  // XLA-implied only: a local slice, no HLO collective
      return "";
  }
  return "";
}

TEST_CASE("The collectives shardtrace writes are those of MaxText's compiled HLO", "[maxtext]") {
  // A shard_map body's collectives are explicit in the HLO (not spmd-generated): they and the
  // trace's written collectives must pair up one to one by op, mesh axes and per-device
  // result bytes. GSPMD's own collectives (is_spmd_generated) are XLA's choice, not moe.py's.
  int compared = 0, paired = 0;
  for (const fs::path& dir : CaseDirs()) {
    const nlohmann::json compiled = nlohmann::json::parse(ReadFile(dir / "compiled.json"));
    if (!compiled.contains("collectives")) continue;  // XLA:CPU could not compile it
    INFO("case " << dir.filename().string());
    ForCase(dir, [&] {
      // The case's config.yml names its base and holds the run's overrides.
      const std::vector<std::string> args = {(dir / "config.yml").string()};
      const Block block = compiled["block"] == "mlp" ? Block::kMlp : Block::kMoe;
      const RunResult run = Run(SymbolicRequest(args, std::nullopt, block));
      const Trace& trace = run.trace;
      std::vector<nlohmann::json> explicit_hlo;
      for (const nlohmann::json& c : compiled["collectives"])
        if (!c["spmd_generated"].get<bool>()) explicit_hlo.push_back(c);
      std::vector<bool> used(explicit_hlo.size(), false);
      for (const OpRecord& op : trace.ops) {
        if (!op.collective || op.collective->origin != CollectiveOrigin::kWritten) continue;
        const TensorRecord& out = trace.tensors[op.outputs.at(0)];
        std::set<std::string> axes(op.collective->axes.begin(), op.collective->axes.end());
        // As XLA:CPU compiles it: 16-bit floats widened to float32 (a CPU artifact, twice
        // the bytes; TPU moves them as they are).
        const int64_t hlo_bytes = run.spmd.tensor(out.id).bytes_per_device *
                                  ByteSize(XlaCpuCollectiveDType(out.dtype)) / ByteSize(out.dtype);
        INFO(ToString(op.collective->kind) << " over " << *axes.begin() << " -> " << out.name << " "
                                           << hlo_bytes << " B/device in XLA:CPU's HLO");
        bool found = false;
        for (size_t i = 0; i < explicit_hlo.size() && !found; ++i) {
          const nlohmann::json& h = explicit_hlo[i];
          const auto hlo_axes = h["mesh_axes"].get<std::vector<std::string>>();
          if (used[i] || h["op"] != HloOp(op.collective->kind) ||
              std::set<std::string>(hlo_axes.begin(), hlo_axes.end()) != axes ||
              h["result_bytes"].get<int64_t>() != hlo_bytes)
            continue;
          used[i] = found = true;
        }
        CHECK(found);
        paired += found;
      }
      for (size_t i = 0; i < explicit_hlo.size(); ++i) {
        INFO("HLO " << explicit_hlo[i].dump());
        CHECK(used[i]);
      }
      ++compared;
    });
  }
  CHECK(compared >= 25);
  CHECK(paired >= 1);
}

}  // namespace
}  // namespace shardtrace
