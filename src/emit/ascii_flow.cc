#include "emit/ascii_flow.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "emit/text_table.h"
#include "emit/trace_totals.h"

namespace shardtrace {
namespace {

// One entry of a box: a run of records of one tensor (indices into Trace::tensors), or a
// nested box (index into the node list).
struct Item {
  std::vector<int> tensors;
  int child = -1;
};

struct Node {
  std::string title;  // the last segment of the scope path
  std::vector<Item> items;
};

// The boxes, built in program order: node 0 is the top level (scope ""). A record's
// scope path is matched against the boxes open for the previous record; the common
// prefix stays open, the rest closes, and a box opens for each remaining segment. So a
// parent box stays open across its children, and a scope entered again after a sibling
// gets a second box: the flow never reorders records.
class ScopeTree {
 public:
  ScopeTree() : nodes_(1) {}

  int NodeFor(const std::string& scope) {
    std::vector<std::string> segments;
    for (size_t start = 0; start < scope.size();) {
      const size_t end = std::min(scope.find('/', start), scope.size());
      segments.push_back(scope.substr(start, end - start));
      start = end + 1;
    }
    size_t keep = 0;
    while (keep < open_.size() && keep < segments.size() &&
           nodes_[open_[keep]].title == segments[keep])
      ++keep;
    open_.resize(keep);
    for (size_t i = keep; i < segments.size(); ++i) {
      const int id = static_cast<int>(nodes_.size());
      nodes_.push_back(Node{segments[i], {}});
      nodes_[open_.empty() ? 0 : open_.back()].items.push_back(Item{{}, id});
      open_.push_back(id);
    }
    return open_.empty() ? 0 : open_.back();
  }

  Node& node(int id) { return nodes_[id]; }
  const Node& node(int id) const { return nodes_[id]; }

 private:
  std::vector<Node> nodes_;
  std::vector<int> open_;  // the boxes of the current scope path, outermost first
};

std::string Repeat(const std::string& piece, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += piece;
  return out;
}

std::string PadTo(const std::string& text, size_t width) {
  return text + std::string(width - std::min(width, DisplayWidth(text)), ' ');
}

// Draws `lines` in a box whose top edge carries `title`; every output line has the same
// display width. `heavy` picks the double-line box of explicit sharding constraints.
std::vector<std::string> Frame(const std::string& title, const std::vector<std::string>& lines,
                               bool heavy) {
  const std::string h = heavy ? "═" : "─";
  const std::string v = heavy ? "║" : "│";
  size_t inner = title.empty() ? 0 : DisplayWidth(title) + 2;
  for (const std::string& line : lines) inner = std::max(inner, DisplayWidth(line));
  std::vector<std::string> out;
  const std::string head = title.empty() ? "" : " " + title + " ";
  out.push_back((heavy ? "╔" : "┌") + h + head + Repeat(h, inner + 1 - DisplayWidth(head)) +
                (heavy ? "╗" : "┐"));
  for (const std::string& line : lines) out.push_back(v + " " + PadTo(line, inner) + " " + v);
  out.push_back((heavy ? "╚" : "└") + Repeat(h, inner + 2) + (heavy ? "╝" : "┘"));
  return out;
}

// "[B=4,S=8,M=16]"; letters that name no dim ('-', '1') and dims without letters show the
// bare size.
std::string DimShape(const TensorRecord& t) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    const char letter = i < t.dims.size() && t.dims.size() == t.shape.size() ? t.dims[i] : '-';
    parts.push_back(letter == '-' || letter == '1' ? std::to_string(t.shape[i])
                                                   : fmt::format("{}={}", letter, t.shape[i]));
  }
  return fmt::format("[{}]", fmt::join(parts, ","));
}

// The tracer joins nested conditions with " && "; each clause is stated once, on the
// outermost box all of whose records share it.
std::vector<std::string> Clauses(const std::string& condition) {
  std::vector<std::string> out;
  for (size_t start = 0; start < condition.size();) {
    const size_t end = std::min(condition.find(" && ", start), condition.size());
    out.push_back(condition.substr(start, end - start));
    start = end + 4;
  }
  return out;
}

