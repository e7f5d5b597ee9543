// Every MoE model file of MaxText 0.2.5 against MaxText itself (issue 27): for each case of
// testdata/maxtext-moe-models/sweep/ (MaxText's own MoE block, built by pyconfig and the model's
// decoder layer on 8 and 16 fake CPU devices, by tools/maxtext_oracle/sweep_models.py), the command
// a user runs, `shardtrace trace base.yml model_name=M ... --format json`, must give the same
// parameter leaves (dtype, global and local shape, PartitionSpec) and exactly the per-device
// parameter bytes where MaxText builds the block, and a one-line exit 2 where MaxText fails.
// The only exceptions are the cases sweep_differences.json lists, and each must still differ
// exactly as listed. The same run writes docs/release-models.md (make golden), so the page a
// user reads says what the test measured.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "test_support.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::SourcePath;

// A PartitionSpec entry (null, an axis, or a list of axes) without the mesh axes of size 1,
// which shard nothing: MaxText's specs name every axis of its 12-axis mesh.
json Entry(const json& entry, const json& mesh_shape) {
  std::vector<std::string> axes;
  if (entry.is_string()) axes.push_back(entry.get<std::string>());
  if (entry.is_array())
    for (const json& a : entry) axes.push_back(a.get<std::string>());
  std::vector<std::string> kept;
  for (const std::string& a : axes)
    if (mesh_shape.contains(a) && mesh_shape.at(a).get<int>() > 1) kept.push_back(a);
  if (kept.empty()) return nullptr;
  if (kept.size() == 1) return kept[0];
  return kept;
}

std::string Spec(const json& spec, const json& mesh_shape) {
  json out = json::array();
  for (const json& e : spec) out.push_back(Entry(e, mesh_shape));
  return out.dump();
}

// MaxText's path of a parameter in its MoE block, from shardtrace's scope and name: the routed
// block's leaves sit under the block's attribute for it (RoutedAndSharedMoE's MoeBlock_0,
// Qwen3NextSparseMoeBlock's routed_experts), the shared MlpBlock's under its DenseGeneral
// kernels. An unknown leaf keeps a '?' and fails the comparison by name.
std::string MaxTextPath(const std::string& block, const std::string& scope,
                        const std::string& name) {
  const size_t slash = scope.find('/');
  const std::string rest = slash == std::string::npos ? "" : scope.substr(slash + 1);
  std::string dotted = name;
  std::replace(dotted.begin(), dotted.end(), '.', '/');
  if (rest.empty() || rest == "RoutedMoE") {
    static const std::map<std::string, std::string> kRouted = {
        {"RoutedMoE", ""},
        {"RoutedAndSharedMoE", "MoeBlock_0/"},
        {"Qwen3NextSparseMoeBlock", "routed_experts/"},
        {"Qwen3_5SparseMoEBlock", "routed_experts/"}};
    const auto it = kRouted.find(block);
    return it == kRouted.end() ? "?" + block + " " + dotted : it->second + dotted;
  }
  static const std::map<std::string, std::string> kShared = {
      {"shared_experts/wi_0 wi_0", "shared_experts/wi_0/kernel"},
      {"shared_experts/wi_1 wi_1", "shared_experts/wi_1/kernel"},
      {"shared_experts wo", "shared_experts/wo/kernel"},
      {"shared_expert/wi_0 wi_0", "shared_expert/wi_0/kernel"},
      {"shared_expert/wi_1 wi_1", "shared_expert/wi_1/kernel"},
      {"shared_expert wo", "shared_expert/wo/kernel"},
      {"shared_expert_gate shared_expert_gate.kernel", "shared_expert_gate/kernel"},
      // fp8 storage: DenseGeneral's kernel_scale beside each kernel.
      {"shared_experts/wi_0 wi_0.kernel_scale", "shared_experts/wi_0/kernel_scale"},
      {"shared_experts/wi_1 wi_1.kernel_scale", "shared_experts/wi_1/kernel_scale"},
      {"shared_experts wo.kernel_scale", "shared_experts/wo/kernel_scale"},
      {"shared_expert/wi_0 wi_0.kernel_scale", "shared_expert/wi_0/kernel_scale"},
      {"shared_expert/wi_1 wi_1.kernel_scale", "shared_expert/wi_1/kernel_scale"},
      {"shared_expert wo.kernel_scale", "shared_expert/wo/kernel_scale"}};
  const auto it = kShared.find(rest + " " + name);
  return it == kShared.end() ? "?" + rest + " " + name : it->second;
}

