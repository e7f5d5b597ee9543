#include "emit/mermaid_flow.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "emit/ascii_flow.h"
#include "emit/flow_phases.h"
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

// A local slice to a finer sharding moves nothing: the pages list it apart from the
// collectives (reshards without communication), and the graph draws no node for it.
bool Communicates(const ImpliedCollective& c) { return c.kind != CollectiveKind::kSlice; }
bool ImpliesCommunication(const std::vector<ImpliedCollective>& implied) {
  return std::any_of(implied.begin(), implied.end(), Communicates);
}

class MermaidRenderer {
 public:
  MermaidRenderer(const Trace& trace, const SpmdResult& spmd) : trace_(trace), spmd_(spmd) {
    producer_.assign(trace.tensors.size(), -1);
    readers_.assign(trace.tensors.size(), 0);
    for (size_t i = 0; i < trace.ops.size(); ++i) {
      for (const int out : trace.ops[i].outputs)
        if (Valid(out)) producer_[out] = static_cast<int>(i);
      for (const int in : std::set<int>(trace.ops[i].inputs.begin(), trace.ops[i].inputs.end()))
        if (Valid(in)) ++readers_[in];
    }
    node_of_.assign(trace.tensors.size(), -1);
    phase_ = TensorPhases(trace);
    FoldLoops();
    for (size_t i = 0; i < trace.tensors.size(); ++i) Place(static_cast<int>(i));
    FoldSiblings();
  }

