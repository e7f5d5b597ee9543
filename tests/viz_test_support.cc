#include "viz_test_support.h"

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

namespace shardtrace::viz_testing {

using testing::ReadFile;

// A line as code points, so box corners can be found by column.
std::vector<std::u32string> Grid(const std::string& text) {
  std::vector<std::u32string> rows(1);
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    i += len;
    if (cp == U'\n') {
      rows.emplace_back();
    } else {
      rows.back() += cp;
    }
  }
  return rows;
}

char32_t At(const std::vector<std::u32string>& grid, size_t row, size_t col) {
  return row < grid.size() && col < grid[row].size() ? grid[row][col] : U' ';
}

// Every box that opens with `tl` at (row, col) closes: the top edge runs to `tr`, each
// following row has `v` at both edge columns until the row with `bl` ... `br`. Returns the
// number of boxes checked.
int CheckBoxes(const std::vector<std::u32string>& grid, char32_t tl, char32_t tr, char32_t bl,
               char32_t br, char32_t v) {
  int boxes = 0;
  for (size_t r = 0; r < grid.size(); ++r) {
    for (size_t c = 0; c < grid[r].size(); ++c) {
      if (grid[r][c] != tl) continue;
      ++boxes;
      const size_t right = grid[r].find(tr, c);
      INFO("box at row " << r << ", column " << c);
      REQUIRE(right != std::u32string::npos);
      size_t end = r + 1;
      while (end < grid.size() && At(grid, end, c) != bl) {
        INFO("row " << end);
        CHECK(At(grid, end, c) == v);
        CHECK(At(grid, end, right) == v);
        ++end;
      }
      REQUIRE(end < grid.size());
      CHECK(At(grid, end, right) == br);
    }
  }
  return boxes;
}

TensorRecord Tensor(int id, std::string name, std::string scope, std::string dims, Shape shape) {
  TensorRecord t;
  t.id = id;
  t.name = std::move(name);
  t.scope = std::move(scope);
  t.dims = std::move(dims);
  t.shape = std::move(shape);
  t.dtype = DType::kBfloat16;
  return t;
}

// The SPMD result of a hand-built trace: every tensor whole on each device, no collective
// inserted (SmallSpmd adds the one sharding SmallTrace writes).
SpmdResult Whole(const Trace& trace) {
  SpmdResult spmd;
  for (const TensorRecord& t : trace.tensors)
    spmd.tensors.push_back(
        {Placement::kUnresolved, std::nullopt, t.shape, TensorBytes(t.shape, t.dtype)});
  spmd.implied.resize(trace.ops.size());
  return spmd;
}

// inputs -> gate einsum -> a constrained gate_logits -> a conditional mask -> an
// all-gathered group_sizes, then the `gate` scope entered again.
Trace SmallTrace() {
  Trace trace;
  trace.block = "moe";
  trace.path = "dense_matmul (token dropping)";
  trace.tensors.push_back(Tensor(0, "inputs", "", "BSM", {2, 4, 8}));
  trace.input = 0;
  trace.tensors.push_back(Tensor(1, "kernel", "RoutedMoE/gate", "ME", {8, 4}));
  trace.tensors.back().kind = TensorKind::kWeight;
  trace.tensors.push_back(Tensor(2, "output", "RoutedMoE/gate", "BSE", {2, 4, 4}));
  TensorRecord logits = Tensor(3, "gate_logits", "RoutedMoE/dense_matmul", "BSE", {2, 4, 4});
  logits.constraint = Constraint::kShardWithLogical;
  logits.logical_axes = LogicalNames({"activation_batch", "activation_length", nullptr});
  logits.partition_spec = PartitionSpec({{"fsdp"}, {}, {}});
  trace.tensors.push_back(logits);
  TensorRecord mask = Tensor(4, "dispatch_mask", "RoutedMoE/dense_matmul", "BSEC", {2, 4, 4, 2});
  mask.condition = "capacity_factor > 0";
  mask.condition_clauses = {mask.condition};
  trace.tensors.push_back(mask);
  trace.tensors.push_back(Tensor(5, "group_sizes", "RoutedMoE/dense_matmul", "PE", {2, 4}));
  trace.tensors.push_back(Tensor(6, "output", "RoutedMoE/gate", "BSE", {2, 4, 4}));
  trace.ops.push_back(OpRecord{0,
                               OpKind::kEinsum,
                               "BSM,ME->BSE",
                               {0, 1},
                               {2},
                               {},
                               "RoutedMoE/gate",
                               {},
                               "",
                               ParseEinsum("BSM,ME->BSE"),
                               /*stable_id=*/""});
  trace.ops.push_back(OpRecord{1,
                               OpKind::kShardingConstraint,
                               "",
                               {2},
                               {3},
                               {},
                               "",
                               {},
                               "",
                               std::nullopt,
                               /*stable_id=*/""});
  CollectiveRecord gather;
  gather.kind = CollectiveKind::kAllGather;
  gather.axes = {"expert"};
  gather.participants = 2;
  gather.bytes_sent = {16, 16};
  gather.bytes_received = {16, 16};
  trace.ops.push_back(OpRecord{
      2, OpKind::kAllGather, "", {4}, {5}, {}, "", gather, "", std::nullopt, /*stable_id=*/""});
  return trace;
}

