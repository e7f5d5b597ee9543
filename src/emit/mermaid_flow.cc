#include "emit/mermaid_flow.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "emit/ascii_flow.h"
#include "emit/human_bytes.h"
#include "emit/text_table.h"
#include "emit/xla_spmd_text.h"

namespace shardtrace {
namespace {

// Mermaid labels are double-quoted: a quote inside is written as an entity.
std::string Quote(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"') {
      out += "#quot;";
    } else {
      out += c;
    }
  }
  return out;
}

class MermaidRenderer {
 public:
  explicit MermaidRenderer(const Trace& trace) : trace_(trace) {
    producer_.assign(trace.tensors.size(), -1);
    for (size_t i = 0; i < trace.ops.size(); ++i)
      for (const int out : trace.ops[i].outputs)
        if (out >= 0 && out < static_cast<int>(producer_.size()))
          producer_[out] = static_cast<int>(i);
    node_of_.assign(trace.tensors.size(), -1);
    for (size_t i = 0; i < trace.tensors.size(); ++i) Place(static_cast<int>(i));
  }

  std::string Render() const {
    std::string out = "flowchart TD\n";
    std::vector<std::string> constrained, weights;
    for (size_t s = 0; s < stages_.size(); ++s) {
      const Stage& stage = stages_[s];
      const bool framed = !stage.scope.empty();
      const std::string indent = framed ? "    " : "  ";
      const std::vector<std::string> common = framed ? Common(stage) : std::vector<std::string>{};
      if (framed) {
        // A deep scope path keeps its last segments within the line.
        std::string scope = stage.scope;
        while (DisplayWidth(scope) > 96 && scope.find('/') != std::string::npos) {
          const size_t cut = scope.find('/', scope.rfind("…/", 0) == 0 ? 4 : 0);
          if (cut == std::string::npos) break;
          scope = "…" + scope.substr(cut);
        }
        std::vector<std::string> title = {scope};
        if (!common.empty()) title.push_back(fmt::format("(if {})", fmt::join(common, " && ")));
        out += Statement(fmt::format("  subgraph s{}", s), "[\"", title, "\"]", "  ");
      }
      for (const int node : stage.nodes) {
        const TensorRecord& t = trace_.tensors[nodes_[node].tensors.back()];
        if (t.constraint != Constraint::kNone)
          constrained.push_back(fmt::format("n{}", node));
        else if (t.kind == TensorKind::kWeight)
          weights.push_back(fmt::format("n{}", node));
        out += NodeText(node, common, indent);
      }
      for (const int node : stage.nodes)
        if (const OpRecord* op = CollectiveOf(node))
          out += fmt::format("{}c{}([\"⇄{} {} over {}\"]):::collective\n", indent, node,
                             op->collective->origin == CollectiveOrigin::kImplied ? " xla" : "",
                             Quote(ToString(op->collective->kind)),
                             Quote(fmt::format("{}", fmt::join(op->collective->axes, ","))));
      // A collective XLA inserts (OpRecord::implied): its own dashed node, fed by the tensor it
      // moves and feeding the node the op writes.
      for (const int node : stage.nodes)
        for (const int id : nodes_[node].tensors)
          if (const OpRecord* op = FirstOutputOf(id))
            for (size_t k = 0; k < op->implied.size(); ++k) {
              const ImpliedCollective& c = op->implied[k];
              out +=
                  fmt::format("{}x{}_{}([\"⇄ xla {} over {}<br/>{} {}/device\"]):::implied\n",
                              indent, producer_[id], k, Quote(HloName(c.kind)),
                              Quote(fmt::format("{}", fmt::join(c.axes, ","))),
                              Quote(trace_.tensors[c.tensor].name), HumanBytes(c.bytes_per_device));
            }
      if (framed) out += "  end\n";
    }
    for (const std::string& edge : Edges()) out += "  " + edge + "\n";
    for (const auto& [cls, ids] : {std::pair{"constrained", constrained}, {"weight", weights}})
      for (size_t i = 0; i < ids.size(); i += 12)
        out += fmt::format(
            "  class {} {}\n",
            fmt::join(ids.begin() + i, ids.begin() + std::min(ids.size(), i + 12), ","), cls);
    out +=
        "  classDef constrained stroke-width:3px\n"
        "  classDef weight fill:#fff3d6\n"
        "  classDef collective fill:#e3f0ff\n";
    if (std::any_of(trace_.ops.begin(), trace_.ops.end(),
                    [](const OpRecord& op) { return !op.implied.empty(); }))
      out += "  classDef implied fill:#f3e8ff,stroke-dasharray:4\n";
    return out;
  }

 private:
  struct Stage {
    std::string scope;
    std::vector<int> nodes;  // index into nodes_
  };
  // A node: the records of one folded chain (the last is the node's tensor).
  struct Node {
    std::vector<int> tensors;
  };

  const OpRecord* Producer(int tensor) const {
    const int op = producer_[tensor];
    return op < 0 ? nullptr : &trace_.ops[op];
  }

  // The op that writes `tensor` as its first output: where its implied collectives are shown.
  const OpRecord* FirstOutputOf(int tensor) const {
    const OpRecord* op = Producer(tensor);
    return op && !op->outputs.empty() && op->outputs.front() == tensor ? op : nullptr;
  }

  const OpRecord* CollectiveOf(int node) const {
    for (const int id : nodes_[node].tensors)
      if (const OpRecord* op = Producer(id); op && op->collective) return op;
    return nullptr;
  }