  // The whole flow, or with `only` a part of it (a set of nodes): an edge from a node of
  // another part starts at a small dashed node naming it (`↑ gate_logits`), drawn once. A
  // part titles its subgraphs with the scope's last two segments (the page's flow names the
  // rest) and keeps a two-line title clear of the nodes below it.
  std::string Render(const std::set<int>* only = nullptr) const {
    std::string out =
        only ? "%%{init: {\"flowchart\": {\"subGraphTitleMargin\": {\"bottom\": 24}}}}%%\n"
               "flowchart TD\n"
             : "flowchart TD\n";
    std::vector<std::string> constrained, weights;
    // The stages holding nodes of the part, each with those nodes.
    std::vector<Stage> stages;
    for (const Stage& stage : stages_) {
      Stage part{stage.scope, {}, stage.index};
      for (const int node : stage.nodes)
        if (!only || only->count(node)) part.nodes.push_back(node);
      if (!part.nodes.empty()) stages.push_back(std::move(part));
    }
    std::set<std::string> declared;
    for (const Stage& stage : stages)
      for (const int node : stage.nodes)
        for (const std::string& id : NodeIds(node)) declared.insert(id);
    const std::vector<Edge> edges = Edges();
    std::vector<std::string> ghosts;
    for (const Edge& e : edges)
      if (declared.count(e.to) && !declared.count(e.from) &&
          std::find(ghosts.begin(), ghosts.end(), e.from) == ghosts.end())
        ghosts.push_back(e.from);
    for (const std::string& g : ghosts)
      out += fmt::format("  i{}[\"↑ {}\"]:::ghost\n", g, Quote(ShortLabel(g)));
    for (size_t s = 0; s < stages.size(); ++s) {
      const Stage& stage = stages[s];
      const int loop = LoopOfScope(stage.scope);
      const bool opens = loop >= 0 && (s == 0 || LoopOfScope(stages[s - 1].scope) != loop);
      const bool closes =
          loop >= 0 && (s + 1 == stages.size() || LoopOfScope(stages[s + 1].scope) != loop);
      if (opens) {
        // One iteration drawn for all: titled with the loop's scopes and its count.
        const Loop& l = loops_[loop];
        const size_t stem_at = l.first.size() - l.stem.size() - 2;  // "<stem>_0" ends it
        out += Statement(
            fmt::format("  subgraph l{}", loop), "[\"",
            {fmt::format("{}{}_0 … {}_{}", l.first.substr(0, stem_at), l.stem, l.stem, l.count - 1),
             fmt::format("×{}: each iteration records the same ops; {}_0 drawn", l.count, l.stem)},
            "\"]", "  ");
      }
      const bool framed = !stage.scope.empty();
      const std::string indent = loop >= 0 ? "      " : framed ? "    " : "  ";
      const std::vector<std::string> common = framed ? Common(stage) : std::vector<std::string>{};
      if (framed) {
        // Inside a loop the title starts at the iteration; a deep scope path keeps its last
        // segments within the line.
        std::string scope =
            loop >= 0 ? stage.scope.substr(loops_[loop].first.size() - loops_[loop].stem.size() - 2)
                      : stage.scope;
        if (only && std::count(scope.begin(), scope.end(), '/') > 1) {
          const size_t last = scope.rfind('/');
          scope = "…" + scope.substr(scope.rfind('/', last - 1));
        }
        while (DisplayWidth(scope) > 96 && scope.find('/') != std::string::npos) {
          const size_t cut = scope.find('/', scope.rfind("…/", 0) == 0 ? 4 : 0);
          if (cut == std::string::npos) break;
          scope = "…" + scope.substr(cut);
        }
        std::vector<std::string> title = {scope};
        if (!common.empty()) title.push_back(fmt::format("(if {})", fmt::join(common, " && ")));
        out += Statement(fmt::format("{}subgraph s{}", indent.substr(2), stage.index), "[\"", title,
                         "\"]", indent.substr(2));
      }
      for (const int node : stage.nodes) {
        // Both classes apply to a kernel (kernel_axes constrains every weight): Mermaid adds
        // each `class` statement's class, so the legend's "weights shaded" holds for them too.
        if (Constrained(node)) constrained.push_back(fmt::format("n{}", node));
        if (trace_.tensors[nodes_[node].tensors.front()].kind == TensorKind::kWeight)
          weights.push_back(fmt::format("n{}", node));
        out += NodeText(node, common, indent);
      }
      for (const int node : stage.nodes)
        if (const OpRecord* op = CollectiveOf(node))
          out += fmt::format("{}c{}([\"⇄{} {} over {}\"]):::collective\n", indent, node,
                             op->collective->origin == CollectiveOrigin::kImplied ? " xla" : "",
                             Quote(ToString(op->collective->kind)),
                             Quote(fmt::format("{}", fmt::join(op->collective->axes, ","))));
      // A collective XLA inserts (SpmdResult::implied): its own dashed node on the way from the
      // tensor it moves to the node the op writes.
      for (const int node : stage.nodes)
        for (const int id : nodes_[node].tensors)
          if (const OpRecord* op = FirstOutputOf(id))
            for (size_t k = 0; k < spmd_.implied_at(op->id).size(); ++k) {
              const ImpliedCollective& c = spmd_.implied_at(op->id)[k];
              if (!Communicates(c)) continue;
              out +=
                  fmt::format("{}x{}_{}([\"⇄ xla {} over {}<br/>{} {}/device\"]):::implied\n",
                              indent, producer_[id], k, Quote(HloName(c.kind)),
                              Quote(fmt::format("{}", fmt::join(c.axes, ","))),
                              Quote(trace_.tensors[c.tensor].name), HumanBytes(c.bytes_per_device));
            }
      if (framed) out += indent.substr(2) + "end\n";
      if (closes) out += "  end\n";
    }
    for (const Edge& e : edges)
      if (declared.count(e.to))
        out += fmt::format("  {}{}{}{}\n", declared.count(e.from) ? "" : "i", e.from,
                           e.dashed ? " -.-> " : " --> ", e.to);
    if (only) out += StackLinks(stages, edges, declared, ghosts);
    for (const auto& [cls, ids] : {std::pair{"constrained", constrained}, {"weight", weights}})
      for (size_t i = 0; i < ids.size(); i += 12)
        out += fmt::format(
            "  class {} {}\n",
            fmt::join(ids.begin() + i, ids.begin() + std::min(ids.size(), i + 12), ","), cls);
    out +=
        "  classDef constrained stroke-width:3px\n"
        "  classDef weight fill:#fff3d6\n"
        "  classDef collective fill:#e3f0ff\n";
    if (std::any_of(spmd_.implied.begin(), spmd_.implied.end(), ImpliesCommunication))
      out += "  classDef implied fill:#f3e8ff,stroke-dasharray:4\n";
    if (!ghosts.empty()) out += "  classDef ghost fill:#ffffff,stroke-dasharray:2\n";
    return out;
  }