using Stated = std::vector<std::string>;

std::string IfText(const std::vector<std::string>& clauses, const Stated& stated) {
  std::vector<std::string> fresh;
  for (const std::string& c : clauses)
    if (std::find(stated.begin(), stated.end(), c) == stated.end()) fresh.push_back(c);
  return fresh.empty() ? "" : fmt::format("(if {})", fmt::join(fresh, " && "));
}

class FlowRenderer {
 public:
  explicit FlowRenderer(const Trace& trace) : trace_(trace) {
    producer_.assign(trace.tensors.size(), -1);
    for (size_t i = 0; i < trace.ops.size(); ++i)
      for (const int out : trace.ops[i].outputs)
        if (out >= 0 && out < static_cast<int>(producer_.size()))
          producer_[out] = static_cast<int>(i);
    for (size_t i = 0; i < trace.tensors.size(); ++i) Place(static_cast<int>(i));
  }

  std::string Render() const {
    std::string out;
    for (const std::string& line : Contents(0, {})) out += line + "\n";
    return out;
  }

 private:
  const OpRecord* Producer(int tensor) const {
    const int op = producer_[tensor];
    return op < 0 ? nullptr : &trace_.ops[op];
  }

  // A record joins the previous item when both are unconstrained records of one name and
  // shape and neither moves data between devices: a chain of casts reads as one line.
  bool Joins(const Item& last, int id) const {
    if (last.child >= 0 || last.tensors.empty()) return false;
    const TensorRecord& prev = trace_.tensors[last.tensors.back()];
    const TensorRecord& t = trace_.tensors[id];
    const OpRecord* prev_op = Producer(last.tensors.back());
    const OpRecord* op = Producer(id);
    return prev.name == t.name && prev.shape == t.shape && prev.condition == t.condition &&
           prev.constraint == Constraint::kNone && t.constraint == Constraint::kNone &&
           !(prev_op && prev_op->collective) && !(op && op->collective);
  }

  void Place(int id) {
    const int node = tree_.NodeFor(trace_.tensors[id].scope);
    std::vector<Item>& items = tree_.node(node).items;
    if (!items.empty() && Joins(items.back(), id)) {
      items.back().tensors.push_back(id);
    } else {
      items.push_back(Item{{id}, -1});
    }
  }

  std::string InputNames(const OpRecord& op) const {
    std::vector<std::string> names;
    for (const int in : op.inputs) names.push_back(trace_.tensors[in].name);
    return fmt::format("{}", fmt::join(names, ", "));
  }

  // How the op made the tensor: `einsum("BSM,ME->BSE", inputs, kernel)` for contractions
  // (their equation is the point), the op kind otherwise.
  std::string OpText(const OpRecord& op) const {
    if (!op.equation.empty())
      return fmt::format("{}(\"{}\", {})", op.kind, op.equation, InputNames(op));
    return op.kind;
  }

  std::string CollectiveText(const OpRecord& op) const {
    const CollectiveRecord& c = *op.collective;
    const auto max_of = [](const std::vector<int64_t>& v) {
      return v.empty() ? int64_t{0} : *std::max_element(v.begin(), v.end());
    };
    return fmt::format("⇄ {} over {} ({} devices per group): sent {}, received {} per device (max)",
                       op.kind, fmt::join(c.axes, ","), c.participants,
                       HumanBytes(max_of(c.bytes_sent)), HumanBytes(max_of(c.bytes_received)));
  }

  std::string Condition(const TensorRecord& t, const Stated& stated) const {
    const std::string text = IfText(Clauses(t.condition), stated);
    return text.empty() ? "" : "  " + text;
  }

