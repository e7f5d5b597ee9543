// The committed visualizations/ pages keep the conventions (visualization-conventions.md):
// every constraint step cites its moe.py statement, every page's layout, Mermaid graphs and
// tables hold, the collectives XLA implies appear with the trace's bytes, and `generate
// --check` finds the committed pages exactly as generate renders them.
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

TEST_CASE("constraint steps cite the moe.py statement that makes them", "[viz]") {
  constexpr RevisionId kSeed = RevisionId::kSeed;
  CHECK(MoeStatementLine(kSeed, "RoutedMoE/dense_matmul", "dispatch_mask",
                         "maybe_shard_with_logical") == "moe.py:1812");
  CHECK(MoeStatementLine(kSeed, "RoutedMoE/sparse_matmul", "w0_kernel", "maybe_shard_with_pspec") ==
        "moe.py:1434");
  CHECK(MoeStatementLine(kSeed, "RoutedMoE/sparse_matmul", "w0_kernel",
                         "maybe_shard_with_logical") == "moe.py:1409 / 1419");
  CHECK(MoeStatementLine(kSeed, "MlpBlock", "x", "maybe_shard_with_logical").empty());
  // The release constrains the kernels in its local _fsdp_all_gather (0.2.5's moe.py:3599).
  CHECK(MoeStatementLine(RevisionId::kRelease, "RoutedMoE/sparse_matmul", "w0_kernel",
                         "maybe_shard_with_pspec") == "moe.py:3599");
  const std::string page = ReadFile(SourcePath("visualizations/moe_dense_dropping.md"));
  // (a step wider than the page's 100 columns continues its note on the next line)
  CHECK(page.find("dispatch_mask = constrain(dispatch_mask, P('fsdp', None, None, None))\n"
                  "        # maybe_shard_with_logical, moe.py:1812\n") != std::string::npos);
  CHECK(page.find("gate_logits = constrain(output, P('fsdp', None, None))  # "
                  "maybe_shard_with_logical, moe.py:1689\n") != std::string::npos);
  // PR 3981's pipeline is not moe.py 313890777: no moe.py lines on its steps.
  CHECK(ReadFile(SourcePath("visualizations/moe_pipeline_chunked.md")).find("moe.py:14") ==
        std::string::npos);
}