  // The graph cut into parts: per phase of the flow, its nodes in stage order, cut at stage
  // boundaries so that a part holds at most kPartNodes nodes (collectives count), a stage
  // larger than that on its own cut into pieces.
  std::vector<std::pair<FlowPhase, std::set<int>>> Parts() const {
    constexpr size_t kPartNodes = 9;
    std::vector<std::pair<FlowPhase, std::set<int>>> out;
    for (const FlowPhase phase : {FlowPhase::kInputs, FlowPhase::kRouting, FlowPhase::kDispatch,
                                  FlowPhase::kExperts, FlowPhase::kCombine, FlowPhase::kShared}) {
      std::set<int> part;
      size_t weight = 0;
      for (const Stage& stage : stages_) {
        std::vector<int> nodes;
        size_t w = 0;
        for (const int node : stage.nodes)
          if (NodePhase(node) == phase) {
            nodes.push_back(node);
            w += NodeIds(node).size();
          }
        if (nodes.empty()) continue;
        if (weight > 0 && weight + w > kPartNodes) {
          out.emplace_back(phase, part);
          part.clear();
          weight = 0;
        }
        for (const int node : nodes) {
          const size_t nw = NodeIds(node).size();
          if (weight > 0 && weight + nw > kPartNodes) {
            out.emplace_back(phase, part);
            part.clear();
            weight = 0;
          }
          part.insert(node);
          weight += nw;
        }
      }
      if (!part.empty()) out.emplace_back(phase, part);
    }
    return out;
  }

 private:
  struct Stage {
    std::string scope;
    std::vector<int> nodes;  // index into nodes_
    int index = 0;           // in the whole flow: the subgraph's id
  };
  // A node: one tensor and the records that only restate it (casts, checkpoint names, its
  // constraint, a chain of elementwise ops on one name), in trace order.
  struct Node {
    std::vector<int> tensors;
    // Siblings folded into this node (FoldSiblings): the first record of each, this node's
    // own first; empty when there are none.
    std::vector<int> siblings;
  };

  struct Edge {
    std::string from, to;
    bool dashed = false;
  };

  FlowPhase NodePhase(int node) const { return phase_[nodes_[node].tensors.front()]; }

  // Mermaid lays unconnected pieces of a graph side by side, which makes a part with many
  // of them wide: with three pieces or more, an invisible link (`~~~`) from the last node of
  // each piece to the first of the next stacks them all. Pieces in order of their first node.
  std::string StackLinks(const std::vector<Stage>& stages, const std::vector<Edge>& edges,
                         const std::set<std::string>& declared,
                         const std::vector<std::string>& ghosts) const {
    std::map<std::string, std::string> parent;
    const std::function<std::string(const std::string&)> find = [&](const std::string& x) {
      const std::string p = parent.count(x) ? parent[x] : x;
      return p == x ? x : (parent[x] = find(p));
    };
    const auto ghost = [](const std::string& id) { return "i" + id; };
    for (const Edge& e : edges)
      if (declared.count(e.to)) {
        const std::string from = declared.count(e.from) ? e.from : ghost(e.from);
        const std::string a = find(from), b = find(e.to);
        if (a != b) parent[a] = b;
      }
    // Each piece's first and last drawn node, in drawing order (ghosts first).
    std::vector<std::string> order;
    for (const std::string& g : ghosts) order.push_back(ghost(g));
    for (const Stage& stage : stages)
      for (const int node : stage.nodes) order.push_back(fmt::format("n{}", node));
    std::vector<std::string> roots;
    std::map<std::string, std::pair<std::string, std::string>> ends;  // root -> first, last
    for (const Stage& stage : stages)
      for (const int node : stage.nodes) {
        const std::string id = fmt::format("n{}", node), root = find(id);
        if (!ends.count(root)) {
          roots.push_back(root);
          ends[root] = {id, id};
        }
        ends[root].second = id;
      }
    for (const std::string& id : order)  // a piece's ghosts come before its nodes
      if (id[0] == 'i' && ends.count(find(id)) && ends[find(id)].first[0] != 'i')
        ends[find(id)].first = id;
    std::string out;
    if (roots.size() < 3) return out;
    for (size_t r = 1; r < roots.size(); ++r)
      out += fmt::format("  {} ~~~ {}\n", ends[roots[r - 1]].second, ends[roots[r]].first);
    return out;
  }

