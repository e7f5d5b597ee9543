// The summary every page opens with (pages/page_summary.h): its budget table and collectives
// are `trace`'s totals for the same config, each knob row is the trace of its variant, and
// the summary fits the first screen. Checked on every committed page and on `render` of
// DeepSeek-V3 (EP32 x FSDP8, 256 devices).
#include "pages/page_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "emit/human_bytes.h"
#include "pages/visualization_pages.h"
#include "run/run.h"
#include "test_support.h"

namespace shardtrace {
namespace {

using Json = nlohmann::json;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::SourcePath;

const std::vector<std::string> kDeepSeek = {"testdata/maxtext-configs/base.yml",
                                            "model_name=deepseek3-671b",
                                            "ici_expert_parallelism=32",
                                            "ici_fsdp_parallelism=8",
                                            "--devices",
                                            "256"};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The "## Summary" section's lines, up to the next paragraph that starts the page's body.
std::vector<std::string> Summary(const std::string& page) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : Lines(page)) {
    if (line == "## Summary")
      in = true;
    else if (in && (line.rfind("## ", 0) == 0 || line.rfind("Reproduce the trace", 0) == 0))
      break;
    if (in) out.push_back(line);
  }
  return out;
}

// The cells of the summary row whose first cell is `label`.
std::vector<std::string> Row(const std::vector<std::string>& summary, const std::string& label) {
  for (const std::string& line : summary) {
    if (line.rfind("| " + label + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|') {
        cells.push_back(cell.substr(cell.find_first_not_of(' ') == std::string::npos
                                        ? cell.size()
                                        : cell.find_first_not_of(' ')));
        while (!cells.back().empty() && cells.back().back() == ' ') cells.back().pop_back();
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    return cells;
  }
  FAIL("no summary row '" << label << "'");
  return {};
}

Json TraceJson(std::vector<std::string> args) {
  args.insert(args.begin(), "trace");
  args.insert(args.end(), {"--format", "json", "--quiet"});
  const testing::CommandResult r = RunShardtrace(args);
  REQUIRE(r.status == 0);
  return Json::parse(r.out);
}

// The budget table and the collectives table hold `trace`'s totals, byte for byte as the
// text outputs print bytes.
void CheckBudget(const std::vector<std::string>& summary, const Json& j) {
  const Json& m = j.at("memory");
  const Json& t = j.at("totals");
  CHECK(Row(summary, "parameters")[1] == HumanBytes(m.at("parameter_bytes")));
  CHECK(Row(summary, "block input")[1] == HumanBytes(m.at("input_bytes")));
  CHECK(Row(summary, "peak temporaries")[1] == HumanBytes(m.at("peak_temporary_bytes")));
  CHECK(Row(summary, "**peak**")[1] == "**" + HumanBytes(m.at("peak_bytes")) + "**");
  // (MlpBlock's collectives are linears.py's)
  const bool mlp = std::any_of(summary.begin(), summary.end(), [](const std::string& line) {
    return line.rfind("| communication per layer, written in linears.py |", 0) == 0;
  });
  CHECK(Row(summary, mlp ? "communication per layer, written in linears.py"
                         : "communication per layer, written in moe.py")[1] ==
        HumanBytes(t.at("collective_bytes_sent_per_device")));
  CHECK(Row(summary, "communication per layer, inserted by XLA")[1] ==
        HumanBytes(t.at("implied_collective_bytes_sent_per_device")));
  // The largest buffer at the peak is named with its bytes.
  if (!m.at("at_peak").empty())
    CHECK(Row(summary, "peak temporaries")[2].find(HumanBytes(m.at("at_peak")[0].at("bytes"))) !=
          std::string::npos);
  // One collectives row per (kind, origin, axes) of the totals, in their order.
  std::vector<std::string> rows;
  for (const std::string& line : summary)
    if (line.rfind("| ", 0) == 0 && (line.find(" | moe.py | ") != std::string::npos ||
                                     line.find(" | linears.py | ") != std::string::npos ||
                                     line.find(" | XLA | ") != std::string::npos))
      rows.push_back(line);
  REQUIRE(rows.size() == t.at("collectives").size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Json& c = t.at("collectives")[i];
    std::string axes;
    for (const Json& a : c.at("axes")) axes += (axes.empty() ? "" : ", ") + a.get<std::string>();
    CHECK(rows[i] ==
          fmt::format("| {} | {} | {} | {} | {} |", c.at("kind").get<std::string>(),
                      c.at("origin") == "written" ? (mlp ? "linears.py" : "moe.py") : "XLA", axes,
                      c.at("count").get<int>(), HumanBytes(c.at("bytes_sent_per_device"))));
  }
}

// The page's own trace command: its args, devices, block and path, numeric with seed 1.
// The training step's row holds `trace --step`'s figures; a page without one is of a config
// `trace --step` refuses (inference has no backward pass).
void CheckStep(const std::vector<std::string>& summary, std::vector<std::string> args) {
  const bool shown = std::any_of(summary.begin(), summary.end(), [](const std::string& line) {
    return line.rfind("| **training step peak** |", 0) == 0;
  });
  args.insert(args.begin(), "trace");
  args.insert(args.end(), {"--step", "--format", "json", "--quiet"});
  const testing::CommandResult r = RunShardtrace(args);
  if (!shown) {
    CHECK(r.status == 2);
    return;
  }
  REQUIRE(r.status == 0);
  const Json step = Json::parse(r.out).at("step");
  const Json& m = step.at("memory");
  const Json& t = step.at("totals");
  const std::vector<std::string> cells = Row(summary, "**training step peak**");
  CHECK(cells[1] == "**" + HumanBytes(m.at("peak_bytes")) + "**");
  const std::string expected = fmt::format(
      "`remat_policy={}`: + gradients {}, step temporaries {}; sends {} (backward {}, of which "
      "remat {})",
      step.at("remat_policy").at("name").get<std::string>(), HumanBytes(m.at("gradient_bytes")),
      HumanBytes(m.at("peak_temporary_bytes")), HumanBytes(t.at("step_bytes_sent_per_device")),
      HumanBytes(t.at("backward_bytes_sent_per_device")),
      HumanBytes(t.at("recompute_bytes_sent_per_device")));
  CHECK(cells[2] == expected);
}

std::vector<std::string> PageTraceArgs(const VisualizationPage& v) {
  std::vector<std::string> args = v.args;
  args.insert(args.end(), {"--devices", std::to_string(v.devices), "--block", v.block, "--numeric",
                           "--seed", "1"});
  if (!v.path.empty()) args.insert(args.end(), {"--path", v.path});
  return args;
}

void CheckShape(const std::string& page, const std::vector<std::string>& summary) {
  // The summary opens the page: the title and its paragraph come first.
  const std::vector<std::string> lines = Lines(page);
  const auto at = std::find(lines.begin(), lines.end(), "## Summary");
  REQUIRE(at != lines.end());
  CHECK(at - lines.begin() <= 5);
  CHECK(summary.size() <= 40);
  // It names the path and the conditions, says the figures are the forward pass, fits the
  // peak to the accelerators and names the knobs.
  CHECK(summary[2].rfind("**Path** `", 0) == 0);
  const std::string text = fmt::format("{}", fmt::join(summary, "\n"));
  CHECK(text.find("**forward pass**") != std::string::npos);
  for (const char* hbm :
       {"TPU v5e 16 GiB", "TPU v6e 32 GiB", "TPU v5p 95 GiB", "H100 80 GiB", "H200 141 GiB"})
    CHECK(text.find(hbm) != std::string::npos);
  CHECK(text.find("Knobs that change this") != std::string::npos);
}

TEST_CASE("every page's summary holds trace's totals for its config", "[viz][summary]") {
  for (const VisualizationPage& v : VisualizationPages()) {
    INFO(v.file);
    const std::string page = ReadFile(SourcePath("visualizations/" + v.file));
    const std::vector<std::string> summary = Summary(page);
    CheckShape(page, summary);
    CheckBudget(summary, TraceJson(PageTraceArgs(v)));
    CheckStep(summary, PageTraceArgs(v));
  }
}

TEST_CASE("render's summary holds trace's totals: DeepSeek-V3 EP32 x FSDP8", "[viz][summary]") {
  testing::TempDir dir;
  std::vector<std::string> args = {"render"};
  args.insert(args.end(), kDeepSeek.begin(), kDeepSeek.end());
  args.insert(args.end(), {"--hbm", "MI300X=192", "-o", dir.File("page.md")});
  const testing::CommandResult r = RunShardtrace(args);
  REQUIRE(r.status == 0);
  const std::string page = ReadFile(dir / "page.md");
  const std::vector<std::string> summary = Summary(page);
  CheckShape(page, summary);
  CheckBudget(summary, TraceJson(kDeepSeek));
  CheckStep(summary, std::vector<std::string>(kDeepSeek.begin(), kDeepSeek.end()));
  // --hbm adds its accelerator; the training step's 290.0 GiB per device fits none of the
  // defaults nor 192 GiB, and the page says so for each.
  const std::string text = fmt::format("{}", fmt::join(summary, "\n"));
  CHECK(text.find("MI300X 192 GiB") != std::string::npos);
  CHECK(text.find("H200 141 GiB: one layer **does not fit**") != std::string::npos);
}

TEST_CASE("each knob row of a summary is the trace of its variant", "[viz][summary]") {
  // ragged_all_to_all at full size: every knob applies (the buffer factor, EP both ways traded
  // with fsdp, TP, the ring, the batch, the dense path).
  testing::TempDir dir;
  std::vector<std::string> args = {"render"};
  args.insert(args.end(), kDeepSeek.begin(), kDeepSeek.end());
  args.insert(args.end(), {"-o", dir.File("page.md")});
  REQUIRE(RunShardtrace(args).status == 0);
  const std::vector<std::string> summary = Summary(ReadFile(dir / "page.md"));
  const std::regex override_re("`([a-z_0-9]+=[^`]+)`");
  int rows = 0;
  for (const std::string& line : summary) {
    if (line.rfind("| `", 0) != 0 || line.find("=") == std::string::npos) continue;
    const std::string change = line.substr(2, line.find(" | ", 2) - 2);
    INFO(change);
    std::vector<std::string> trace_args(kDeepSeek.begin(), kDeepSeek.end());
    trace_args.push_back("override_model_config=true");
    for (auto it = std::sregex_iterator(change.begin(), change.end(), override_re);
         it != std::sregex_iterator(); ++it)
      trace_args.push_back((*it)[1]);
    const Json j = TraceJson(trace_args);
    const std::vector<std::string> cells = Row(summary, change);
    CHECK(cells[2] == HumanBytes(j.at("memory").at("peak_bytes")));
    CHECK(cells[4] ==
          HumanBytes(j.at("totals").at("collective_bytes_sent_per_device").get<int64_t>() +
                     j.at("totals").at("implied_collective_bytes_sent_per_device").get<int64_t>()));
    ++rows;
  }
  CHECK(rows >= 7);
  // The buffer factor is the knob that brings DeepSeek-V3's layer within HBM here.
  const std::vector<std::string> ragged = Row(summary, "`ragged_buffer_factor=1`");
  CHECK(ragged[3].rfind("-", 0) == 0);
}

TEST_CASE("a summary with many kinds of collectives names the smaller ones by count",
          "[viz][summary]") {
  Trace trace;
  trace.block = "moe";
  trace.path = "sparse_matmul/ragged_all_to_all";
  SummaryInput in;
  in.trace = &trace;
  for (int i = 0; i < 9; ++i)
    in.totals.collectives.push_back(
        {CollectiveKind::kAllGather, i % 2 == 0, {fmt::format("axis{}", i)}, 1, 100 * (i + 1)});
  const std::string text = SummaryMarkdown(in);
  // the five largest (axis8 .. axis4) in their order of use, then the rest by count
  CHECK(text.find("| all-gather | XLA | axis3 |") == std::string::npos);
  CHECK(text.find("| all_gather | moe.py | axis4 | 1 | 500 B |\n| all-gather | XLA | axis5 |") !=
        std::string::npos);
  CHECK(text.find("| 4 smaller kinds: see Collectives in the formal specification | | | | |\n") !=
        std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') <= 40);
}

TEST_CASE("render --hbm takes NAME=GIB and names a malformed one", "[viz][summary][errors]") {
  testing::TempDir dir;
  const testing::CommandResult r =
      RunShardtrace({"render", "num_experts=4", "ici_expert_parallelism=2", "--devices", "4",
                     "--hbm", "MI300X", "-o", dir.File("page.md")});
  CHECK(r.status == 2);
  CHECK(r.err ==
        "shardtrace: error: --hbm 'MI300X': expected NAME=GIB, an accelerator name and its HBM "
        "per device in GiB (e.g. MI300X=192)\n");
  CHECK(dir.Entries().empty());
}

}  // namespace
}  // namespace shardtrace

namespace shardtrace {
namespace {

TEST_CASE("with a compile_topology the summary's HBM line is the whole step's, as fit says",
          "[viz][summary][fit]") {
  const std::vector<std::string> config = {"model_name=mixtral-8x7b", "compile_topology=v5p-64"};
  std::vector<std::string> render = {"render"};
  render.insert(render.end(), config.begin(), config.end());
  const testing::CommandResult page = testing::RunShardtrace(render);
  REQUIRE(page.status == 0);
  std::vector<std::string> fit = {"fit"};
  fit.insert(fit.end(), config.begin(), config.end());
  const testing::CommandResult verdict = testing::RunShardtrace(fit);
  REQUIRE(verdict.status == 0);
  // fit's first line: "mixtral-8x7b on v5p-64 (32 devices), ...: fits with X to spare".
  const std::string first = verdict.out.substr(0, verdict.out.find('\n'));
  const std::string spare = first.substr(first.rfind(": ") + 2);
  CHECK(spare.rfind("fits with ", 0) == 0);
  CHECK(page.out.find("The whole training step on v5p-64 (32 devices)") != std::string::npos);
  CHECK(page.out.find("mixtral-8x7b " + spare) != std::string::npos);
  CHECK(page.out.find("one layer fits") == std::string::npos);
  CHECK(page.out.find("Near the line") == std::string::npos);
}

// mixtral with 2 layers on v5e-16 at batch 14: fit says it does not fit by 676.1 MiB of the 95%
// of HBM it holds a TPU step to (its peak 1.3% of HBM under the compiler's), and the
// TPU compiler runs out of HBM, needing 15.83 of its 15.75 GiB (testdata/maxtext-tpu/steps/
// pair_mixtral_l2_v5e16_pdb14.json): fit and the page each say the verdict is within fit's
// error of the line.
TEST_CASE("a verdict near the line says so on the page as fit does", "[viz][summary][fit]") {
  const std::vector<std::string> config = {
      testing::SourcePath("testdata/maxtext-moe-models/configs/base.yml"),
      "model_name=mixtral-8x7b",
      "compile_topology=v5e-16",
      "compile_topology_num_slices=1",
      "override_model_config=true",
      "base_num_decoder_layers=2",
      "max_target_length=2048",
      "per_device_batch_size=14"};
  std::vector<std::string> fit = {"fit"};
  fit.insert(fit.end(), config.begin(), config.end());
  const testing::CommandResult verdict = testing::RunShardtrace(fit);
  REQUIRE(verdict.status == 0);
  CHECK(verdict.out.substr(0, verdict.out.find('\n')).find("(near the line: ") != std::string::npos);
  std::vector<std::string> render = {"render"};
  render.insert(render.end(), config.begin(), config.end());
  const testing::CommandResult page = testing::RunShardtrace(render);
  REQUIRE(page.status == 0);
  CHECK(page.out.find("**does not fit**, short by 676.2 MiB: peak 15.6 GiB of 15.8 GiB HBM per "
                      "device, held to the 15.0 GiB (95%) its compiler schedules within.") !=
        std::string::npos);
  CHECK(page.out.find("Near the line: within fit's measured error") != std::string::npos);
}

// The published Mixtral dropping run on v6e-256 with five names offloaded (N1), which fit calls
// a fit and the TPU compiler refuses (testdata/maxtext-tpu/steps/published_n1_*): fit names
// what it does not model there, and the page says so beside the verdict.
TEST_CASE(
    "a policy that offloads several names says on the page that fit does not model its staging",
    "[viz][summary][fit]") {
  const std::vector<std::string> config = {
      testing::SourcePath("testdata/maxtext-moe-models/configs/base.yml"),
      "model_name=mixtral-8x7b",
      "compile_topology=v6e-256",
      "per_device_batch_size=12",
      "max_target_length=4096",
      "remat_policy=custom",
      "decoder_layer_input=offload",
      "out_proj=offload",
      "query_proj=offload",
      "key_proj=offload",
      "value_proj=offload",
      "sparse_matmul=false",
      "capacity_factor=1.25",
      "ici_fsdp_parallelism=256"};
  std::vector<std::string> fit = {"fit"};
  fit.insert(fit.end(), config.begin(), config.end());
  fit.insert(fit.end(), {"--format", "json"});
  const testing::CommandResult verdict = testing::RunShardtrace(fit);
  REQUIRE(verdict.status == 0);
  CHECK(Json::parse(verdict.out).at("unmodelled") == Json::array({"offload_staging"}));
  std::vector<std::string> render = {"render"};
  render.insert(render.end(), config.begin(), config.end());
  const testing::CommandResult page = testing::RunShardtrace(render);
  REQUIRE(page.status == 0);
  CHECK(page.out.find("mixtral-8x7b fits with 4.4 GiB to spare") != std::string::npos);
  CHECK(page.out.find("The policy offloads several names, whose stacks TPU's compiler has "
                      "staged whole in HBM to change their layout (Mixtral 8x7B dropping on "
                      "v6e-256 ran out of HBM where fit says it fits): not modelled, compile to be "
                      "sure.") != std::string::npos);
}

}  // namespace
}  // namespace shardtrace
