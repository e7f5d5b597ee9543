#include "emit/dot_graph.h"

#include <fmt/format.h>
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <map>
#include <memory>
#include <vector>

#include "emit/dim_letters.h"
#include "util/error.h"

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

void WriteScope(const Trace& trace, const ScopeNode& node, int depth, int& cluster,
                std::string& out) {
  const std::string indent(static_cast<size_t>(depth) * 2, ' ');
  for (const int id : node.tensors) WriteNode(trace.tensors[id], indent, out);
  for (const auto& child : node.children) {
    out += fmt::format("{}subgraph cluster_{} {{\n{}  label={}; style=rounded;\n", indent,
                       cluster++, indent, Quote(child->label));
    WriteScope(trace, *child, depth + 1, cluster, out);
    out += indent + "}\n";
  }
}

}  // namespace

std::string TraceToDot(const Trace& trace) {
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
                     Quote(fmt::format("{}: {} on {}", trace.block, trace.path, trace.mesh)));
  out += "  node [fontname=Helvetica, fontsize=10];\n  edge [fontsize=9];\n";
  int cluster = 0;
  WriteScope(trace, root, 1, cluster, out);
  for (const OpRecord& op : trace.ops)
    for (const int in : op.inputs)
      for (const int result : op.outputs)
        out += fmt::format("  t{} -> t{} [label={}{}];\n", in, result, Quote(OpLabel(trace, op)),
                           op.collective ? ", color=red, fontcolor=red" : "");
  return out + "}\n";
}

std::string TraceToSvg(const Trace& trace) {
  // cgraph parses the DOT text and gvc lays it out and renders it in-process.
  std::string dot = TraceToDot(trace);
  struct GraphCloser {
    void operator()(Agraph_t* g) const { agclose(g); }
  };
  std::unique_ptr<Agraph_t, GraphCloser> graph(agmemread(dot.data()));
  if (!graph) Fail("svg: Graphviz could not parse the generated graph");
  GVC_t* gvc = gvContext();
  std::string engine = "dot", format = "svg";
  if (gvLayout(gvc, graph.get(), engine.data()) != 0) {
    gvFreeContext(gvc);
    Fail("svg: Graphviz could not lay out the graph with the dot engine (libgvc6 provides it)");
  }
  char* data = nullptr;
  unsigned int length = 0;
  const int rendered = gvRenderData(gvc, graph.get(), format.data(), &data, &length);
  std::string svg = rendered == 0 && data ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gvc, graph.get());
  gvFreeContext(gvc);
  if (svg.empty()) Fail("svg: Graphviz could not render the graph to SVG");
  return svg;
}

}  // namespace shardtrace
