// The visualization emitters and `shardtrace generate`: the ASCII flow draws rectangular
// boxes (checked cell by cell, since box characters are multi-byte UTF-8) with double-line
// boxes for constrained tensors and `(if ...)` for conditional ones; the mask tree of a
// hand-built mask has the expected leaves; the invariants report a violation instead of
// hiding it; Mermaid graphs of hand-built traces. The committed pages' conventions are
// tests/page_conventions_test.cc's.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "check/trace_invariants.h"
#include "emit/ascii_flow.h"
#include "emit/dim_letters.h"
#include "emit/human_bytes.h"
#include "emit/mask_tree.h"
#include "emit/mermaid_flow.h"
#include "emit/sparse_row_tree.h"
#include "emit/tensor_glossary.h"
#include "emit/text_table.h"
#include "emit/tree_text.h"
#include "pages/kernel_variants.h"
#include "pages/page_sections.h"
#include "pages/visualization_pages.h"
#include "paths/moe_block.h"
#include "run/run.h"
#include "shard/sharding.h"
#include "test_support.h"
#include "viz_test_support.h"

namespace shardtrace {
namespace {

using testing::CommandResult;
using testing::ReadFile;
using testing::RunShardtrace;
using testing::SourcePath;
using testing::TempDir;
using namespace viz_testing;  // NOLINT(build/namespaces): the shared test helpers

TEST_CASE("ascii flow draws one rectangular box per stage", "[viz]") {
  const Trace small = SmallTrace();
  const std::string flow = AsciiFlow(small, SmallSpmd(small));
  INFO(flow);
  const std::vector<std::u32string> grid = Grid(flow);
  // gate, dense_matmul, gate again: stages, not nested boxes.
  CHECK(CheckBoxes(grid, U'┌', U'┐', U'└', U'┘', U'│') == 3);
  CHECK(CheckBoxes(grid, U'╔', U'╗', U'╚', U'╝', U'║') == 1);  // gate_logits

  // Every line between a top-level box's top and bottom edge has the same display width.
  std::istringstream lines(flow);
  std::string line;
  size_t box_width = 0;
  bool in_box = false;
  while (std::getline(lines, line)) {
    if (line.rfind("┌", 0) == 0) {
      in_box = true;
      box_width = DisplayWidth(line);
    }
    if (in_box) CHECK(DisplayWidth(line) == box_width);
    if (line.rfind("└", 0) == 0) in_box = false;
  }

  CHECK(flow.find("╔═ maybe_shard_with_logical") != std::string::npos);
  CHECK(flow.find("gate_logits: act [B=2,S=4,E=4] bf16  ← output") != std::string::npos);
  // The logical axis behind each PartitionSpec entry, per dim.
  CHECK(flow.find("B=2  'activation_batch'  → 'fsdp'") != std::string::npos);
  CHECK(flow.find("E=4  None                → None") != std::string::npos);
  CHECK(flow.find("P('fsdp', None, None): [1,4,4] per device, 32 B") != std::string::npos);
  CHECK(flow.find("(if capacity_factor > 0)") != std::string::npos);
  CHECK(flow.find("← einsum(\"BSM,ME->BSE\", inputs, kernel)") != std::string::npos);
  CHECK(flow.find("⇄ all_gather(dispatch_mask) over expert, groups of 2") != std::string::npos);
  CHECK(flow.find("output: act [B=2,S=4,E=4] bf16") != std::string::npos);
  CHECK(flow.find("kernel: weight [M=8,E=4] bf16") != std::string::npos);
  // Connectors name the tensors a stage takes from earlier stages.
  CHECK(flow.find("  ▼ output\n┌─ RoutedMoE/dense_matmul") != std::string::npos);
  // The gate scope entered again after dense_matmul gets a second box below it.
  CHECK(flow.find("┌─ RoutedMoE/gate ", flow.find("┌─ RoutedMoE/dense_matmul")) !=
        std::string::npos);
}

TEST_CASE("ascii flow folds a chain of casts into one line", "[viz]") {
  Trace trace;
  for (int i = 0; i < 3; ++i) {
    trace.tensors.push_back(Tensor(i, "top_k_weights", "get_topk", "BSK", {1, 4, 2}));
    trace.ops.push_back(OpRecord{i,
                                 i == 0 ? OpKind::kTopK : OpKind::kAstype,
                                 "",
                                 {},
                                 {i},
                                 {{"dtype", i == 1 ? "float32" : "bfloat16"}},
                                 "get_topk",
                                 {},
                                 "",
                                 std::nullopt,
                                 /*stable_id=*/""});
    if (i > 0) trace.ops.back().inputs = {i - 1};
  }
  const std::string flow = AsciiFlow(trace, Whole(trace));
  INFO(flow);
  CHECK(flow.find("top_k_weights: act [B=1,S=4,K=2] bf16  ← top_k, as f32, as bf16 ") !=
        std::string::npos);
  CHECK(flow.find("▼") == std::string::npos);  // one stage, nothing to flow between
}

TEST_CASE("ascii flow draws independent branches side by side and wraps at the width", "[viz]") {
  // x feeds two independent stages (wi_0, wi_1) whose outputs a third stage multiplies.
  Trace trace;
  trace.tensors.push_back(Tensor(0, "x", "moe", "TM", {4, 8}));
  trace.tensors.push_back(Tensor(1, "layer_w0", "moe/wi_0", "TH", {4, 16}));
  trace.tensors.push_back(Tensor(2, "layer_w1", "moe/wi_1", "TH", {4, 16}));
  trace.tensors.push_back(Tensor(3, "out", "moe/act", "TH", {4, 16}));
  trace.ops.push_back(OpRecord{0,
                               OpKind::kEinsum,
                               "TM,MH->TH",
                               {0},
                               {1},
                               {},
                               "moe/wi_0",
                               {},
                               "",
                               ParseEinsum("TM,MH->TH"),
                               /*stable_id=*/""});
  trace.ops.push_back(OpRecord{1,
                               OpKind::kEinsum,
                               "TM,MH->TH",
                               {0},
                               {2},
                               {},
                               "moe/wi_1",
                               {},
                               "",
                               ParseEinsum("TM,MH->TH"),
                               /*stable_id=*/""});
  trace.ops.push_back(OpRecord{
      2, OpKind::kMul, "", {1, 2}, {3}, {}, "moe/act", {}, "", std::nullopt, /*stable_id=*/""});
  const std::string flow = AsciiFlow(trace, Whole(trace), 120);
  INFO(flow);
  CHECK(flow.find("  ├──") != std::string::npos);
  CHECK(flow.find("┌─ moe/wi_0 ─") < flow.find("\n", flow.find("┌─ moe/wi_1 ─")));
  CHECK(flow.find("┌─ moe/wi_1 ─") != std::string::npos);
  const size_t join = flow.find("  ├──", flow.find("┌─ moe/wi_1"));
  CHECK(join != std::string::npos);
  CHECK(flow.find("  ▼ layer_w0, layer_w1\n┌─ moe/act") != std::string::npos);

  // At 60 columns the branches no longer fit side by side; long lines wrap.
  const std::string narrow = AsciiFlow(trace, Whole(trace), 60);
  INFO(narrow);
  std::istringstream lines(narrow);
  std::string line;
  while (std::getline(lines, line)) CHECK(DisplayWidth(line) <= 60);
  CHECK(narrow.find("┌─ moe/wi_1") > narrow.find("└", narrow.find("┌─ moe/wi_0")));
}

TEST_CASE("mask tree shows expert -> slot -> tokens", "[viz]") {
  // [B=2, S=3, E=2, C=2]; batch 0: expert 0 slot 0 <- T1, slot 1 <- T2; expert 1 slot 0 <- T0.
  std::vector<float> values(2 * 3 * 2 * 2, 0.0f);
  const auto set = [&](int b, int s, int e, int c, float v) {
    values[((b * 3 + s) * 2 + e) * 2 + c] = v;
  };
  set(0, 1, 0, 0, 1);
  set(0, 2, 0, 1, 1);
  set(0, 0, 1, 0, 1);
  set(1, 0, 0, 0, 1);  // batch 1 must not show
  const Array dispatch = Array::FromData({2, 3, 2, 2}, DType::kBool, values);
  CHECK(MaskTree("dispatch_mask", dispatch) ==
        "dispatch_mask[b=0] as E → C → S (of [B=2,S=3,E=2,C=2]):\n"
        "\n"
        "Expert 0:\n"
        "├── slot 0: [T0=0, T1=1, T2=0] → contains T1\n"
        "└── slot 1: [T0=0, T1=0, T2=1] → contains T2\n"
        "\n"
        "Expert 1:\n"
        "├── slot 0: [T0=1, T1=0, T2=0] → contains T0\n"
        "└── slot 1: [T0=0, T1=0, T2=0] → empty\n");

  // Weighted: the leaves carry the routing weights; with the top-k choices, a token that
  // chose an expert but holds no slot is named as dropped.
  std::vector<float> weights(values.size(), 0.0f);
  for (size_t i = 0; i < values.size(); ++i) weights[i] = values[i] * 0.25f;
  const Array combine = Array::FromData({2, 3, 2, 2}, DType::kFloat32, weights);
  // top_k_indices [B=2, S=3, K=1]: batch 0's tokens chose experts 1, 0, 1, and T2 holds no
  // slot of expert 1 (the mask put it in expert 0).
  const Array choices = Array::FromData({2, 3, 1}, DType::kInt32, {1, 0, 1, 0, 0, 0});
  const std::string tree = MaskTree("combine_mask", combine, 0, &choices);
  INFO(tree);
  CHECK(tree.find("├── slot 0: [T0=0, T1=0.25, T2=0] → T1 with weight 0.25\n") !=
        std::string::npos);
  CHECK(tree.find("    (dropped: T2 chose expert 1, but its 2 slots were full)\n") !=
        std::string::npos);

  CHECK_THROWS_WITH(MaskTree("m", Array::Filled({2, 3}, DType::kBool, 0)),
                    Catch::Contains("expected a [B,S,E,C] or [B,N,S,E,C] mask"));
  // Inference's [B,N,S,E,C]: each context subgroup has its own slots, tokens numbered in the
  // whole sequence. Two subgroups of two tokens, one expert, one slot: T1 and T2 hold them.
  const Array grouped = Array::FromData({1, 2, 2, 1, 1}, DType::kBool, {0, 1, 1, 0});
  CHECK(MaskTree("dispatch_mask", grouped) ==
        "dispatch_mask[b=0] as subgroup n → E → C → S (of [B=1,N=2,S=2,E=1,C=1]; token T = "
        "n*S+s):\n"
        "\n"
        "Subgroup n=0 (tokens T0-T1, with C=1 slots per expert of its own):\n"
        "\n"
        "Expert 0:\n"
        "└── slot 0: [T0=0, T1=1] → contains T1\n"
        "\n"
        "Subgroup n=1 (tokens T2-T3, with C=1 slots per expert of its own):\n"
        "\n"
        "Expert 0:\n"
        "└── slot 0: [T2=1, T3=0] → contains T2\n");
  CHECK_THROWS_WITH(MaskTree("m", dispatch, 2), Catch::Contains("batch 2 is outside [0, 2)"));
}

TEST_CASE("sorted rows and ragged buffer trees name each row's token and choice", "[viz]") {
  // One device, K=2, two tokens: flat rows T0k0=0, T0k1=1, T1k0=2, T1k1=3 chose experts
  // 2, 0, 0, 1; the stable sort by expert gives rows 1, 2 (expert 0), 3 (1), 0 (2).
  const Array selected = Array::FromData({1, 4}, DType::kInt32, {1, 2, 3, 0});
  const Array experts = Array::FromData({1, 4}, DType::kInt32, {0, 0, 1, 2});
  CHECK(SortedRowsTree(selected, experts, 2) ==
        "sorted_inputs per device as Device → expert → sorted rows (of [D=1] x [R=4,M], K=2; "
        "T = the device's token b*S+s):\n"
        "\n"
        "Device 0 (4 rows):\n"
        "├── expert 0: rows 0-1 ← T0 k=1, T1 k=0\n"
        "├── expert 1: row 2 ← T1 k=1\n"
        "└── expert 2: row 3 ← T0 k=0\n");

  // Two devices of 2 rows each; device 1's buffer got device 0's sorted row 1 then its own
  // rows 0-1, and has one empty row.
  const Array sel2 = Array::FromData({2, 2}, DType::kInt32, {0, 1, 1, 0});
  const Array exp2 = Array::FromData({2, 2}, DType::kInt32, {0, 1, 1, 1});
  const Array sources = Array::FromData({2, 4}, DType::kInt32, {0, -1, -1, -1, 1, 2, 3, -1});
  CHECK(RaggedBufferTree(sources, sel2, exp2, 1) ==
        "x per device as Device → buffer rows → sender → expert (of [D=2] x [U=4,M]; Dd.Tt = "
        "device d's token t):\n"
        "\n"
        "Device 0 (buffer of 4 rows, 1 filled):\n"
        "├── row 0 ← device 0, its sorted row 0\n"
        "│   └── expert 0: D0.T0 k=0\n"
        "└── rows 1-3: empty\n"
        "\n"
        "Device 1 (buffer of 4 rows, 3 filled):\n"
        "├── row 0 ← device 0, its sorted row 1\n"
        "│   └── expert 1: D0.T1 k=0\n"
        "├── rows 1-2 ← device 1, its sorted rows 0-1\n"
        "│   └── expert 1: D1.T1 k=0, D1.T0 k=0\n"
        "└── row 3: empty\n");
  CHECK_THROWS_WITH(SortedRowsTree(selected, sel2, 2), Catch::Contains("of one shape"));
}

TEST_CASE("tree lines wrap under their rules; big trees fold idle experts and devices", "[viz]") {
  // A leaf list wider than the line continues under the node's vertical rule.
  const std::string line =
      TreeLine("├── ", "│   ", "expert 0: rows 0-5 ← T0 k=1, T1 k=0, T2 k=1, T3 k=0", 40);
  CHECK(line ==
        "├── expert 0: rows 0-5 ← T0 k=1,\n"
        "│       T1 k=0, T2 k=1, T3 k=0\n");
  // Three devices of 4 rows, 12 experts, K=1: device d's tokens chose experts 0, 1, 2 and
  // 11 - d; experts without rows fold into ranges, and a view of 2 devices leaves one out.
  std::vector<float> selected, experts;
  for (int d = 0; d < 3; ++d)
    for (int r = 0; r < 4; ++r) {
      selected.push_back(static_cast<float>(r));
      experts.push_back(static_cast<float>(r < 3 ? r : 11 - d));
    }
  const Array sel = Array::FromData({3, 4}, DType::kInt32, selected);
  const Array exp = Array::FromData({3, 4}, DType::kInt32, experts);
  CHECK(SortedRowsTree(sel, exp, 1, {.max_devices = 2}) ==
        "sorted_inputs per device as Device → expert → sorted rows (of [D=3] x [R=4,M], K=1; "
        "T = the device's token b*S+s):\n"
        "\n"
        "Device 0 (4 rows):\n"
        "├── expert 0: row 0 ← T0 k=0\n"
        "├── expert 1: row 1 ← T1 k=0\n"
        "├── expert 2: row 2 ← T2 k=0\n"
        "├── experts 3-10: no rows\n"
        "└── expert 11: row 3 ← T3 k=0\n"
        "\n"
        "Device 1 (4 rows):\n"
        "├── expert 0: row 0 ← T0 k=0\n"
        "├── expert 1: row 1 ← T1 k=0\n"
        "├── expert 2: row 2 ← T2 k=0\n"
        "├── experts 3-9: no rows\n"
        "├── expert 10: row 3 ← T3 k=0\n"
        "└── expert 11: no rows\n"
        "\n"
        "(device 2 not shown: the first 2 of 3 devices are drawn.)\n");
  // A device that sorted exactly as the one before (same tokens on a tensor axis) is one line.
  const Array twice_sel = Array::FromData({2, 2}, DType::kInt32, {1, 0, 1, 0});
  const Array twice_exp = Array::FromData({2, 2}, DType::kInt32, {0, 1, 0, 1});
  CHECK(SortedRowsTree(twice_sel, twice_exp, 1)
            .find("\nDevice 1 (2 rows): sorted exactly as device 0\n") != std::string::npos);
  // 120 columns hold however many rows an expert gets.
  std::vector<float> many_sel, many_exp;
  for (int r = 0; r < 200; ++r) {
    many_sel.push_back(static_cast<float>(r));
    many_exp.push_back(0.0f);
  }
  const std::string wide = SortedRowsTree(Array::FromData({1, 200}, DType::kInt32, many_sel),
                                          Array::FromData({1, 200}, DType::kInt32, many_exp), 2);
  std::istringstream lines(wide);
  std::string l;
  int continued = 0;
  while (std::getline(lines, l)) {
    INFO(l);
    CHECK(DisplayWidth(l) <= 120);
    continued += l.rfind("        T", 0) == 0;  // under "└── ": no rule below the last node
  }
  CHECK(continued > 10);
  CHECK(wide.find("T99 k=1") != std::string::npos);
}

TEST_CASE("a config variant the config cannot take is named with its reason", "[viz]") {
  const std::vector<std::string> args = {
      "base_emb_dim=16",         "base_mlp_dim=32",       "base_moe_mlp_dim=32",
      "num_experts=3",           "num_experts_per_tok=2", "max_target_length=4",
      "per_device_batch_size=1", "decoder_block=mixtral", "sparse_matmul=false"};
  const RunResult run = Run(SymbolicRequest(args, 4));
  const std::vector<VariantColumn> cols = KernelVariants(
      {.args = args, .devices = 4, .keys = {"shard_exp_on_fsdp"}, .extra = {}}, run.trace);
  REQUIRE(cols.size() == 3);
  CHECK(cols[0].label == "as traced");
  // shard_exp_on_fsdp puts the 3 experts on fsdp=4: a parameter JAX refuses.
  CHECK_THAT(cols[1].not_traced, Catch::Contains("not divisible by") &&
                                     Catch::Contains("MaxText cannot build this block"));
  CHECK(cols[1].specs.empty());
  CHECK(cols[2].label == "EP on (`ici_expert_parallelism=2`)");
  CHECK(cols[2].not_traced ==
        "num_experts 3 is not divisible by the expert-parallel size 2 (mesh axes expert); set "
        "ici_expert_parallelism to a divisor of 3");
  CHECK(cols[2].specs.empty());
}

// The receive buffers the ragged_all_to_all page draws come from the exchange itself: every
// sorted row of every device lands exactly once, on the device holding its expert.
TEST_CASE("the ragged all-to-all sends every sorted row to its expert's device", "[viz]") {
  const RunResult run = testing::SeededRun(
      {"base_emb_dim=16", "base_mlp_dim=32", "base_moe_mlp_dim=32", "num_experts=8",
       "num_experts_per_tok=2", "max_target_length=4", "per_device_batch_size=1",
       "decoder_block=mixtral", "ici_expert_parallelism=4"},
      4);
  const Array& sources = run.captures.At(Capture::kXRowSourcesPerDevice);
  const Array& experts = run.captures.At(Capture::kSortedExpertsPerDevice);
  REQUIRE(sources.shape[0] == 4);
  REQUIRE(experts.shape == Shape({4, 8}));
  std::multiset<int64_t> landed;
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t u = 0; u < sources.shape[1]; ++u) {
      const auto src = static_cast<int64_t>(sources.values()[d * sources.shape[1] + u]);
      if (src < 0) continue;
      landed.insert(src);
      INFO("device " << d << " buffer row " << u << " <- " << src);
      CHECK(static_cast<int64_t>(experts.values()[src]) / 2 == d);  // 2 local experts each
    }
  CHECK(landed.size() == 32);
  CHECK(std::set<int64_t>(landed.begin(), landed.end()).size() == 32);