// "path dtype shape spec local-shape bytes" of every leaf, sorted.
std::vector<std::string> MaxTextLeaves(const json& c) {
  std::vector<std::string> out;
  for (const json& l : c.at("leaves"))
    out.push_back(fmt::format("{} {} {} {} {} {}", l.at("path").get<std::string>(),
                              l.at("dtype").get<std::string>(), l.at("shape").dump(),
                              Spec(l.at("partition_spec"), c.at("mesh_shape")),
                              l.at("local_shape").dump(), l.at("bytes_per_device").dump()));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ShardtraceLeaves(const json& trace, const json& c) {
  std::vector<std::string> out;
  for (const json& t : trace.at("tensors")) {
    if (t.at("kind") != "weight" || t.at("constraint") != "kernel_axes") continue;
    out.push_back(
        fmt::format("{} {} {} {} {} {}",
                    MaxTextPath(c.at("block").get<std::string>(), t.at("scope").get<std::string>(),
                                t.at("name").get<std::string>()),
                    t.at("dtype").get<std::string>(), t.at("shape").dump(),
                    Spec(t.at("partition_spec"), c.at("mesh_shape")), t.at("local_shape").dump(),
                    t.at("bytes_per_device").dump()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Difference {
  std::string model, maxtext, shardtrace, reason;
  std::vector<std::string> cases;
  int label = 0;  // D<label> on the page
};

std::vector<Difference> Differences() {
  const json j =
      json::parse(ReadFile(SourcePath("testdata/maxtext-moe-models/sweep_differences.json")));
  std::vector<Difference> out;
  for (const json& d : j.at("differences"))
    out.push_back({d.at("model"), d.at("maxtext"), d.at("shardtrace"), d.at("reason"),
                   d.at("cases").get<std::vector<std::string>>(),
                   static_cast<int>(out.size()) + 1});
  return out;
}

const Difference* Listed(const std::vector<Difference>& diffs, const std::string& model,
                         const std::string& mesh) {
  for (const Difference& d : diffs)
    if (d.model == model && std::count(d.cases.begin(), d.cases.end(), mesh) == 1) return &d;
  return nullptr;
}

std::string Bytes(int64_t n) {
  std::string s = std::to_string(n);
  for (int k = static_cast<int>(s.size()) - 3; k > 0; k -= 3) s.insert(k, ",");
  return s + " B";
}

std::string Escape(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\";
    out += ch;
  }
  return out;
}

// What one case looked like, for the page.
struct CaseRow {
  std::string mesh, cell;
};

TEST_CASE(
    "Every MoE model file of the release traces the MaxText block exactly or is refused where "
    "MaxText fails or differs as listed",
    "[maxtext][release]") {
  const std::vector<Difference> diffs = Differences();
  std::set<std::string> seen_listed;
  const std::vector<fs::path> files = testing::ReleaseSweepFiles();
  CHECK(files.size() == 35);

  std::string table, refusals, outside, warnings;
  int exact = 0, both_refuse = 0, listed_cases = 0;
  for (const fs::path& file : files) {
    const json sweep = json::parse(ReadFile(file));
    const std::string model = sweep.at("model");
    std::map<std::string, std::string> cells;
    std::string block = "-", summary;
    std::set<int> labels;
    int traced = 0, refused = 0;
    for (const json& c : sweep.at("cases")) {
      const std::string mesh = c.at("mesh");
      INFO("model " << model << ", case " << mesh);
      if (c.contains("block")) block = c.at("block");
      std::vector<std::string> args = {"trace",
                                       SourcePath("testdata/maxtext-moe-models/configs/base.yml")};
      for (const json& o : c.at("overrides")) args.push_back(o);
      args.insert(args.end(), {"--devices", std::to_string(c.at("devices").get<int>()), "--format",
                               "json", "--quiet"});
      const CommandResult r = RunShardtrace(args);
      INFO("stderr: " << r.err);
      // A case whose state builds but whose forward MaxText cannot lower (forward_check.py's
      // record) is a case MaxText cannot run: shardtrace must refuse it too.
      const bool forward_fails = c.contains("forward") && c.at("forward").contains("error");
      const bool maxtext_builds = !c.contains("error") && !forward_fails;
      const std::string maxtext_error =
          maxtext_builds  ? ""
          : forward_fails ? "forward (" + c.at("forward").at("called").get<std::string>() +
                                ") does not lower: " +
                                c.at("forward").at("error").at("message").get<std::string>()
                          : c.at("error").at("message").get<std::string>();
      if (c.contains("layer_error") && outside.find("| " + model + " |") == std::string::npos)
        outside += fmt::format("| {} | `{}` |\n", model,
                               Escape(c.at("layer_error").get<std::string>().substr(0, 300)));
      if (r.status == 2) {
        // A refusal is one line naming the reason, and nothing on stdout.
        CHECK(r.out.empty());
        CHECK(r.err.rfind("shardtrace: error: ", 0) == 0);
        CHECK(r.err.find('\n') == r.err.size() - 1);
      }
      if (const Difference* d = Listed(diffs, model, mesh)) {
        seen_listed.insert(model + "/" + mesh);
        ++listed_cases;
        labels.insert(d->label);
        // Still differs exactly as listed: fixing it means taking it off the list.
        CHECK(maxtext_builds == (d->maxtext == "builds"));
        CHECK(r.status == (d->shardtrace == "traces" ? 0 : 2));
        cells[mesh] =
            fmt::format("MaxText {}, shardtrace {} (D{})", d->maxtext, d->shardtrace, d->label);
        continue;
      }
      if (!maxtext_builds) {
        CHECK(r.status == 2);
        ++both_refuse;
        ++refused;
        cells[mesh] = forward_fails ? "both refuse the forward" : "both refuse";
        refusals += fmt::format("| {} | {} | {} | `{}` |\n", model, mesh, Escape(maxtext_error),
                                Escape(r.err.substr(0, r.err.find('\n'))));
        continue;
      }
      REQUIRE(r.status == 0);
      const json trace = json::parse(r.out);
      CHECK(ShardtraceLeaves(trace, c) == MaxTextLeaves(c));
      const int64_t bytes = c.at("parameter_bytes");
      CHECK(trace.at("memory").at("parameter_bytes").get<int64_t>() == bytes);
      CHECK(c.at("argument_size_in_bytes").get<int64_t>() == bytes);  // XLA's own count
      ++exact;
      ++traced;
      cells[mesh] = "exact, " + Bytes(bytes);
      // Where MaxText on this mesh computes something else than on one device, the trace says
      // so (Trace::warnings); the page shows it beside the bytes.
      if (trace.contains("warnings")) {
        cells[mesh] += ", warns";
        for (const json& w : trace.at("warnings"))
          warnings += fmt::format("| {} | {} | {} |\n", model, mesh, Escape(w.get<std::string>()));
      }
    }
    if (labels.empty() && traced == 0)
      summary = fmt::format("refuses all {} cases, as MaxText does", refused);
    else if (labels.empty())
      summary = refused == 0 ? "traces exactly"
                             : fmt::format("traces exactly; refuses {} case{} MaxText refuses",
                                           refused, refused == 1 ? "" : "s");
    else {
      std::vector<std::string> ls;
      for (int l : labels) ls.push_back(fmt::format("D{}", l));
      summary = fmt::format(
          "known difference ({}){}", fmt::join(ls, ", "),
          traced ? fmt::format("; {} case{} exact", traced, traced == 1 ? "" : "s") : "");
      if (refused) summary += fmt::format("; refuses {} as MaxText does", refused);
    }
    std::string mesh_cells;
    for (const auto& m : testing::ReleaseSweepMeshes())
      mesh_cells += " " + (cells.count(m.first) ? cells[m.first] : "-") + " |";
    table += fmt::format("| {} | {} |{} {} |\n", model, block, mesh_cells, summary);
  }
  for (const Difference& d : diffs)
    for (const std::string& m : d.cases) {
      INFO("listed difference " << d.model << " " << m);
      CHECK(seen_listed.count(d.model + "/" + m) == 1);
    }

  std::string known;
  for (const Difference& d : diffs)
    known += fmt::format("| D{} | {} | {} | MaxText {}, shardtrace {} | {} |\n", d.label, d.model,
                         fmt::join(d.cases, ", "), d.maxtext, d.shardtrace, Escape(d.reason));
  const auto [mesh_head, mesh_rule] = testing::ReleaseSweepMeshColumns();
  const std::string page = fmt::format(
      "# The release's MoE models\n\n"
      "<!-- Generated by tests/release_sweep_test.cc from testdata/maxtext-moe-models/ "
      "(`make golden`); do not edit. -->\n\n"
      "Every model file of MaxText 0.2.5 with `num_experts > 1` (35 of its 82), as a user of the "
      "release runs it:\n\n"
      "    shardtrace trace base.yml model_name=M max_target_length=4096 per_device_batch_size=1 "
      "<mesh keys> --format json\n\n"
      "checked against MaxText's own MoE block, which pyconfig and the model's decoder layer "
      "build on 8 and 16 fake CPU devices (`tools/maxtext_oracle/sweep_models.py`, results in "
      "`testdata/maxtext-moe-models/sweep/`). **exact** means the same parameter leaves with the "
      "same dtypes, global and local shapes and PartitionSpecs, and the same per-device "
      "parameter bytes (the number shown, which is also XLA's `argument_size_in_bytes` for "
      "those leaves). The test fails if shardtrace stops agreeing, or if this page is out of "
      "date.\n\n"
      "The training step (`trace --step`) of every case, and what is checked of it: "
      "[release-steps.md](release-steps.md).\n\n"
      "Measured: {} cases exact, {} refused by both, {} known differences (in {} {}).\n\n"
      "Files that MaxText's config validation refuses as given (deepseek4-*, deepseek3.2-671b, "
      "deepseek-custom) are run on their meshes with `attention=dot_product`. "
      "deepseek-custom also gets `tokenizer_path` and `hf_access_token`. Each of these files "
      "also has an `fsdp8_as_given` case for the refusal itself.\n\n"
      "| model file | MaxText block |{} shardtrace |\n|---|---|{}---|\n{}\n"
      "## Known differences\n\n"
      "Listed in `testdata/maxtext-moe-models/sweep_differences.json`. The test requires each "
      "one to still differ exactly as listed.\n\n"
      "{}\n"
      "## Warnings\n\n"
      "Cases marked **warns** trace exactly, but on that mesh MaxText computes a different block "
      "than on one device; `trace` prints the warning (text `warning:`, JSON `warnings`, the "
      "page's summary). The oracle case `testdata/maxtext/cases/shared_2dfsdp_fsdp2_ep2` "
      "(and `_ep4`) measures it on fake CPU devices (`replicated_experts.json` there).\n\n"
      "| model file | case | warning |\n|---|---|---|\n{}\n"
      "## Refused by both\n\n"
      "MaxText's column is its error building the block, or for the cases "
      "`tools/maxtext_oracle/forward_check.py` ran (deepseek3-671b-2dfsdp and -batchsplit on "
      "every mesh) the error of its own forward, which it lowers on abstract inputs with the "
      "state's shardings: a state that builds under a forward that does not lower is a case "
      "MaxText cannot run.\n\n"
      "| model file | case | MaxText | shardtrace |\n|---|---|---|---|\n{}\n"
      "## Outside the MoE block\n\n"
      "For these files, the sweep found a variable of MaxText's decoder layer, outside the MoE "
      "block, whose sharding JAX refuses on some mesh: the NamedSharding MaxText's own "
      "`get_nnx_var_named_sharding_with_scan_axis` gives it does not divide it, or names an "
      "axis twice. The first such variable is shown. Whether a full MaxText run fails there was "
      "not checked. shardtrace models the MoE block only and does not report these.\n\n"
      "| model file | variable: error |\n|---|---|\n{}",
      exact, both_refuse, listed_cases, diffs.size(), diffs.size() == 1 ? "entry" : "entries",
      mesh_head, mesh_rule, table,
      diffs.empty()
          ? "None: every case agrees.\n"
          : "| | model file | cases | what each does | reason |\n|---|---|---|---|---|\n" + known,
      warnings, refusals, outside);
  testing::CompareWithGolden("../docs/release-models.md", page);
}

}  // namespace
}  // namespace shardtrace