  void Place(int id) {
    const TensorRecord& t = trace_.tensors[id];
    if (stages_.empty() || stages_.back().scope != t.scope) stages_.push_back(Stage{t.scope, {}});
    Stage& stage = stages_.back();
    if (!stage.nodes.empty()) {
      Node& last = nodes_[stage.nodes.back()];
      const TensorRecord& prev = trace_.tensors[last.tensors.back()];
      const OpRecord* op = Producer(id);
      const bool chain = prev.name == t.name && prev.shape == t.shape &&
                         prev.condition == t.condition && prev.constraint == Constraint::kNone &&
                         t.constraint == Constraint::kNone && !(op && op->collective) &&
                         !CollectiveOf(stage.nodes.back());
      if (chain) {
        last.tensors.push_back(id);
        node_of_[id] = stage.nodes.back();
        return;
      }
    }
    nodes_.push_back(Node{{id}});
    stage.nodes.push_back(static_cast<int>(nodes_.size()) - 1);
    node_of_[id] = static_cast<int>(nodes_.size()) - 1;
  }

  // The condition clauses all records of a stage share: stated once, on the subgraph.
  std::vector<std::string> Common(const Stage& stage) const {
    std::vector<std::string> common;
    bool first = true;
    for (const int node : stage.nodes)
      for (const int id : nodes_[node].tensors) {
        const std::vector<std::string>& clauses = trace_.tensors[id].condition_clauses;
        if (first) {
          common = clauses;
          first = false;
        } else {
          std::erase_if(common, [&](const std::string& c) {
            return std::find(clauses.begin(), clauses.end(), c) == clauses.end();
          });
        }
      }
    return common;
  }

  // `n3["label"]`, `n3[["label"]]` for a constrained tensor. A label that would make the
  // line longer than 120 columns continues on the next source line after a `<br/>` (the
  // line break is the `<br/>`; the newline is whitespace to Mermaid).
  std::string NodeText(int node, const std::vector<std::string>& stated,
                       const std::string& indent) const {
    const TensorRecord& t = trace_.tensors[nodes_[node].tensors.back()];
    std::vector<std::string> parts = {TensorHead(t)};
    std::vector<std::string> fresh;
    for (const std::string& c : t.condition_clauses)
      if (std::find(stated.begin(), stated.end(), c) == stated.end()) fresh.push_back(c);
    if (!fresh.empty()) parts.push_back(fmt::format("(if {})", fmt::join(fresh, " && ")));
    const bool constrained = t.constraint != Constraint::kNone;
    if (constrained)
      parts.push_back(ToString(t.constraint) +
                      (t.partition_spec ? ": " + t.partition_spec->ToString() : ""));
    return Statement(fmt::format("{}n{}", indent, node), constrained ? "[[\"" : "[\"", parts,
                     constrained ? "\"]]" : "\"]", indent);
  }

  // `head` `open` parts joined by `<br/>` `close`, one line; when that passes 120 columns
  // the statement continues on the next source line after a `<br/>` (the `<br/>` is the
  // line break; the newline is whitespace to Mermaid).
  static std::string Statement(const std::string& head, const std::string& open,
                               const std::vector<std::string>& parts, const std::string& close,
                               const std::string& indent) {
    std::string out = head + open;
    size_t width = DisplayWidth(out);
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string piece = Quote(parts[i]) + (i + 1 < parts.size() ? "<br/>" : close);
      if (i > 0 && width + DisplayWidth(piece) > 120) {
        out += "\n" + indent + "  ";
        width = indent.size() + 2;
      }
      out += piece;
      width += DisplayWidth(piece);
    }
    return out + "\n";
  }

  // One edge per (input node, output node) pair; a collective's output is reached through
  // its own node.
  std::vector<std::string> Edges() const {
    std::vector<std::string> out;
    std::set<std::pair<std::string, std::string>> seen;
    const auto add = [&](const std::string& from, const std::string& to) {
      if (from != to && seen.insert({from, to}).second) out.push_back(from + " --> " + to);
    };
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const OpRecord* collective = CollectiveOf(static_cast<int>(n));
      const std::string target = fmt::format("n{}", n);
      if (collective) add(fmt::format("c{}", n), target);
      for (const int id : nodes_[n].tensors)
        if (const OpRecord* op = Producer(id))
          for (const int in : op->inputs)
            if (node_of_[in] >= 0)
              add(fmt::format("n{}", node_of_[in]),
                  op == collective ? fmt::format("c{}", n) : target);
      for (const int id : nodes_[n].tensors)
        if (const OpRecord* op = FirstOutputOf(id))
          for (size_t k = 0; k < op->implied.size(); ++k) {
            const std::string x = fmt::format("x{}_{}", producer_[id], k);
            const int from = node_of_[op->implied[k].tensor];
            if (from >= 0 && seen.insert({fmt::format("n{}", from), x}).second)
              out.push_back(fmt::format("n{} -.-> {}", from, x));
            if (seen.insert({x, target}).second)
              out.push_back(fmt::format("{} -.-> {}", x, target));
          }
    }
    return out;
  }

  const Trace& trace_;
  std::vector<int> producer_;
  std::vector<int> node_of_;  // tensor id -> node
  std::vector<Node> nodes_;
  std::vector<Stage> stages_;
};

}  // namespace

std::string MermaidFlow(const Trace& trace) { return MermaidRenderer(trace).Render(); }

}  // namespace shardtrace