  // The ids a node declares: itself, its collective and the collectives XLA inserts on the
  // way to it.
  std::vector<std::string> NodeIds(int node) const {
    std::vector<std::string> ids = {fmt::format("n{}", node)};
    if (CollectiveOf(node)) ids.push_back(fmt::format("c{}", node));
    for (const int id : nodes_[node].tensors)
      if (const OpRecord* op = FirstOutputOf(id))
        for (size_t k = 0; k < spmd_.implied_at(op->id).size(); ++k)
          if (Communicates(spmd_.implied_at(op->id)[k]))
            ids.push_back(fmt::format("x{}_{}", producer_[id], k));
    return ids;
  }

  // What an edge from another part names: the tensor, or the collective.
  std::string ShortLabel(const std::string& id) const {
    if (id[0] == 'x') {
      const int op = std::stoi(id.substr(1));
      const int k = std::stoi(id.substr(id.find('_') + 1));
      return "⇄ xla " + HloName(spmd_.implied_at(op)[k].kind);
    }
    const int node = std::stoi(id.substr(1));
    if (id[0] == 'c') return "⇄ " + ToString(CollectiveOf(node)->collective->kind);
    return trace_.tensors[nodes_[node].tensors.back()].name;
  }

  bool Valid(int tensor) const {
    return tensor >= 0 && tensor < static_cast<int>(trace_.tensors.size());
  }

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

  bool Constrained(int node) const {
    return std::any_of(nodes_[node].tensors.begin(), nodes_[node].tensors.end(),
                       [&](int id) { return trace_.tensors[id].constraint != Constraint::kNone; });
  }

  // The node the record `id` joins instead of drawing one of its own, or -1.
  //  - A record that only restates its one input (same shape and condition, no data moved):
  //    a dtype cast, a checkpoint name, an optimization barrier or a sharding constraint,
  //    when nobody else reads the input (or the cast keeps name and dtype: an identity).
  //    `inputs: act [B,S,M] f32→bf16` is one node. A cast that names a new variable
  //    (dispatch_mask = combine_mask.astype(bool)) keeps its node, except a weight's cast to
  //    the compute dtype (w0_kernel = wi_0 as bf16), which is the same kernel.
  //  - An op in the same scope that rewrites one name (softmax, silu, x * y), reading the
  //    last record of an unconstrained node nobody else reads, as the ASCII flow folds it.
  int JoinTarget(int id) const {
    const OpRecord* op = Producer(id);
    if (!op || op->outputs.size() != 1 || op->collective ||
        ImpliesCommunication(spmd_.implied_at(op->id)))
      return -1;
    const TensorRecord& t = trace_.tensors[id];
    const auto same = [&](int in) {
      if (!Valid(in) || node_of_[in] < 0) return false;
      const TensorRecord& from = trace_.tensors[in];
      const TensorRecord& head = trace_.tensors[nodes_[node_of_[in]].tensors.front()];
      return LoopOfScope(head.scope) == LoopOfScope(t.scope) && from.shape == t.shape &&
             from.condition_clauses == t.condition_clauses && from.in_shard_map == t.in_shard_map;
    };
    if (op->inputs.size() == 1 && same(op->inputs.front())) {
      const int in = op->inputs.front();
      const TensorRecord& from = trace_.tensors[in];
      const int node = node_of_[in];
      const bool identity = (op->kind == OpKind::kAstype && from.dtype == t.dtype) ||
                            op->kind == OpKind::kCheckpointName ||
                            op->kind == OpKind::kOptimizationBarrier;
      const bool restates = (op->kind == OpKind::kAstype &&
                             (from.name == t.name || from.kind == TensorKind::kWeight)) ||
                            (identity && from.name == t.name) ||
                            (op->kind == OpKind::kShardingConstraint && !Constrained(node));
      if (restates && (readers_[in] == 1 || (identity && from.name == t.name))) return node;
    }
    if (t.constraint != Constraint::kNone) return -1;
    for (auto in = op->inputs.rbegin(); in != op->inputs.rend(); ++in) {
      if (!same(*in)) continue;
      const TensorRecord& from = trace_.tensors[*in];
      const int node = node_of_[*in];
      if (from.name == t.name && from.scope == t.scope && readers_[*in] == 1 &&
          nodes_[node].tensors.back() == *in && !Constrained(node) && !CollectiveOf(node))
        return node;
    }
    return -1;
  }