// gate_logits P('fsdp', None, None) on fsdp=2: [1,4,4] bfloat16 per device.
SpmdResult SmallSpmd(const Trace& trace) {
  SpmdResult spmd = Whole(trace);
  spmd.tensors[3] = {Placement::kExplicit, std::nullopt, {1, 4, 4}, 32};
  return spmd;
}

// The lines of every fenced code block of a markdown document.
std::vector<std::string> CodeLines(const std::string& markdown) {
  std::vector<std::string> out;
  std::istringstream lines(markdown);
  std::string line;
  bool in_fence = false;
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) {
      in_fence = !in_fence;
    } else if (in_fence) {
      out.push_back(line);
    }
  }
  return out;
}

// The text of the ```text block that follows `heading`.
std::string BlockAfter(const std::string& markdown, const std::string& heading) {
  const size_t at = markdown.find(heading);
  if (at == std::string::npos) return "";
  const size_t start = markdown.find("```text\n", at);
  if (start == std::string::npos) return "";
  const size_t end = markdown.find("\n```", start + 8);
  return markdown.substr(start + 8, end - start - 8 + 1);
}

std::string Utf8(const std::u32string& text) {
  std::string out;
  for (const char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// The first line inside each double-line box of a flow (boxes may stand side by side):
// the constrained tensor's head.
std::vector<std::string> HeavyBoxHeads(const std::string& flow) {
  const std::vector<std::u32string> grid = Grid(flow);
  std::vector<std::string> heads;
  for (size_t r = 0; r + 1 < grid.size(); ++r)
    for (size_t c = 0; c < grid[r].size(); ++c) {
      if (grid[r][c] != U'╔') continue;
      const size_t right = grid[r].find(U'╗', c);
      if (At(grid, r + 1, c) != U'║' || right == std::u32string::npos) continue;
      heads.push_back(Utf8(grid[r + 1].substr(c + 2, right - c - 2)));
    }
  return heads;
}

// The text of the ```mermaid block of a page.
// Every ```mermaid block of the page, in order.
std::vector<std::string> MermaidBlocks(const std::string& markdown) {
  std::vector<std::string> out;
  for (size_t start = markdown.find("```mermaid\n"); start != std::string::npos;
       start = markdown.find("```mermaid\n", start + 1)) {
    const size_t end = markdown.find("\n```", start + 11);
    out.push_back(markdown.substr(start + 11, end - start - 11 + 1));
  }
  return out;
}

// A strict structural reading of the flowcharts MermaidFlow writes (the Makefile's
// mermaid-check runs mermaid.js's own parser on the pages): `flowchart TD` first; every
// subgraph closed; node statements `id["label"]`, `id[["label"]]` or
// `id(["label"]):::collective` (a label may continue on the next line after a `<br/>`) with
// no bare quote inside a label; edges `a --> b` between defined ids; the `[[...]]` nodes
// exactly those of `class ... constrained`, and the nodes labelled `: weight` exactly those of
// `class ... weight` (the legend's "weights shaded"). Returns the problems found.
std::vector<std::string> MermaidProblems(const std::string& text,
                                         std::map<std::string, std::string>* labels) {
  std::vector<std::string> problems;
  std::vector<std::string> statements;
  {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      const std::string stmt = line.substr(std::min(line.size(), line.find_first_not_of(' ')));
      if (!statements.empty() && statements.back().ends_with("<br/>")) {
        statements.back() += stmt;
      } else {
        statements.push_back(stmt);
      }
    }
  }
  // A page's part of the flow starts with an init line keeping subgraph titles clear.
  if (!statements.empty() && statements.front().rfind("%%{init: ", 0) == 0)
    statements.erase(statements.begin());
  if (statements.empty() || statements.front() != "flowchart TD")
    problems.push_back("the first line is not flowchart TD");
  int depth = 0;
  std::vector<std::pair<std::string, std::string>> edges;
  std::set<std::string> double_bordered, constrained_class, weight_labelled, weight_class;
  const std::regex node(R"re(^(n|c)(\d+)(\[\[|\(\[|\[)"([^"]*)"(\]\]|\]\)|\])(:::collective)?$)re");
  // a collective XLA implies: its own stadium node, dashed edges
  const std::regex implied(R"re(^x\d+_\d+\(\["⇄ xla [^"]*"\]\):::implied$)re");
  const std::regex implied_edge(R"(^(i?[ncx]\d+(?:_\d+)?) -\.-> (n\d+|x\d+_\d+)$)");
  // a part's stand-in for a node of another part, and the invisible links stacking pieces
  const std::regex ghost(R"re(^(i[ncx]\d+(?:_\d+)?)\["↑ [^"]*"\]:::ghost$)re");
  const std::regex stack(R"(^(i?[ncx]\d+(?:_\d+)?) ~~~ (i?[ncx]\d+(?:_\d+)?)$)");
  // a scope, or a loop drawn once (may hold a <br/>)
  const std::regex subgraph(R"re(^subgraph [sl]\d+\["[^"]*"\]$)re");
  const std::regex edge(R"(^(i?[ncx]\d+(?:_\d+)?) --> ([nc]\d+)$)");
  const std::regex class_def(R"(^classDef \w+ [\w:#,-]+$)");
  const std::regex class_use(R"(^class ((n\d+,)*n\d+) (constrained|weight)$)");
  for (size_t i = 1; i < statements.size(); ++i) {
    const std::string& stmt = statements[i];
    std::smatch m;
    if (std::regex_match(stmt, subgraph)) {
      ++depth;
    } else if (stmt == "end") {
      if (--depth < 0) problems.push_back("end without subgraph");
    } else if (std::regex_match(stmt, m, node)) {
      const std::string id = m[1].str() + m[2].str();
      if (labels->count(id)) problems.push_back("node defined twice: " + id);
      (*labels)[id] = m[4].str();
      const std::string open = m[3].str(), close = m[5].str();
      if ((open == "[[") != (close == "]]") || (open == "([") != (close == "])"))
        problems.push_back("unbalanced shape: " + stmt);
      if ((open == "([") != (m[1].str() == "c") || (open == "([") != m[6].matched)
        problems.push_back("collectives and only they are ([...]):::collective: " + stmt);
      if (open == "[[") double_bordered.insert(id);
      if (m[4].str().find(": weight<br/>") != std::string::npos) weight_labelled.insert(id);
    } else if (std::regex_match(stmt, m, edge)) {
      edges.emplace_back(m[1].str(), m[2].str());
    } else if (std::regex_match(stmt, implied)) {
      const std::string id = stmt.substr(0, stmt.find('('));
      if (labels->count(id)) problems.push_back("node defined twice: " + id);
      (*labels)[id] = stmt;
    } else if (std::regex_match(stmt, m, implied_edge)) {
      edges.emplace_back(m[1].str(), m[2].str());
    } else if (std::regex_match(stmt, m, ghost)) {
      if (labels->count(m[1].str())) problems.push_back("node defined twice: " + m[1].str());
      (*labels)[m[1].str()] = stmt;
    } else if (std::regex_match(stmt, m, stack)) {
      if (!labels->count(m[1].str()) || !labels->count(m[2].str()))
        problems.push_back("a link to an undefined node: " + stmt);
    } else if (std::regex_match(stmt, m, class_use)) {
      std::set<std::string>& into = m[3].str() == "constrained" ? constrained_class : weight_class;
      std::istringstream ids(m[1].str());
      std::string id;
      while (std::getline(ids, id, ',')) into.insert(id);
    } else if (!std::regex_match(stmt, class_def)) {
      problems.push_back("not a statement MermaidFlow writes: " + stmt);
    }
  }
  if (depth != 0) problems.push_back("unclosed subgraph");
  for (const auto& [from, to] : edges)
    if (!labels->count(from) || !labels->count(to))
      problems.push_back("edge to an undefined node: " + from + " --> " + to);
  if (double_bordered != constrained_class)
    problems.push_back("the [[...]] nodes are not the class constrained ones");
  if (weight_labelled != weight_class)
    problems.push_back("the nodes labelled weight are not the class weight ones (shaded)");
  // Edges follow data dependencies: the graph has no cycle (a collective reducing a tensor in
  // place sits between the op's operands and its result, not in a loop `n -.-> x -.-> n`),
  // and every collective, written (c) or implied (x), has an edge in and an edge out.
  std::map<std::string, std::vector<std::string>> next;
  std::map<std::string, int> in_degree, out_degree;
  for (const auto& [from, to] : edges) {
    next[from].push_back(to);
    ++out_degree[from];
    ++in_degree[to];
    if (from == to) problems.push_back("self-loop: " + from);
  }
  for (const auto& [id, label] : *labels)
    if ((id[0] == 'c' || id[0] == 'x') && (!in_degree[id] || !out_degree[id]))
      problems.push_back("a collective without an edge in and an edge out: " + id);
  std::map<std::string, int> state;  // 1 on the DFS stack, 2 done
  std::function<void(const std::string&)> visit = [&](const std::string& id) {
    state[id] = 1;
    for (const std::string& to : next[id]) {
      if (state[to] == 1) problems.push_back("a cycle through " + id + " --> " + to);
      if (!state[to]) visit(to);
    }
    state[id] = 2;
  };
  for (const auto& [id, label] : *labels)
    if (!state[id]) visit(id);
  return problems;
}

}  // namespace shardtrace::viz_testing
