#include "emit/dot_graph.h"

#include <fmt/format.h>
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <graphviz/gvplugin.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "emit/dim_letters.h"
#include "util/contained_run.h"
#include "util/error.h"

// The two Graphviz plugins a layout needs, linked into the binary (CMakeLists.txt) and
// registered as builtins: the dot layout engine and the core renderers (SVG).
extern "C" {
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;
}

namespace shardtrace {
namespace {

// A DOT string literal: quotes and backslashes escaped, except the "\n" line breaks the
// labels use on purpose.
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += "\\n";
      ++i;
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string TensorLabel(const TensorRecord& t) {
  std::string label = fmt::format("{}\\n{} {} {}", t.name, ToString(t.dtype),
                                  ShapeToString(t.shape), DimsText(t.dims));
  if (t.partition_spec) label += fmt::format("\\n{}", t.partition_spec->ToString());
  if (t.in_shard_map) label += "\\n(per device)";
  return label;
}

std::string OpLabel(const Trace& trace, const OpRecord& op) {
  if (!op.equation.empty()) return fmt::format("{} {}", op.Name(), PageEquation(trace, op));
  if (op.collective) {
    std::string axes;
    for (const std::string& a : op.collective->axes) axes += (axes.empty() ? "" : ",") + a;
    return fmt::format("{} over {}", op.Name(), axes);
  }
  return op.Name();
}

// Scopes form a tree ("RoutedMoE" > "sparse_matmul" > "wrapper"); each node lists the
// tensors recorded directly in it, in program order, and its children in first-seen order.
struct ScopeNode {
  std::string label;
  std::vector<int> tensors;
  std::vector<std::unique_ptr<ScopeNode>> children;
  std::map<std::string, ScopeNode*> by_name;
};

ScopeNode* Child(ScopeNode* parent, const std::string& name) {
  if (const auto it = parent->by_name.find(name); it != parent->by_name.end()) return it->second;
  parent->children.push_back(std::make_unique<ScopeNode>());
  ScopeNode* child = parent->children.back().get();
  child->label = name;
  parent->by_name[name] = child;
  return child;
}

void WriteNode(const TensorRecord& t, const std::string& indent, std::string& out) {
  std::string attrs = fmt::format("label={}, shape={}", Quote(TensorLabel(t)),
                                  t.kind == TensorKind::kWeight ? "box" : "ellipse");
  if (t.kind == TensorKind::kWeight) attrs += ", style=filled, fillcolor=lightblue";
  if (t.constraint != Constraint::kNone) attrs += ", peripheries=2";
  if (t.in_shard_map) attrs += ", color=darkgreen";
  out += fmt::format("{}t{} [{}];\n", indent, t.id, attrs);
}

// How the graph is drawn: the scopes as boxes (clusters) or not at all, and dot's ranking
// (newrank ranks the whole graph at once, which avoids some cluster layouts' failures).
struct DotStyle {
  bool clusters = true;
  bool newrank = false;
  std::string note;  // a line under the graph's title saying what was left out, if anything
};

void WriteScope(const Trace& trace, const ScopeNode& node, int depth, int& cluster,
                const DotStyle& style, std::string& out) {
  const std::string indent(static_cast<size_t>(depth) * 2, ' ');
  for (const int id : node.tensors) WriteNode(trace.tensors[id], indent, out);
  for (const auto& child : node.children) {
    if (style.clusters) {
      out += fmt::format("{}subgraph cluster_{} {{\n{}  label={}; style=rounded;\n", indent,
                         cluster++, indent, Quote(child->label));
      WriteScope(trace, *child, depth + 1, cluster, style, out);
      out += indent + "}\n";
    } else {
      WriteScope(trace, *child, depth, cluster, style, out);
    }
  }
}

std::string DotText(const Trace& trace, const DotStyle& style) {
  ScopeNode root;
  for (const TensorRecord& t : trace.tensors) {
    ScopeNode* node = &root;
    size_t start = 0;
    while (start < t.scope.size()) {
      const size_t slash = t.scope.find('/', start);
      const size_t end = slash == std::string::npos ? t.scope.size() : slash;
      node = Child(node, t.scope.substr(start, end - start));
      start = end + 1;
    }
    node->tensors.push_back(t.id);
  }
  std::string out = "digraph shardtrace {\n";
  out += fmt::format("  label={};\n  rankdir=TB;\n  fontname=Helvetica;\n",
                     Quote(fmt::format("{}: {} on {}{}", trace.block, trace.path, trace.mesh,
                                       style.note.empty() ? "" : "\\n" + style.note)));
  if (style.newrank) out += "  newrank=true;\n";
  out += "  node [fontname=Helvetica, fontsize=10];\n  edge [fontsize=9];\n";
  int cluster = 0;
  WriteScope(trace, root, 1, cluster, style, out);
  for (const OpRecord& op : trace.ops)
    for (const int in : op.inputs)
      for (const int result : op.outputs)
        out += fmt::format("  t{} -> t{} [label={}{}];\n", in, result, Quote(OpLabel(trace, op)),
                           op.collective ? ", color=red, fontcolor=red" : "");
  return out + "}\n";
}

// cgraph parses the DOT text and gvc lays it out and renders it, in the calling process.
std::string LayOutInProcess(const std::string& dot_text) {
  std::string dot = dot_text;
  struct GraphCloser {
    void operator()(Agraph_t* g) const { agclose(g); }
  };
  std::unique_ptr<Agraph_t, GraphCloser> graph(agmemread(dot.data()));
  if (!graph) Fail("the generated graph does not parse");
  // Only the linked-in plugins, never demand-loaded ones: Graphviz does not look for its
  // config6a file or dlopen a plugin, so a copy of the binary with its libraries (make wheel)
  // lays out graphs on a machine without Graphviz, and text is measured by Graphviz's own
  // font metrics wherever it runs (no pango plugin), so the SVG is the same on every machine.
  lt_symlist_t builtins[] = {
      {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
      {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
      {nullptr, nullptr}};
  GVC_t* gvc = gvContextPlugins(builtins, 0);
  std::string engine = "dot", format = "svg";
  if (gvLayout(gvc, graph.get(), engine.data()) != 0) {
    gvFreeContext(gvc);
    Fail("no dot engine (the linked-in dot layout plugin did not register)");
  }
  char* data = nullptr;
  unsigned int length = 0;
  const int rendered = gvRenderData(gvc, graph.get(), format.data(), &data, &length);
  std::string svg = rendered == 0 && data ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gvc, graph.get());
  gvFreeContext(gvc);
  if (svg.empty()) Fail("no SVG came out of the renderer");
  return svg;
}

}  // namespace

std::string TraceToDot(const Trace& trace) { return DotText(trace, DotStyle{}); }

std::string TraceToSvg(const Trace& trace) {
  // Graphviz's dot layout aborts (a double free after "trouble in init_rank") or loops on
  // some cluster graphs, e.g. the masked loop's: each layout runs in a child process under a
  // time and memory limit, so such a graph costs a retry, not the process. The retries keep
  // every node and edge: first with dot's newrank, then without the scope boxes.
  // dot's layout time grows much faster than the graph, and the scope boxes (clusters) make
  // it worse. Measured on 2 loaded cores: 563 edges with boxes take 1.0 s of CPU, but the ring
  // of experts with 32 embedding chunks (823 edges) 7.4 s, 14 s with its retries; without
  // boxes 823 edges take 0.8 s, 1,012 1.5 s, 1,403 23 s. So a graph past kMaxBoxedEdges is
  // drawn without its scope boxes, saying so under its title, and one past kMaxEdges is
  // refused before any layout is tried.
  constexpr size_t kMaxBoxedEdges = 600;
  constexpr size_t kMaxEdges = 1000;
  size_t edges = 0;
  for (const OpRecord& op : trace.ops) edges += op.inputs.size() * op.outputs.size();
  if (edges > kMaxEdges)
    Fail(
        "svg: the graph has {} tensors and {} edges; Graphviz's dot layout is only run on up to "
        "{} edges; --format dot writes the graph for another layout tool, --format mermaid draws "
        "the same flow",
        trace.tensors.size(), edges, kMaxEdges);
  std::vector<DotStyle> styles = {DotStyle{},
                                  DotStyle{.clusters = true, .newrank = true, .note = ""},
                                  DotStyle{.clusters = false, .newrank = false, .note = ""}};
  if (edges > kMaxBoxedEdges)
    styles = {DotStyle{.clusters = false,
                       .newrank = false,
                       .note = fmt::format("(scope boxes left out: {} edges, more than {})", edges,
                                           kMaxBoxedEdges)}};
  // A backstop for a graph these sizes misjudge: at most 10 s of layout in all (it was 30 s),
  // each attempt getting what is left of it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string failures;
  for (const DotStyle& style : styles) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left < 1) break;
    ContainedLimits limits;
    limits.seconds = static_cast<int>(left);
    const std::string dot = DotText(trace, style);
    const ContainedResult laid_out = RunContained([&dot] { return LayOutInProcess(dot); }, limits);
    if (laid_out.ok) return laid_out.output;
    failures += (failures.empty() ? "" : "; ") + laid_out.failure;
  }
  Fail(
      "svg: Graphviz's dot layout of this trace's graph failed ({}); --format dot writes the "
      "graph for another layout tool, --format mermaid draws the same flow",
      failures);
}

}  // namespace shardtrace