  void Place(int id) {
    if (const int rep = drawn_as_[id]; rep >= 0) {  // a later iteration of a folded loop
      node_of_[id] = node_of_[rep];
      return;
    }
    if (const int node = JoinTarget(id); node >= 0) {
      nodes_[node].tensors.push_back(id);
      node_of_[id] = node;
      return;
    }
    const TensorRecord& t = trace_.tensors[id];
    if (stages_.empty() || stages_.back().scope != t.scope)
      stages_.push_back(Stage{t.scope, {}, static_cast<int>(stages_.size())});
    Stage& stage = stages_.back();
    nodes_.push_back(Node{{id}, {}});
    stage.nodes.push_back(static_cast<int>(nodes_.size()) - 1);
    node_of_[id] = static_cast<int>(nodes_.size()) - 1;
  }

  // A loop of the trace (Trace::loop_iterations) whose iterations recorded the same ops on
  // the same shapes: only its first iteration is drawn, inside a subgraph giving the count.
  struct Loop {
    std::string stem;   // "expert"
    std::string first;  // the first iteration's scope: "RoutedMoE/masked_loop/expert_0"
    int64_t count = 0;
  };

  static bool InScope(const std::string& scope, const std::string& outer) {
    return scope == outer ||
           (scope.size() > outer.size() && scope.starts_with(outer) && scope[outer.size()] == '/');
  }

  // The folded loop whose drawn iteration holds `scope`, or -1.
  int LoopOfScope(const std::string& scope) const {
    for (size_t l = 0; l < loops_.size(); ++l)
      if (InScope(scope, loops_[l].first)) return static_cast<int>(l);
    return -1;
  }

  // Whether record `b` of one iteration (scope `b_scope`) repeats record `a` of another: the
  // same tensor in the same place of the body, made by the same kind of op from operands of
  // the same names and shapes, moving the same collectives.
  bool Repeats(int a, const std::string& a_scope, int b, const std::string& b_scope) const {
    const TensorRecord& x = trace_.tensors[a];
    const TensorRecord& y = trace_.tensors[b];
    if (x.name != y.name || x.kind != y.kind || x.dtype != y.dtype || x.dims != y.dims ||
        x.shape != y.shape || x.constraint != y.constraint ||
        x.partition_spec != y.partition_spec || x.condition_clauses != y.condition_clauses ||
        x.in_shard_map != y.in_shard_map ||
        x.scope.substr(a_scope.size()) != y.scope.substr(b_scope.size()))
      return false;
    const OpRecord* p = Producer(a);
    const OpRecord* q = Producer(b);
    if (!p || !q) return !p && !q;
    if (p->kind != q->kind || p->equation != q->equation || p->function != q->function ||
        p->inputs.size() != q->inputs.size() || p->outputs.size() != q->outputs.size() ||
        p->collective.has_value() != q->collective.has_value())
      return false;
    if (p->collective &&
        (p->collective->kind != q->collective->kind || p->collective->axes != q->collective->axes))
      return false;
    for (size_t i = 0; i < p->inputs.size(); ++i) {
      const TensorRecord& u = trace_.tensors[p->inputs[i]];
      const TensorRecord& v = trace_.tensors[q->inputs[i]];
      if (u.name != v.name || u.shape != v.shape || u.dtype != v.dtype) return false;
    }
    // A collective whose result later iterations read too (XLA's CSE: a kernel gathered
    // once for every x[e]) belongs to the loop, not to one iteration.
    const auto own = [&](const OpRecord& op) {
      std::vector<const ImpliedCollective*> out;
      for (const ImpliedCollective& c : spmd_.implied_at(op.id))
        if (c.last_reader_op < 0) out.push_back(&c);
      return out;
    };
    const std::vector<const ImpliedCollective*> pc = own(*p), qc = own(*q);
    if (pc.size() != qc.size()) return false;
    for (size_t k = 0; k < pc.size(); ++k) {
      const ImpliedCollective& c = *pc[k];
      const ImpliedCollective& d = *qc[k];
      if (c.kind != d.kind || c.axes != d.axes || c.bytes_per_device != d.bytes_per_device ||
          trace_.tensors[c.tensor].name != trace_.tensors[d.tensor].name)
        return false;
    }
    return true;
  }