TEST_CASE("every visualization page keeps the conventions", "[viz]") {
  for (const VisualizationPage& v : VisualizationPages()) {
    const RenderedPage page = RenderPage(v);
    INFO(v.file);
    // Committed and current agree (the CLI test below checks the same through generate).
    CHECK(page.text == ReadFile(SourcePath("visualizations/" + v.file)));

    // Invariants beyond shape trivia: every page has some of its path's own, each citing its
    // source line, and every one listed holds on the seeded run.
    int own = 0;
    for (const Invariant& inv : page.invariants) {
      INFO(ToString(inv.kind) << ": " << inv.result);
      CHECK(inv.result.rfind("holds: ", 0) == 0);
      const bool generic =
          inv.kind == InvariantKind::kOutputShape || inv.kind == InvariantKind::kPlacedBytes ||
          inv.kind == InvariantKind::kTokensRouted || inv.kind == InvariantKind::kDistinctChoices ||
          inv.kind == InvariantKind::kNonNegativeWeights;
      own += !generic && !inv.source.empty();
    }
    CHECK(own >= 2);

    // Code blocks read without scrolling.
    for (const std::string& line : CodeLines(page.text)) {
      INFO(line);
      CHECK(DisplayWidth(line) <= 100);
    }

    // Every explicit constraint of the trace sits in a ╔ box headed by its tensor, and the
    // flow draws no other ╔ box.
    const std::string flow = BlockAfter(page.text, "<summary><b>The whole flow</b>");
    REQUIRE(!flow.empty());
    const std::vector<std::string> heads = HeavyBoxHeads(flow);
    size_t constrained = 0;
    for (const TensorRecord& t : page.trace.tensors) {
      if (t.constraint == Constraint::kNone) continue;
      ++constrained;
      const std::string head =
          fmt::format("{}: {} ", t.name, t.kind == TensorKind::kWeight ? "weight" : "act");
      INFO(t.name << " (" << ToString(t.constraint) << ")");
      CHECK(std::any_of(heads.begin(), heads.end(),
                        [&](const std::string& h) { return h.rfind(head, 0) == 0; }));
    }
    CHECK(heads.size() == constrained);

    // No unconstrained activation shows a sharding: every PartitionSpec of the flow is inside
    // a ╔ box, and every line names weight or act.
    std::istringstream lines(flow);
    std::string line;
    while (std::getline(lines, line)) {
      INFO(line);
      // (a collective XLA implies names the reshard it performs, its wrapped lines indented)
      if (line.find("⇄ xla") != std::string::npos || line.find("│       ") != std::string::npos)
        continue;
      if (line.find("P(") != std::string::npos) CHECK(line.find("║") != std::string::npos);
    }

    // A tree for every rank >= 3 tensor the page names as needing one: the tensor is in the
    // trace with rank >= 3, and a "## Tree: ..." section names it.
    if (v.block == "moe") CHECK(!v.trees.empty());
    for (const std::string& name : v.trees) {
      INFO("tree of " << name);
      CHECK(std::any_of(
          page.trace.tensors.begin(), page.trace.tensors.end(),
          // (inside shard_map the record is one device's block: the devices are a dim more)
          [&](const TensorRecord& t) {
            return t.name == name && t.shape.size() + (t.in_shard_map ? 1 : 0) >= 3;
          }));
      std::istringstream md(page.text);
      std::string heading;
      bool drawn = false;
      while (std::getline(md, heading)) {
        if (heading.rfind("## Tree: ", 0) != 0) continue;
        const size_t at = heading.find(name);
        // the name as a whole word of the heading ("weights" is not "top_k_weights")
        for (size_t p = at; p != std::string::npos; p = heading.find(name, p + 1)) {
          const char before = heading[p - 1],
                     after = p + name.size() < heading.size() ? heading[p + name.size()] : ' ';
          drawn |= (before == ' ' || before == ',') && (after == ' ' || after == ',');
        }
      }
      CHECK(drawn);
    }

    // The header names the source the page models and the base.yml it traced.
    CHECK(page.text.find("| source | ") != std::string::npos);
    CHECK(page.text.find("| config | ") != std::string::npos);
    CHECK(page.text.find("base.yml") != std::string::npos);

    // The Mermaid graphs of the same trace, one per part of the flow, each structurally
    // valid; together they draw every node once (a part's `↑` stand-ins aside).
    const std::vector<std::string> blocks = MermaidBlocks(page.text);
    const std::vector<std::pair<std::string, std::string>> graphs =
        PageGraphs(page.trace, page.spmd);
    REQUIRE(blocks.size() == graphs.size());
    for (size_t g = 0; g < blocks.size(); ++g) CHECK(blocks[g] == graphs[g].second);
    std::string block;
    std::map<std::string, std::string> labels;
    for (const std::string& part : blocks) {
      std::map<std::string, std::string> part_labels;
      for (const std::string& p : MermaidProblems(part, &part_labels)) FAIL_CHECK(p);
      for (const auto& [id, label] : part_labels) {
        if (id[0] == 'i') continue;
        if (labels.count(id)) FAIL_CHECK("node drawn in two parts: " << id);
        labels[id] = label;
      }
      block += part;
    }
    // Each explicit constraint is a marked node naming its statement and spec; each
    // collective is a node of its own (a loop drawn once shows its first iteration's).
    const auto folded = [&](const std::string& scope) {
      for (const LoopIteration& it : page.trace.loop_iterations)
        if (it.index > 0 &&
            block.find(fmt::format("{0}_0 … {0}_{1}<br/>", it.loop, it.count - 1)) !=
                std::string::npos &&
            (scope == it.scope || scope.starts_with(it.scope + "/")))
          return true;
      return false;
    };
    size_t collectives = 0, drawn_constraints = 0;
    for (const OpRecord& op : page.trace.ops) collectives += op.collective && !folded(op.scope);
    for (const TensorRecord& t : page.trace.tensors)
      drawn_constraints += t.constraint != Constraint::kNone && !folded(t.scope);
    size_t marked = 0, exchange = 0;
    for (const auto& [id, label] : labels) {
      marked += label.find("<br/>" + std::string("maybe_shard")) != std::string::npos ||
                label.find("<br/>kernel_axes") != std::string::npos ||
                label.find("<br/>shard_map_") != std::string::npos;
      exchange += id[0] == 'c';
    }
    CHECK(marked == drawn_constraints);
    // A local slice moves nothing: not drawn as a collective (the page lists it apart).
    CHECK(block.find("⇄ xla slice") == std::string::npos);
    CHECK(exchange == collectives);
    // A dtype cast is not a node: it folds into its tensor's label (`f32→bf16`), as the ASCII
    // flow folds it, whenever it keeps the shape and condition and restates the same tensor
    // (its name, or a weight cast to the compute dtype) that nothing else reads.
    std::vector<int> readers(page.trace.tensors.size(), 0);
    for (const OpRecord& op : page.trace.ops)
      for (const int in : std::set<int>(op.inputs.begin(), op.inputs.end())) ++readers[in];
    size_t casts = 0;
    for (const OpRecord& op : page.trace.ops) {
      if (op.kind != OpKind::kAstype || op.inputs.size() != 1 || op.outputs.size() != 1) continue;
      const TensorRecord& from = page.trace.tensors[op.inputs[0]];
      const TensorRecord& to = page.trace.tensors[op.outputs[0]];
      if (from.shape != to.shape || from.condition_clauses != to.condition_clauses ||
          (from.name != to.name && from.kind != TensorKind::kWeight) ||
          (readers[from.id] != 1 && from.dtype != to.dtype))
        continue;
      ++casts;
      const std::string head =
          (from.name == to.name ? to.name : from.name + " → " + to.name) + ": ";
      const std::string change =
          from.dtype == to.dtype ? "" : ShortDtype(from.dtype) + "→" + ShortDtype(to.dtype);
      INFO("cast of " << from.stable_id << " to " << to.stable_id);
      CHECK(std::any_of(labels.begin(), labels.end(), [&](const auto& node) {
        const std::string& label = node.second;
        const size_t at = label.find(head);
        return node.first[0] == 'n' &&
               (at == 0 ||
                (at != std::string::npos && at >= 3 && label.compare(at - 3, 3, " → ") == 0)) &&
               label.find(change, at) != std::string::npos;
      }));
    }
    CHECK(casts > 0);
  }
}