  // The condition clauses every record under `node` shares, in the order of the first.
  std::vector<std::string> Common(int node) const {
    std::optional<std::vector<std::string>> common;
    const auto meet = [&](const std::vector<std::string>& clauses) {
      if (!common) {
        common = clauses;
        return;
      }
      std::erase_if(*common, [&](const std::string& c) {
        return std::find(clauses.begin(), clauses.end(), c) == clauses.end();
      });
    };
    for (const Item& item : tree_.node(node).items) {
      if (item.child >= 0) {
        meet(Common(item.child));
      } else {
        for (const int id : item.tensors) meet(Clauses(trace_.tensors[id].condition));
      }
    }
    return common.value_or(std::vector<std::string>{});
  }

  // An unconstrained run of records: `name: [dims] dtype  ← op, op (xN ops)  (if cond)`.
  std::vector<std::string> PlainLines(const std::vector<int>& ids, const Stated& stated) const {
    const TensorRecord& t = trace_.tensors[ids.back()];
    std::vector<std::string> ops;
    for (const int id : ids)
      if (const OpRecord* op = Producer(id)) ops.push_back(OpText(*op));
    std::string line = fmt::format("{}: {} {}", t.name, DimShape(t), ToString(t.dtype));
    if (!ops.empty()) line += fmt::format("  ← {}", fmt::join(ops, ", "));
    if (ids.size() > 1) line += fmt::format(" (x{} ops)", ids.size());
    std::vector<std::string> lines = {line + Condition(t, stated)};
    for (const int id : ids)
      if (const OpRecord* op = Producer(id); op && op->collective)
        lines.push_back("  " + CollectiveText(*op));
    return lines;
  }

  // A record an explicit statement placed: a double-line box titled by the statement.
  std::vector<std::string> ConstrainedLines(int id, const Stated& stated) const {
    const TensorRecord& t = trace_.tensors[id];
    std::vector<std::string> body = {
        fmt::format("{}: {} {}{}", t.name, DimShape(t), ToString(t.dtype), Condition(t, stated))};
    if (t.logical_axes) body.push_back("logical  " + LogicalAxesToString(*t.logical_axes));
    if (t.partition_spec) body.push_back("spec     " + t.partition_spec->ToString());
    body.push_back(fmt::format("local    {} per device, {}", ShapeToString(t.local_shape),
                               HumanBytes(t.bytes_per_device)));
    std::vector<std::string> lines = Frame(ToString(t.constraint), body, /*heavy=*/true);
    if (const OpRecord* op = Producer(id); op && op->collective)
      lines.push_back("  " + CollectiveText(*op));
    return lines;
  }

  // A node's box: its title carries the condition clauses all its records share that no
  // enclosing box has stated yet.
  std::vector<std::string> Box(int node, const Stated& stated) const {
    const std::vector<std::string> common = Common(node);
    const std::string condition = IfText(common, stated);
    Stated inner = stated;
    for (const std::string& c : common)
      if (std::find(inner.begin(), inner.end(), c) == inner.end()) inner.push_back(c);
    const std::string& title = tree_.node(node).title;
    return Frame(condition.empty() ? title : title + " " + condition, Contents(node, inner),
                 /*heavy=*/false);
  }

  // The lines inside a node's box (or, for the top level, the whole diagram).
  std::vector<std::string> Contents(int node, const Stated& stated) const {
    std::vector<std::string> lines;
    for (const Item& item : tree_.node(node).items) {
      if (!lines.empty()) lines.push_back("  ▼");
      std::vector<std::string> part;
      if (item.child >= 0) {
        part = Box(item.child, stated);
      } else if (trace_.tensors[item.tensors.front()].constraint != Constraint::kNone) {
        part = ConstrainedLines(item.tensors.front(), stated);
      } else {
        part = PlainLines(item.tensors, stated);
      }
      lines.insert(lines.end(), part.begin(), part.end());
    }
    return lines;
  }

  const Trace& trace_;
  std::vector<int> producer_;  // tensor id -> index of the op that made it, -1 if none
  ScopeTree tree_;
};

}  // namespace

std::string AsciiFlow(const Trace& trace) { return FlowRenderer(trace).Render(); }

}  // namespace shardtrace