  // Finds the loops whose iterations all repeat the first one and maps every record of a
  // later iteration to the first iteration's record in the same place (drawn_as_).
  void FoldLoops() {
    drawn_as_.assign(trace_.tensors.size(), -1);
    const std::vector<LoopIteration>& its = trace_.loop_iterations;
    for (size_t i = 0; i < its.size(); ++i) {
      if (its[i].index != 0 || its[i].count < 2 || i + its[i].count > its.size()) continue;
      const auto records = [&](const std::string& scope) {
        std::vector<int> ids;
        for (const TensorRecord& t : trace_.tensors)
          if (InScope(t.scope, scope)) ids.push_back(t.id);
        return ids;
      };
      const std::vector<int> first = records(its[i].scope);
      bool alike = !first.empty();
      std::vector<std::pair<int, int>> pairs;  // (later record, first iteration's record)
      for (int64_t k = 1; alike && k < its[i].count; ++k) {
        const LoopIteration& it = its[i + k];
        const std::vector<int> later = records(it.scope);
        alike = it.loop == its[i].loop && it.index == k && later.size() == first.size();
        for (size_t r = 0; alike && r < first.size(); ++r) {
          alike = Repeats(first[r], its[i].scope, later[r], it.scope);
          pairs.emplace_back(later[r], first[r]);
        }
      }
      if (!alike) continue;
      for (const auto& [later, rep] : pairs) drawn_as_[later] = rep;
      loops_.push_back(Loop{its[i].loop, its[i].scope, its[i].count});
    }
  }