  // The parameters the page tabulates, per exchange: a device's input_offsets are the
  // exclusive cumsum of its send_sizes, what d sends p is what p expects from d, and d's rows
  // land in p's buffer after those of the lower senders (moe.py:820-831).
  for (const Exchange exchange : {Exchange::kDispatch, Exchange::kReturn}) {
    INFO(ExchangeOperand(exchange));
    const std::array<Capture, 4> params = AllToAllParamCaptures(exchange);
    enum { kInputOffsets, kSendSizes, kOutputOffsets, kRecvSizes };
    const auto at = [&](int param, int64_t d, int64_t p) {
      const Array& a = run.captures.At(params[param]);
      REQUIRE(a.shape == Shape({4, 4}));
      return static_cast<int64_t>(a.values()[d * 4 + p]);
    };
    for (int64_t d = 0; d < 4; ++d) {
      int64_t offset = 0;
      for (int64_t p = 0; p < 4; ++p) {
        CHECK(at(kInputOffsets, d, p) == offset);
        offset += at(kSendSizes, d, p);
        CHECK(at(kSendSizes, d, p) == at(kRecvSizes, p, d));
        int64_t before = 0;
        for (int64_t q = 0; q < d; ++q) before += at(kSendSizes, q, p);
        CHECK(at(kOutputOffsets, d, p) == before);
      }
    }
  }
  const std::vector<MarkdownExample> sections = SendMatrixSections(run.trace, run.captures);
  REQUIRE(sections.size() == 2);
  CHECK(sections[1].heading == "Ragged all-to-all parameters");
  CHECK(sections[1].text.find(
            "  device  input_offsets  send_sizes    output_offsets  recv_sizes\n") !=
        std::string::npos);
}

TEST_CASE("invariants report a violation instead of hiding it", "[viz]") {
  Trace trace = SmallTrace();
  trace.tensors.push_back(Tensor(7, "top_k_indices", "RoutedMoE", "BSK", {2, 4, 2}));
  trace.top_k_indices = 7;
  // B*S*K = 16 choices, but the counts add up to 15.
  trace.facts.push_back(Fact{FactKind::kTokensPerExpert, "", "RoutedMoE", {4}, {4, 4, 4, 3}, {}});
  const std::vector<Invariant> invariants = TraceInvariants(trace, SmallSpmd(trace));
  bool found = false;
  for (const Invariant& inv : invariants) {
    if (inv.kind != InvariantKind::kTokensRouted) continue;
    found = true;
    CHECK(inv.violated);
    CHECK(inv.result == "VIOLATED: sum([4, 4, 4, 3]) = 15, B*S*K = 2*4*2 = 16");
  }
  CHECK(found);
}

TEST_CASE("trace --format mermaid prints a page's flowchart", "[viz]") {
  const VisualizationPage page = VisualizationPages()[5];  // ragged all-to-all, collectives
  REQUIRE(page.file == "moe_sparse_ragged_all_to_all.md");
  std::vector<std::string> args = {"trace"};
  args.insert(args.end(), page.args.begin(), page.args.end());
  for (const std::string& a :
       {std::string("--devices"), std::to_string(page.devices), std::string("--numeric"),
        std::string("--seed"), std::string("1"), std::string("--format"), std::string("mermaid")})
    args.push_back(a);
  const CommandResult r = RunShardtrace(args);
  INFO(r.err);
  CHECK(r.status == 0);
  const RenderedPage rendered = RenderPage(page);
  CHECK(r.out == MermaidFlow(rendered.trace, rendered.spmd));
  CHECK(r.out.find("([\"⇄ ragged_all_to_all over expert\"]):::collective") != std::string::npos);
  // get_all_to_all_params' four outputs, made from the same inputs and read by the same
  // ragged_all_to_all, are one node rather than four side by side.
  CHECK(r.out.find(
            "[\"input_offsets, send_sizes, output_offsets, recv_sizes: act<br/>[P=4] i32\"]") !=
        std::string::npos);
  CHECK(r.out.find("[\"send_sizes: ") == std::string::npos);
}

TEST_CASE("mermaid labels escape quotes", "[viz]") {
  Trace trace;
  TensorRecord t;
  t.name = "a\"b";
  t.dims = "T";
  t.shape = {2};
  trace.tensors.push_back(t);
  const std::string text = MermaidFlow(trace, Whole(trace));
  CHECK(text ==
        "flowchart TD\n  n0[\"a#quot;b: act<br/>[T=2] f32\"]\n"
        "  classDef constrained stroke-width:3px\n  classDef weight fill:#fff3d6\n"
        "  classDef collective fill:#e3f0ff\n");
}

// moe.py's letters clash with the pages' (its unpermute sum says B for tokens and E for the
// embedding): equations are written in the letters of the tensors they read and write, with
// moe.py's spelling kept as a note, and a renaming that would merge two letters keeps moe.py's.
TEST_CASE("einsums are written in the page's dim letters", "[viz]") {
  Trace trace;
  trace.tensors.push_back(Tensor(0, "reshaped_intermediate", "unpermute", "TKM", {4, 2, 16}));
  trace.tensors.push_back(Tensor(1, "reshaped_weights", "unpermute", "TK", {4, 2}));
  trace.tensors.push_back(Tensor(2, "output", "unpermute", "TM", {4, 16}));
  trace.tensors.push_back(Tensor(3, "x", "wrapper", "UQ", {32, 8}));
  trace.tensors.push_back(Tensor(4, "w0_chunk", "wrapper", "EQH", {2, 8, 32}));
  trace.tensors.push_back(Tensor(5, "group_sizes", "wrapper", "E", {2}));
  trace.tensors.push_back(Tensor(6, "layer_w0", "wrapper", "UH", {32, 32}));
  trace.tensors.push_back(Tensor(7, "square", "wrapper", "MM", {16, 16}));
  OpRecord sum;
  sum.kind = OpKind::kEinsum;
  sum.equation = "BKE,BK->BE";
  sum.einsum = ParseEinsum(sum.equation);
  sum.inputs = {0, 1};
  sum.outputs = {2};
  CHECK(PageEquation(trace, sum) == "TKM,TK->TM");
  CHECK(PageEinsum(trace, sum)->contracted == "K");
  OpRecord gmm;
  gmm.kind = OpKind::kGmm;
  gmm.equation = "RK,GKN->RN";
  gmm.einsum = ParseEinsum(gmm.equation);
  gmm.inputs = {3, 4, 5};
  gmm.outputs = {6};
  CHECK(PageEquation(trace, gmm) == "UMc,EMcH->UH");  // Q is labelled Mc: one embedding chunk
  OpRecord merged = sum;                              // a and b would both become M
  merged.equation = "ab,bc->ac";
  merged.einsum = ParseEinsum(merged.equation);
  merged.inputs = {7, 7};
  merged.outputs = {7};
  CHECK(PageEquation(trace, merged) == "ab,bc->ac");
  CHECK(!PageEinsum(trace, merged));
  CHECK(DimsText("BSM") == "BSM");
  CHECK(DimsText("BSGJ") == "B,S,G,g2");
  CHECK(DimLabel('L') == "P*E");
}

// What the committed pages say (generate --check keeps them equal to what the emitters write).
TEST_CASE("pages label folded and borrowed dims and write einsums in their own letters", "[viz]") {
  const auto page = [](const std::string& file) {
    return ReadFile(SourcePath("visualizations/" + file));
  };
  const std::string megablox = page("moe_sparse_megablox.md");
  CHECK_THAT(megablox,
             Catch::Contains(
                 "- `output = einsum(\"TKM,TK->TM\", reshaped_intermediate, reshaped_weights)` in "
                 "`RoutedMoE/sparse_matmul/wrapper/unpermute/weight_sum`: "
                 "`output[T,M] = Σ_K reshaped_intermediate[T,K,M] · reshaped_weights[T,K]`: "
                 "contracts K (top-k choices per token); moe.py spells it `BKE,BK->BE`\n"));
  CHECK_THAT(megablox,
             Catch::Contains("- `layer_w0 = gmm(\"RM,EMH->RH\", sorted_inputs, w0, group_size)` in "
                             "`RoutedMoE/sparse_matmul/wrapper/[gmm_wi_0]`: grouped matmul, "
                             "megablox: "));
  CHECK_THAT(megablox, Catch::Contains("moe.py calls gmm with no equation, the trace spells it "
                                       "`RK,GKN->RN`\n"));
  const std::string ragged = page("moe_sparse_ragged_all_to_all.md");
  CHECK_THAT(ragged,
             Catch::Contains("│ local_sizes: act [P*E=8] i32  ← reshape(all_shard_local_sizes)"));
  CHECK_THAT(ragged,
             Catch::Contains("| `P*E` | (peer, local expert) slots, flattened: local_sizes = "
                             "all_shard_local_sizes.reshape(-1) (moe.py:768) | 8 inside "
                             "shard_map |"));
  CHECK_THAT(ragged, Catch::Contains("gmm(\"UM,EMH->UH\", sorted_inputs, w0, local_group_size"));
  const std::string routing = page("moe_routing_variants.md");
  CHECK_THAT(
      routing,
      Catch::Contains("│ top2_in_group_idx: act [B=2,S=4,G=4,g2=2] i32  ← top_k(scores_grouped)"));
  CHECK_THAT(routing,
             Catch::Contains("│ group_mask: act [B=2,S=4,Gk=3,G=4] f32  ← one_hot(group_idx)"));
  CHECK_THAT(routing, Catch::Contains("| `K` | top-k choices per token | 8 |"));
  CHECK_THAT(routing,
             Catch::Contains("| `Gk` | routing groups each token keeps (topk_routing_group, "
                             "moe.py:585) | 3 |"));
  // decode's global_group_sizes[None, :] (moe.py:1237): a size-1 batch-shard dim, not P peers
  // (the op continues on the next line of the flow's 100 columns)
  CHECK_THAT(page("moe_sparse_ep_decode.md"),
             Catch::Contains("│ all_shard_local_sizes: act [1,E=2] i32    "));
  CHECK_THAT(page("moe_sparse_ep_decode.md"), Catch::Contains("│     ← dynamic_slice_in_dim("));
  CHECK_THAT(page("moe_sparse_ep_decode.md"), !Catch::Contains("[P=1,"));
  CHECK_THAT(page("moe_ring_of_experts.md"),
             Catch::Contains("│ output: act [B=1,S=4,P*M=32] bf16  ← reshape, as bf16"));
  const std::string pipeline = page("moe_pipeline_chunked.md");
  CHECK_THAT(pipeline,
             Catch::Contains("│ x_chunk: act [B=1,S=4,Mc=8] bf16  ← take(x, chunk_indices)"));
  CHECK_THAT(pipeline,
             Catch::Contains("gmm(\"UMc,EMcH->UH\", sorted_inputs, w0_chunk, local_group_size)"));
  // One fact per chunk's dispatch: each line says which chunk it is (issue 21: printed twice).
  CHECK_THAT(pipeline, Catch::Contains("- x: rows sent [device, peer] in `chunk_0/dispatch` = "));
  CHECK_THAT(pipeline, Catch::Contains("- x: rows sent [device, peer] in `chunk_1/dispatch` = "));
  // PR 3981's pipeline is shardtrace's model of a proposal: its collectives are not moe.py's.
  CHECK_THAT(pipeline, Catch::Contains("| all_gather | written in PR 3981 (as modelled) | fsdp |"));
  CHECK_THAT(pipeline, !Catch::Contains("| written in moe.py |"));
  CHECK_THAT(pipeline, !Catch::Contains("shardtrace's own"));
  // moe.py's lines where the pages cite them: the cut of slot 0 is 1620, and 1811 constrains
  // the inputs only in inference.
  CHECK_THAT(page("moe_dense_dropping.md"), Catch::Contains("return (moe.py:1620)"));
  CHECK_THAT(page("moe_dense_dropless.md"),
             Catch::Contains("moe.py:1811 (dropping, inference only) / 1911 (dropless)"));
  const std::string dropping = page("moe_dense_dropping.md");
  CHECK_THAT(dropping, Catch::Contains("│ combine_mask: act [B=4,S=4,E=4,C+1=3] bf16    "));
  CHECK_THAT(dropping,
             Catch::Contains("│     ← mul(softmax_probs, expert_token_position_in_capacity)"));
  // Context-free words only where they hold: no shard_map and no context groups here.
  CHECK_THAT(dropping, Catch::Contains("| `S` | sequence | 4 |"));
  CHECK_THAT(dropping, Catch::Contains("| `E` | experts | 4 |"));
  CHECK_THAT(dropping, Catch::Contains("contracts E (experts), C (expert capacity)\n"));
  CHECK_THAT(ragged,
             Catch::Contains("| `E` | experts; inside shard_map, this device's local experts | "
                             "8; 2 inside shard_map |"));
  CHECK_THAT(page("moe_dense_dropping_inference.md"),
             Catch::Contains("| `S` | sequence (per context group) | 4 |"));
}

// The masked loop's iterations and the pipeline's chunks record the same ops (the trace says
// they are iterations of one loop): the graph draws the first inside a subgraph naming the
// count. An iteration that differs (here one record's shape changed) unrolls the loop again.
TEST_CASE("mermaid draws a loop of alike iterations once", "[viz]") {
  const auto pages = VisualizationPages();
  for (const auto& [file, first, later, count] :
       {std::tuple{"moe_masked_loop_port.md", "expert_0", "expert_1", 4},
        std::tuple{"moe_pipeline_chunked.md", "chunk_0", "chunk_1", 2}}) {
    INFO(file);
    const auto v = std::find_if(pages.begin(), pages.end(),
                                [&file = file](const auto& p) { return p.file == file; });
    REQUIRE(v != pages.end());
    const RenderedPage page = RenderPage(*v);
    const std::string text = MermaidFlow(page.trace, page.spmd);
    const std::string stem = std::string(first).substr(0, std::string(first).size() - 2);
    CHECK_THAT(text, Catch::Contains(fmt::format("{} … {}_{}<br/>", first, stem, count - 1)));
    CHECK_THAT(text, Catch::Contains(fmt::format("×{}: each iteration records the same ops; {} "
                                                 "drawn\"]",
                                                 count, first)));
    // (clang 14 cannot capture a structured binding by reference: name it once)
    const std::string later_scope = later;
    const auto occurrences = [&later_scope](const std::string& in) {
      size_t n = 0;
      for (size_t at = in.find(later_scope); at != std::string::npos;
           at = in.find(later_scope, at + 1))
        ++n;
      return n;
    };
    CHECK(occurrences(text) <= 1);  // at most in the loop's title (chunk_0 … chunk_1)
    // The folded graph is smaller than the unrolled one.
    Trace changed = page.trace;
    const auto it = std::find_if(changed.tensors.begin(), changed.tensors.end(),
                                 [&later = later](const TensorRecord& t) {
                                   return t.scope.find(later) != std::string::npos;
                                 });
    REQUIRE(it != changed.tensors.end());
    it->shape.back() += 1;
    const std::string unrolled = MermaidFlow(changed, page.spmd);
    CHECK(unrolled.find(" … ") == std::string::npos);
    CHECK(occurrences(unrolled) >= 2);
    std::map<std::string, std::string> labels;
    for (const std::string& p : MermaidProblems(unrolled, &labels)) FAIL_CHECK(p);
    CHECK(std::count(text.begin(), text.end(), '\n') <
          std::count(unrolled.begin(), unrolled.end(), '\n'));
  }
}

// A name moe.py or MaxText reuses means what its place makes it: MlpBlock's `x` is the MLP's
// hidden state and its kernels have no expert dim; inside shard_map `x` is first this
// device's tokens, then the routed rows.
TEST_CASE("a tensor's meaning depends on where it stands", "[viz]") {
  TensorRecord mlp_x = Tensor(0, "x", "MlpBlock", "BSF", {4, 4, 32});
  CHECK(TensorMeaning(mlp_x, RevisionId::kSeed) ==
        "the MLP's hidden state, activation(inputs · wi_0) * (inputs · wi_1): wo's input");
  TensorRecord tokens = Tensor(1, "x", "RoutedMoE/sparse_matmul/wrapper", "BSM", {1, 4, 16});
  tokens.in_shard_map = true;
  CHECK(TensorMeaning(tokens, RevisionId::kSeed) ==
        "the tokens this device holds inside shard_map");
  TensorRecord rows = Tensor(2, "x", "RoutedMoE/sparse_matmul/wrapper", "UM", {32, 16});
  rows.in_shard_map = true;
  CHECK(TensorMeaning(rows, RevisionId::kSeed) ==
        "the routed rows this device holds, grouped by expert");
  CHECK(TensorMeaning(Tensor(3, "wi_0", "MlpBlock/wi_0", "MF", {16, 32}), RevisionId::kSeed) ==
        "MLP gated up-projection: embed -> hidden");
  CHECK(TensorMeaning(Tensor(4, "wi_0", "RoutedMoE", "EMH", {4, 16, 32}), RevisionId::kSeed) ==
        "expert gated up-projection: embed -> hidden, per expert");
  CHECK(TensorMeaning(Tensor(5, "output", "RoutedMoE/gate", "BSE", {4, 4, 4}), RevisionId::kSeed) ==
        "the gate's logits per token and expert");
}

// `(if ...)` is a run condition only: the load-balance probabilities run whenever moe.py is
// not inferring (moe.py:1704), and who reads them is a note (`# ...`), not a condition.
TEST_CASE("the pages state run conditions and notes apart", "[viz]") {
  const std::string dropless = ReadFile(SourcePath("visualizations/moe_dense_dropless.md"));
  CHECK_THAT(dropless, Catch::Contains(
                           "│ softmax_probs: act [B=4,S=4,E=4] bf16  ← softmax(gate_logits),      "
                           "                           │\n"
                           "│     as bf16  (if model_call_mode != inference)          "
                           "                                       │\n"
                           "│     # unused here: only load_balance_loss reads it (moe.py:1707), "
                           "load_balance_loss_weight = 0"));
  const std::string dropping = ReadFile(SourcePath("visualizations/moe_dense_dropping.md"));
  CHECK_THAT(dropping,
             Catch::Contains("┌─ RoutedMoE/dense_matmul (if model_call_mode != inference) ─"));
  CHECK_THAT(dropping,
             Catch::Contains("30. softmax_probs = mul(weights, combined_expert_mask)\n"
                             "        # = weights, which moe.py:1725 passes as softmax_probs, 0 "
                             "where dropped (1603)\n"));
  CHECK_THAT(ReadFile(SourcePath("visualizations/moe_dense_dropping_inference.md")),
             Catch::Contains("- `weights`: top-k weights scattered to [B,S,E] (0 for unchosen "
                             "experts); unused in inference: the masks take softmax_probs "
                             "(moe.py:1749)\n"));
  for (const VisualizationPage& v : VisualizationPages()) {
    INFO(v.file);
    CHECK_THAT(ReadFile(SourcePath("visualizations/" + v.file)),
               !Catch::Contains("(if load_balance_loss_weight > 0:"));
  }
}

// One Data Structures row per value: a cast or a constraint of the same name does not repeat it.
TEST_CASE("data structures merge the casts and constraints of one value", "[viz]") {
  const std::string dropless = ReadFile(SourcePath("visualizations/moe_dense_dropless.md"));
  // The three views of one value: what it is, where it is placed, what it means.
  CHECK_THAT(dropless,
             Catch::Contains("| `softmax_probs` | act | float32→bfloat16 | `[4,4,4] BSE` |"));
  CHECK_THAT(dropless, Catch::Contains("- `softmax_probs`: softmax of gate_logits over experts; "
                                       "unused here: only load_balance_loss reads it "
                                       "(moe.py:1707), load_balance_loss_weight = 0\n"));
  CHECK_THAT(dropless, Catch::Contains("| `index_batch` | act | int32 | `[4,1,1] B11` |"));
  CHECK_THAT(dropless, Catch::Contains("| `index_batch` | `('activation_batch', None, None)` | "
                                       "`P(('fsdp', 'expert'), None, None)` | [1,1,1] (4 B) | "
                                       "maybe_shard_with_logical |"));
  size_t rows = 0;
  for (size_t at = dropless.find("\n| `index_batch` |"); at != std::string::npos;
       at = dropless.find("\n| `index_batch` |", at + 1))
    ++rows;
  CHECK(rows == 2);  // once in each table
  const std::string mlp = ReadFile(SourcePath("visualizations/mlp_block.md"));
  CHECK_THAT(mlp, Catch::Contains("| `wi_0` | weight | float32→bfloat16 | `[16,32] MF` |"));
  CHECK_THAT(mlp, Catch::Contains("- `wi_0`: MLP gated up-projection: embed -> hidden\n"));
}

// moe.py's own formulas, not op names it never calls; shardtrace's own grouping scopes are
// bracketed; a slice to a finer sharding is listed apart from the collectives.
TEST_CASE("pages write ops as moe.py computes them and mark what is shardtrace's", "[viz]") {
  CHECK(ScopeText("RoutedMoE/sparse_matmul/wrapper/gmm_wi_0") ==
        "RoutedMoE/sparse_matmul/wrapper/[gmm_wi_0]");
  CHECK(ScopeText("RoutedMoE/sparse_matmul/wrapper/unpermute") ==
        "RoutedMoE/sparse_matmul/wrapper/unpermute");
  const std::string ring = ReadFile(SourcePath("visualizations/moe_ring_of_experts.md"));
  CHECK_THAT(ring,
             Catch::Contains("│ flatten_selected_experts: act [R=16] i32      "
                             "                               │\n"
                             "│     ← (flatten_selected_experts - roll_to_expert_id) % num_experts "
                             "          │"));
  CHECK_THAT(ring,
             Catch::Contains("37. x = where((arange(x.shape[0]) < sum(group_sizes))[:, None], "
                             "x, 0)\n"));
  CHECK_THAT(ring, Catch::Contains("┌─ RoutedMoE/sparse_matmul/wrapper/[gmm_wi_0] ─"));
  CHECK_THAT(ring,
             Catch::Contains("# RoutedMoE/sparse_matmul/wrapper/[gmm_wi_0]  (moe.py:1291 (gmm "
                             "of wi_0))\n"));
  CHECK_THAT(ReadFile(SourcePath("visualizations/moe_sparse_ragged_all_to_all.md")),
             Catch::Contains("│     ← cumsum(concat([0-row], A), axis=0)[shard_id], "
                             "A = all_shards_group_sizes │"));
  const std::string dropping = ReadFile(SourcePath("visualizations/moe_dense_dropping.md"));
  CHECK_THAT(dropping, Catch::Contains("(unnamed in moe.py: less_equal(expert_token_count, "
                                       "expert_capacity_per_batch), 1601)\n"));
  CHECK_THAT(dropping,
             Catch::Contains("Reshards without communication (not collectives: XLA slices a tensor "
                             "each device holds whole\ndown to a finer sharding, 0 B moved):\n\n"
                             "- `expert_token_count` P('fsdp', None, None, None) -> "
                             "P(('fsdp', 'expert'), None, None, None) over expert, for "
                             "`expert_token_count` in `RoutedMoE/dense_matmul/generate_masks`\n"));
  CHECK_THAT(dropping, !Catch::Contains("| slice | implied by XLA |"));
  // C is a Python int in moe.py: a constant, nothing XLA places.
  CHECK_THAT(dropping,
             Catch::Contains("| `expert_capacity_per_batch` |  |  |  | - (a constant) |"));
  CHECK_THAT(dropping,
             Catch::Contains("- `expert_capacity_per_batch`: C: slots per expert per batch "
                             "row; C = 2, a Python int in moe.py, not a traced array "
                             "(moe.py:1564)\n"));
  CHECK_THAT(BlockAfter(dropping, "<summary><b>The whole flow</b>"),
             !Catch::Contains("⇄ xla slice"));
  // The masked loop's per-expert weight is the port's two steps over the traced `weights`, not
  // an op called masked_weight.
  CHECK_THAT(
      ReadFile(SourcePath("visualizations/moe_masked_loop_port.md")),
      Catch::Contains("28. weighted_mask = weights[..., 0] * any(top_k_indices == 0, -1)\n"));
  // A loop's iterations repeating their casts list each dtype once.
  CHECK_THAT(ReadFile(SourcePath("visualizations/moe_masked_loop_port.md")),
             Catch::Contains("| `expert_output` | act | bfloat16→float32 | `[4,4,16] BSM` |"));
}

}  // namespace
}  // namespace shardtrace