// The pages show what XLA inserts (OpRecord::implied) with the bytes the trace records: the flow
// line, a Mermaid node of its own and a row of the collectives table.
TEST_CASE("pages show the collectives XLA implies with the trace's bytes", "[viz]") {
  const std::vector<std::tuple<std::string, CollectiveKind, std::string, std::vector<std::string>>>
      cases = {
          {"moe_sparse_megablox.md", CollectiveKind::kAllGather, "fsdp", {"wi_0", "wi_1", "wo"}},
          {"moe_dense_dropless.md", CollectiveKind::kAllGather, "fsdp", {"wi_0", "wi_1", "wo"}},
          {"moe_dense_dropless.md", CollectiveKind::kPsum, "expert", {"output"}},
      };
  for (const auto& [file, kind, axis, tensors] : cases) {
    const auto pages = VisualizationPages();
    const auto v = std::find_if(pages.begin(), pages.end(),
                                [&file = file](const auto& p) { return p.file == file; });
    REQUIRE(v != pages.end());
    const RenderedPage page = RenderPage(*v);
    for (const std::string& name : tensors) {
      INFO(file << ": " << HloName(kind) << " over " << axis << " of " << name);
      int found = 0;
      for (const OpRecord& op : page.trace.ops)
        for (const ImpliedCollective& c : page.spmd.implied_at(op.id)) {
          if (c.kind != kind || page.trace.tensors[c.tensor].name != name) continue;
          if (c.axes != std::vector<std::string>{axis}) continue;
          ++found;
          CHECK(c.bytes_per_device > 0);
          const std::string bytes = HumanBytes(c.bytes_per_device);
          CHECK_THAT(page.text, Catch::Contains(fmt::format("⇄ xla {} over {}: {} ", HloName(kind),
                                                            axis, name)));
          CHECK_THAT(page.text,
                     Catch::Contains(fmt::format("⇄ xla {} over {}<br/>{} {}/device\"]):::implied",
                                                 HloName(kind), axis, name, bytes)));
          CHECK_THAT(page.text,
                     Catch::Contains(fmt::format("| {} | implied by XLA | {} | {} | `{}` |",
                                                 HloName(kind), axis, c.participants, name)));
          CHECK_THAT(page.text,
                     Catch::Contains(fmt::format("`{}` | {} | {} |\n", op.scope, bytes, bytes)));
        }
      CHECK(found == 1);
    }
  }
}

TEST_CASE("generate --check passes on the committed visualizations", "[viz][e2e]") {
  const CommandResult r =
      testing::RunShardtraceBinary({"generate", "--check", "--out", SourcePath("visualizations")});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("is up to date (14 files)") != std::string::npos);
}

TEST_CASE("generate --check names a stale file and exits 1", "[viz]") {
  namespace fs = std::filesystem;
  const TempDir dir;
  for (const auto& entry : fs::directory_iterator(SourcePath("visualizations")))
    fs::copy_file(entry.path(), dir.path() / entry.path().filename());
  const std::string stale = dir.File("moe_dense_dropping.md");
  dir.Write("moe_dense_dropping.md", ReadFile(stale) + "edited by hand\n");

  const CommandResult r = RunShardtrace({"generate", "--check", "--out", dir.path().string()});
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK(r.out.find("differs  " + stale) != std::string::npos);
  CHECK(r.out.find("is stale: moe_dense_dropping.md; run shardtrace generate --out ") !=
        std::string::npos);
  CHECK(ReadFile(stale).find("edited by hand") != std::string::npos);  // --check writes nothing

  // generate rewrites it, and the directory then checks clean.
  const CommandResult fix = RunShardtrace({"generate", "--out", dir.path().string()});
  CHECK(fix.status == 0);
  CHECK(ReadFile(stale) == ReadFile(SourcePath("visualizations/moe_dense_dropping.md")));
  CHECK(RunShardtrace({"generate", "--check", "--out", dir.path().string()}).status == 0);
}

TEST_CASE("generate --check reports missing files", "[viz]") {
  const TempDir dir;
  const CommandResult r = RunShardtrace({"generate", "--check", "--out", dir.path().string()});
  CHECK(r.status == 1);
  CHECK(r.out.find("missing  " + dir.File("mlp_block.md")) != std::string::npos);
  CHECK(dir.Entries().empty());
}

}  // namespace
}  // namespace shardtrace