  // Folds sibling nodes of one stage into one node: plain tensors (one record each, no
  // constraint, no collective) of one shape and dtype that ops of one kind made from the
  // same nodes and that the same nodes read, such as get_all_to_all_params' input_offsets,
  // send_sizes, output_offsets and recv_sizes. They are drawn as one node naming them all
  // (`input_offsets, send_sizes, output_offsets, recv_sizes: act [P=4] i32`): side by side
  // they only widen the graph.
  void FoldSiblings() {
    std::vector<std::set<int>> from(nodes_.size()), to(nodes_.size());
    for (const OpRecord& op : trace_.ops)
      for (const int out : op.outputs)
        for (const int in : op.inputs)
          if (Valid(in) && Valid(out) && node_of_[in] >= 0 && node_of_[out] >= 0 &&
              node_of_[in] != node_of_[out]) {
            from[node_of_[out]].insert(node_of_[in]);
            to[node_of_[in]].insert(node_of_[out]);
          }
    const auto plain = [&](int node) {
      if (nodes_[node].tensors.size() != 1) return false;
      const OpRecord* op = Producer(nodes_[node].tensors.front());
      return op && !op->collective && !ImpliesCommunication(spmd_.implied_at(op->id)) &&
             op->outputs.size() == 1 && !Constrained(node) && !to[node].empty();
    };
    for (Stage& stage : stages_) {
      std::vector<int> kept;
      for (const int node : stage.nodes) {
        const int id = nodes_[node].tensors.front();
        const TensorRecord& t = trace_.tensors[id];
        const auto sibling = std::find_if(kept.begin(), kept.end(), [&](int k) {
          const int kid =
              nodes_[k].siblings.empty() ? nodes_[k].tensors.front() : nodes_[k].siblings.front();
          const TensorRecord& u = trace_.tensors[kid];
          return plain(node) && plain(k) == nodes_[k].siblings.empty() &&
                 Producer(id)->kind == Producer(kid)->kind && t.shape == u.shape &&
                 t.dtype == u.dtype && t.kind == u.kind && t.dims == u.dims &&
                 t.condition_clauses == u.condition_clauses && from[node] == from[k] &&
                 to[node] == to[k];
        });
        if (sibling == kept.end()) {
          kept.push_back(node);
          continue;
        }
        Node& into = nodes_[*sibling];
        if (into.siblings.empty()) into.siblings.push_back(into.tensors.front());
        into.siblings.push_back(id);
        into.tensors.push_back(id);
        node_of_[id] = *sibling;
        nodes_[node].tensors.clear();  // drawn as its sibling: no node, no edges
      }
      stage.nodes = kept;
    }
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

  // `wi_0 → w0_kernel: weight [E=4,M=16,H=32] f32→bf16`: the names and dtypes the node's
  // records take, in order, around the head the ASCII flow gives the last record.
  std::string Head(int node) const {
    if (!nodes_[node].siblings.empty()) {
      std::vector<std::string> names;
      for (const int id : nodes_[node].siblings) names.push_back(trace_.tensors[id].name);
      const TensorRecord& first = trace_.tensors[nodes_[node].siblings.front()];
      return fmt::format("{}{}", fmt::join(names, ", "),
                         TensorHead(first).substr(first.name.size()));
    }
    std::vector<std::string> names, dtypes;
    for (const int id : nodes_[node].tensors) {
      const TensorRecord& r = trace_.tensors[id];
      if (names.empty() || names.back() != r.name) names.push_back(r.name);
      const std::string dtype = ShortDtype(r.dtype);
      if (dtypes.empty() || dtypes.back() != dtype) dtypes.push_back(dtype);
    }
    const TensorRecord& last = trace_.tensors[nodes_[node].tensors.back()];
    std::string head = TensorHead(last);
    const std::string suffix = fmt::format(" {}", ShortDtype(last.dtype));
    if (head.ends_with(suffix))
      head =
          head.substr(0, head.size() - suffix.size()) + fmt::format(" {}", fmt::join(dtypes, "→"));
    if (head.rfind(last.name + ":", 0) == 0)
      head = fmt::format("{}{}", fmt::join(names, " → "), head.substr(last.name.size()));
    return head;
  }

  // `n3["label"]`, `n3[["label"]]` for a constrained tensor. A label that would make the
  // line longer than 100 columns continues on the next source line after a `<br/>` (the
  // line break is the `<br/>`; the newline is whitespace to Mermaid).
  std::string NodeText(int node, const std::vector<std::string>& stated,
                       const std::string& indent) const {
    const TensorRecord& t = trace_.tensors[nodes_[node].tensors.back()];
    // Name and dims on lines of their own, the statement apart from its spec: narrow nodes
    // keep the graph within a page's width.
    const std::string head = Head(node);
    const size_t dims = head.find(" [", head.find(": "));
    std::vector<std::string> parts = {head.substr(0, dims)};
    if (dims != std::string::npos) parts.push_back(head.substr(dims + 1));
    std::vector<std::string> fresh;
    for (const std::string& c : t.condition_clauses)
      if (std::find(stated.begin(), stated.end(), c) == stated.end()) fresh.push_back(c);
    if (!fresh.empty()) parts.push_back(fmt::format("(if {})", fmt::join(fresh, " && ")));
    const bool constrained = Constrained(node);
    for (const int id : nodes_[node].tensors) {
      const TensorRecord& r = trace_.tensors[id];
      if (r.constraint != Constraint::kNone) {
        parts.push_back(ToString(r.constraint));
        if (r.partition_spec) parts.push_back(r.partition_spec->ToString());
      }
    }
    return Statement(fmt::format("{}n{}", indent, node), constrained ? "[[\"" : "[\"", parts,
                     constrained ? "\"]]" : "\"]", indent);
  }

  // `head` `open` parts joined by `<br/>` `close`, one line; when that passes 100 columns
  // the statement continues on the next source line after a `<br/>` (the `<br/>` is the
  // line break; the newline is whitespace to Mermaid).
  static std::string Statement(const std::string& head, const std::string& open,
                               const std::vector<std::string>& whole_parts,
                               const std::string& close, const std::string& indent) {
    // A long condition reads one clause a line (`(if a &&`, `b)`): narrower nodes, and no
    // source line past the page's width.
    std::vector<std::string> parts;
    for (const std::string& part : whole_parts) {
      size_t start = 0;
      for (size_t cut = part.find(" && "); DisplayWidth(part) > 48 && cut != std::string::npos;
           cut = part.find(" && ", start)) {
        parts.push_back(part.substr(start, cut + 3 - start));
        start = cut + 4;
      }
      parts.push_back(part.substr(start));
    }
    std::string out = head + open;
    size_t width = DisplayWidth(out);
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string piece = Quote(parts[i]) + (i + 1 < parts.size() ? "<br/>" : close);
      if (i > 0 && width + DisplayWidth(piece) > 100) {
        out += "\n" + indent + "  ";
        width = indent.size() + 2;
      }
      out += piece;
      width += DisplayWidth(piece);
    }
    return out + "\n";
  }

  // One edge per (from, to) pair, following each op from its inputs to the node of its
  // output. A collective the code writes is reached through its own node; one XLA implies
  // sits on the way: on the edge from the operand it moves (`wi_0 -.-> all-gather -.-> x`),
  // or, when it reduces the op's own result in place (the partial sums of an einsum), on the
  // edges from all the op's operands to the result (`x, wo -.-> all-reduce -.-> output`),
  // so no node ever feeds itself.
  std::vector<Edge> Edges() const {
    std::vector<Edge> out;
    std::set<std::pair<std::string, std::string>> seen;
    const auto add = [&](const std::string& from, const std::string& to, bool dashed) {
      if (from != to && seen.insert({from, to}).second) out.push_back({from, to, dashed});
    };
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const OpRecord* collective = CollectiveOf(static_cast<int>(n));
      const std::string node = fmt::format("n{}", n);
      if (collective) add(fmt::format("c{}", n), node, false);
      for (const int id : nodes_[n].tensors) {
        const OpRecord* op = Producer(id);
        if (!op) continue;
        const std::string target = op == collective ? fmt::format("c{}", n) : node;
        // operand's node -> the implied collectives moving it, in order
        std::map<int, std::vector<std::string>> moved;
        std::vector<std::string> in_place;
        if (FirstOutputOf(id) == op)
          for (size_t k = 0; k < spmd_.implied_at(op->id).size(); ++k) {
            if (!Communicates(spmd_.implied_at(op->id)[k])) continue;
            const std::string x = fmt::format("x{}_{}", producer_[id], k);
            const int t = spmd_.implied_at(op->id)[k].tensor;
            if (std::find(op->outputs.begin(), op->outputs.end(), t) != op->outputs.end())
              in_place.push_back(x);
            else if (Valid(t) && node_of_[t] >= 0)
              moved[node_of_[t]].push_back(x);
          }
        // From every operand's node (through the collective moving it) into the in-place
        // chain, or the target.
        const std::string sink = in_place.empty() ? target : in_place.front();
        std::set<int> from_nodes;
        for (const int in : op->inputs)
          if (Valid(in) && node_of_[in] >= 0 && node_of_[in] != static_cast<int>(n))
            from_nodes.insert(node_of_[in]);
        for (const auto& [from, x] : moved) from_nodes.insert(from);
        for (const int from : from_nodes) {
          const std::string name = fmt::format("n{}", from);
          if (const auto m = moved.find(from); m != moved.end()) {
            const std::vector<std::string>& chain = m->second;
            add(name, chain.front(), true);
            for (size_t k = 0; k < chain.size(); ++k)
              add(chain[k], k + 1 < chain.size() ? chain[k + 1] : sink, true);
          } else {
            add(name, sink, !in_place.empty());
          }
        }
        for (size_t k = 0; k < in_place.size(); ++k)
          add(in_place[k], k + 1 < in_place.size() ? in_place[k + 1] : target, true);
      }
    }
    return out;
  }

  const Trace& trace_;
  const SpmdResult& spmd_;
  std::vector<int> producer_;
  std::vector<int> readers_;  // tensor id -> how many ops read it
  std::vector<int> node_of_;  // tensor id -> node
  std::vector<Node> nodes_;
  std::vector<Stage> stages_;
  std::vector<int> drawn_as_;  // tensor id -> the record drawn for it (folded loops), or -1
  std::vector<Loop> loops_;
  std::vector<FlowPhase> phase_;  // tensor id -> its phase of the flow
};

}  // namespace

std::string MermaidFlow(const Trace& trace, const SpmdResult& spmd) {
  return MermaidRenderer(trace, spmd).Render();
}

std::vector<MermaidPart> MermaidFlowParts(const Trace& trace, const SpmdResult& spmd) {
  const MermaidRenderer renderer(trace, spmd);
  const auto parts = renderer.Parts();
  std::vector<MermaidPart> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    int of = 0, at = 0;
    for (size_t j = 0; j < parts.size(); ++j)
      if (parts[j].first == parts[i].first) {
        ++of;
        at += j <= i;
      }
    out.push_back({parts[i].first, of > 1 ? at : 0, of, renderer.Render(&parts[i].second)});
  }
  return out;
}

}  // namespace shardtrace
