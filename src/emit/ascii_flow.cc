#include "emit/ascii_flow.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

#include "emit/dim_letters.h"
#include "emit/human_bytes.h"
#include "emit/tensor_glossary.h"
#include "emit/text_table.h"
#include "emit/xla_spmd_text.h"
#include "spmd/trace_totals.h"

namespace shardtrace {
namespace {

// One entry of a stage: a folded run of records of one tensor (indices into
// Trace::tensors); a constrained record is always alone.
struct Item {
  std::vector<int> tensors;
};

// A run of records in one scope, drawn as one box.
struct Stage {
  std::string scope;
  std::vector<Item> items;
};

std::string Repeat(const std::string& piece, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += piece;
  return out;
}

std::string PadTo(const std::string& text, size_t width) {
  return text + std::string(width - std::min(width, DisplayWidth(text)), ' ');
}

std::vector<std::string> WrapAll(const std::vector<std::string>& lines, size_t width) {
  std::vector<std::string> out;
  for (const std::string& line : lines)
    for (std::string& piece : WrapText(line, width)) out.push_back(std::move(piece));
  return out;
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

char Letter(const TensorRecord& t, size_t i) {
  return t.dims.size() == t.shape.size() ? t.dims[i] : '-';
}

// "[B=4,S=8,M=16]", a folded dim under its label ("P*E=8"); letters that name no dim ('-',
// '1') and dims without letters show the bare size.
std::string DimShape(const TensorRecord& t) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    const char letter = Letter(t, i);
    parts.push_back(letter == '-' || letter == '1'
                        ? std::to_string(t.shape[i])
                        : fmt::format("{}={}", DimLabel(letter), t.shape[i]));
  }
  return fmt::format("[{}]", fmt::join(parts, ","));
}

using Stated = std::vector<std::string>;

std::string IfText(const std::vector<std::string>& clauses, const Stated& stated) {
  std::vector<std::string> fresh;
  for (const std::string& c : clauses)
    if (std::find(stated.begin(), stated.end(), c) == stated.end()) fresh.push_back(c);
  return fresh.empty() ? "" : fmt::format("(if {})", fmt::join(fresh, " && "));
}

std::string DtypeOf(const OpRecord& op) {
  for (const auto& [key, value] : op.attrs)
    if (key == "dtype") return value;
  return "";
}

class FlowRenderer {
 public:
  FlowRenderer(const Trace& trace, const SpmdResult& spmd, size_t max_width,
               std::string_view only_scope)
      : trace_(trace), spmd_(spmd), width_(max_width) {
    producer_.assign(trace.tensors.size(), -1);
    for (size_t i = 0; i < trace.ops.size(); ++i)
      for (const int out : trace.ops[i].outputs)
        if (out >= 0 && out < static_cast<int>(producer_.size()))
          producer_[out] = static_cast<int>(i);
    stage_of_.assign(trace.tensors.size(), -1);
    for (size_t i = 0; i < trace.tensors.size(); ++i)
      if (only_scope.empty() || trace.tensors[i].scope.find(only_scope) != std::string::npos)
        Place(static_cast<int>(i));
  }

  std::string Render() const {
    std::vector<std::string> lines;
    size_t i = 0;
    while (i < stages_.size()) {
      size_t column_width = 0;
      const size_t end = GroupEnd(i, &column_width);
      const std::vector<std::string> part =
          end - i > 1 ? Parallel(i, end, column_width) : Sequential(i);
      lines.insert(lines.end(), part.begin(), part.end());
      i = end;
    }
    std::string out;
    for (const std::string& line : lines) {
      std::string trimmed = line;
      while (!trimmed.empty() && trimmed.back() == ' ') trimmed.pop_back();
      out += trimmed + "\n";
    }
    return out;
  }

 private:
  const OpRecord* Producer(int tensor) const {
    const int op = producer_[tensor];
    return op < 0 ? nullptr : &trace_.ops[op];
  }

  bool Collective(int tensor) const {
    const OpRecord* op = Producer(tensor);
    return op && op->collective;
  }

  // A record joins the previous item when both are unconstrained records of one name and
  // shape and neither moves data between devices: a chain of casts reads as one line.
  bool Joins(const Item& last, int id) const {
    const TensorRecord& prev = trace_.tensors[last.tensors.back()];
    const TensorRecord& t = trace_.tensors[id];
    return prev.name == t.name && prev.shape == t.shape && prev.condition == t.condition &&
           prev.constraint == Constraint::kNone && t.constraint == Constraint::kNone &&
           !Collective(last.tensors.back()) && !Collective(id);
  }

  void Place(int id) {
    const TensorRecord& t = trace_.tensors[id];
    if (stages_.empty() || stages_.back().scope != t.scope) stages_.push_back(Stage{t.scope, {}});
    std::vector<Item>& items = stages_.back().items;
    if (!items.empty() && Joins(items.back(), id)) {
      items.back().tensors.push_back(id);
    } else {
      items.push_back(Item{{id}});
    }
    stage_of_[id] = static_cast<int>(stages_.size()) - 1;
  }

  // The tensors a stage reads that earlier stages made, in order of first use.
  std::vector<int> ExternalInputs(size_t stage) const {
    std::vector<int> out;
    for (const Item& item : stages_[stage].items)
      for (const int id : item.tensors)
        if (const OpRecord* op = Producer(id))
          for (const int in : op->inputs)
            if (stage_of_[in] >= 0 && stage_of_[in] < static_cast<int>(stage) &&
                std::find(out.begin(), out.end(), in) == out.end())
              out.push_back(in);
    return out;
  }

  std::string InputNames(const std::vector<int>& ids) const {
    std::vector<std::string> names;
    for (const int id : ids) {
      const std::string& n = trace_.tensors[id].name;
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    return fmt::format("{}", fmt::join(names, ", "));
  }

  // How one op made a record: `einsum("BSM,ME->BSE", inputs, kernel)`, `as bf16` for a
  // cast, `top_k(gate_logits)`. `chained` is the record the previous op of the same line
  // made: it is the line's own tensor, so it is not repeated as an argument.
  std::string OpText(const OpRecord& op, int chained) const {
    std::vector<int> args;
    for (const int in : op.inputs)
      if (in != chained) args.push_back(in);
    if (op.kind == OpKind::kAstype) {
      const std::string dtype = ShortName(DtypeOf(op));
      return args.empty() ? "as " + dtype : InputNames(args) + " as " + dtype;
    }
    if (!op.equation.empty())
      return fmt::format("{}(\"{}\", {})", op.Name(), PageEquation(trace_, op),
                         InputNames(op.inputs));
    if (const std::string formula = OpFormula(trace_, op); !formula.empty()) return formula;
    if (args.empty()) return op.Name();
    return fmt::format("{}({})", op.Name(), InputNames(args));
  }

  static std::string ShortName(const std::string& dtype) {
    if (dtype == "bfloat16") return "bf16";
    if (dtype == "float32") return "f32";
    if (dtype == "float16") return "f16";
    if (dtype == "int32") return "i32";
    return dtype;
  }

  std::string CollectiveText(const OpRecord& op) const {
    const CollectiveRecord& c = *op.collective;
    const auto max_of = [](const std::vector<int64_t>& v) {
      return v.empty() ? int64_t{0} : *std::max_element(v.begin(), v.end());
    };
    return fmt::format("⇄{} {}({}) over {}, groups of {}: sent {}, received {} per device (max)",
                       c.origin == CollectiveOrigin::kImplied ? " xla" : "", ToString(c.kind),
                       op.inputs.empty() ? "" : trace_.tensors[op.inputs.front()].name,
                       fmt::join(c.axes, ","), c.participants, HumanBytes(max_of(c.bytes_sent)),
                       HumanBytes(max_of(c.bytes_received)));
  }

  std::string Head(const TensorRecord& t) const { return TensorHead(t); }

  // `(if ...)` for the clauses the box title did not state, then `# note` for a note on the
  // value (who reads it), which is no condition.
  std::string Condition(const TensorRecord& t, const Stated& stated) const {
    const std::string text = IfText(t.condition_clauses, stated);
    return (text.empty() ? "" : "  " + text) + (t.note.empty() ? "" : "  # " + t.note);
  }

  // The condition clauses every record of a stage shares, in the order of the first.
  std::vector<std::string> Common(size_t stage) const {
    std::vector<std::string> common;
    bool first = true;
    for (const Item& item : stages_[stage].items)
      for (const int id : item.tensors) {
        const std::vector<std::string>& clauses = trace_.tensors[id].condition_clauses;
        if (first) {
          common = clauses;
          first = false;
          continue;
        }
        std::erase_if(common, [&](const std::string& c) {
          return std::find(clauses.begin(), clauses.end(), c) == clauses.end();
        });
      }
    return common;
  }

  // An unconstrained run of records: `name: act [dims] dtype ← op, op  (if cond)`.
  std::vector<std::string> PlainLines(const std::vector<int>& ids, const Stated& stated,
                                      size_t width, int previous) const {
    const TensorRecord& t = trace_.tensors[ids.back()];
    std::vector<std::string> ops;
    // The line just above holding the same name is this tensor's earlier value: an op on
    // it (checkpoint_name(layer_w0)) does not repeat it.
    int chained = previous >= 0 && trace_.tensors[previous].name == t.name ? previous : -1;
    for (const int id : ids) {
      if (const OpRecord* op = Producer(id)) ops.push_back(OpText(*op, chained));
      chained = id;
    }
    std::string line = Head(t);
    if (!ops.empty()) line += fmt::format("  ← {}", fmt::join(ops, ", "));
    std::vector<std::string> lines = WrapText(line + Condition(t, stated), width);
    for (const int id : ids) {
      if (Collective(id))
        for (std::string& l : WrapText("  " + CollectiveText(*Producer(id)), width, 6))
          lines.push_back(std::move(l));
      AddImplied(id, width, &lines);
    }
    return lines;
  }

  // The collectives XLA inserts at the op that writes `id` (SpmdResult::implied), once per op.
  void AddImplied(int id, size_t width, std::vector<std::string>* lines) const {
    const OpRecord* op = Producer(id);
    if (!op || op->outputs.empty() || op->outputs.front() != id) return;
    for (const ImpliedCollective& c : spmd_.implied_at(op->id))
      // a local slice to a finer sharding moves nothing: no collective (the spec lists it apart)
      if (c.kind != CollectiveKind::kSlice)
        for (std::string& l : WrapText("  " + ImpliedFlowText(trace_, c), width, 6))
          lines->push_back(std::move(l));
  }

  // Per dim: the logical axis and the mesh axes of the PartitionSpec entry it resolved to.
  std::vector<std::string> DimLines(const TensorRecord& t) const {
    const PartitionSpec& spec = *t.partition_spec;
    std::vector<std::array<std::string, 3>> rows = {{"dim", "logical axis", "mesh axes"}};
    for (size_t i = 0; i < t.shape.size(); ++i) {
      const char letter = Letter(t, i);
      const std::string dim = letter == '-' || letter == '1'
                                  ? std::to_string(t.shape[i])
                                  : fmt::format("{}={}", DimLabel(letter), t.shape[i]);
      std::string logical = "-";
      if (t.logical_axes && i < t.logical_axes->size() && (*t.logical_axes)[i])
        logical = "'" + *(*t.logical_axes)[i] + "'";
      else if (t.logical_axes)
        logical = "None";
      rows.push_back({dim, logical, PartitionSpec::EntryToString(spec[i])});
    }
    size_t w0 = 0, w1 = 0;
    for (const auto& r : rows) {
      w0 = std::max(w0, DisplayWidth(r[0]));
      w1 = std::max(w1, DisplayWidth(r[1]));
    }
    std::vector<std::string> out;
    for (const auto& r : rows)
      out.push_back(t.logical_axes
                        ? fmt::format("  {}  {} → {}", PadTo(r[0], w0), PadTo(r[1], w1), r[2])
                        : fmt::format("  {}  → {}", PadTo(r[0], w0), r[2]));
    return out;
  }

  // A record an explicit statement placed: a double-line box titled by the statement.
  std::vector<std::string> ConstrainedLines(int id, const Stated& stated, size_t width) const {
    const TensorRecord& t = trace_.tensors[id];
    std::string head = Head(t);
    if (const OpRecord* op = Producer(id); op && !op->inputs.empty()) {
      std::vector<int> renamed;
      for (const int in : op->inputs)
        if (trace_.tensors[in].name != t.name) renamed.push_back(in);
      if (!renamed.empty()) head += "  ← " + InputNames(renamed);
    }
    std::vector<std::string> body = {head};
    if (const std::string cond = Condition(t, stated); !cond.empty()) {
      if (DisplayWidth(head + cond) <= width - 4) {
        body.front() += cond;
      } else {
        body.push_back(cond);
      }
    }
    if (t.partition_spec && t.partition_spec->rank() == t.shape.size()) {
      for (std::string& l : DimLines(t)) body.push_back(std::move(l));
    } else {
      if (t.logical_axes) body.push_back("logical " + LogicalAxesToString(*t.logical_axes));
    }
    const std::string spec = t.partition_spec ? t.partition_spec->ToString() : "P()";
    const TensorSpmd& placed = spmd_.tensor(id);
    const std::string local = fmt::format("{} per device, {}", ShapeToString(placed.local_shape),
                                          HumanBytes(placed.bytes_per_device));
    if (DisplayWidth(spec + ": " + local) <= width - 4) {
      body.push_back(spec + ": " + local);
    } else {
      body.push_back(spec);
      body.push_back("  = " + local);
    }
    std::vector<std::string> lines =
        Frame(ToString(t.constraint), WrapAll(body, width - 4), /*heavy=*/true);
    if (Collective(id))
      for (std::string& l : WrapText("  " + CollectiveText(*Producer(id)), width, 6))
        lines.push_back(std::move(l));
    AddImplied(id, width, &lines);
    return lines;
  }

  std::vector<std::string> Contents(size_t stage, const Stated& stated, size_t width) const {
    std::vector<std::string> lines;
    int previous = -1;
    for (const Item& item : stages_[stage].items) {
      const std::vector<std::string> part =
          trace_.tensors[item.tensors.front()].constraint != Constraint::kNone
              ? ConstrainedLines(item.tensors.front(), stated, width)
              : PlainLines(item.tensors, stated, width, previous);
      lines.insert(lines.end(), part.begin(), part.end());
      previous = item.tensors.back();
    }
    return lines;
  }

  // A stage as lines at most `width` wide: a box titled by its scope (and the conditions
  // all its records share), or bare lines at the top level.
  std::vector<std::string> StageLines(size_t stage, size_t width) const {
    const Stage& s = stages_[stage];
    if (s.scope.empty()) return Contents(stage, {}, width);
    const std::vector<std::string> common = Common(stage);
    const std::string condition = IfText(common, {});
    // A deep scope path keeps its last segments; a condition that does not fit beside the
    // title becomes the box's first line.
    std::string title = ScopeText(s.scope);
    std::vector<std::string> segments;
    for (size_t start = 0; start <= title.size();) {
      const size_t end = std::min(title.find('/', start), title.size());
      segments.push_back(title.substr(start, end - start));
      start = end + 1;
    }
    while (DisplayWidth(title) + 8 > width && segments.size() > 2) {
      segments.erase(segments.begin());
      title = fmt::format("…/{}", fmt::join(segments, "/"));
    }
    std::vector<std::string> body;
    if (!condition.empty() && DisplayWidth(title) + DisplayWidth(condition) + 7 <= width) {
      title += " " + condition;
    } else if (!condition.empty()) {
      body = WrapText(condition, width - 4);
    }
    for (std::string& l : Contents(stage, common, width - 4)) body.push_back(std::move(l));
    return Frame(title, body, /*heavy=*/false);
  }

  std::string Connector(size_t stage) const {
    const std::vector<int> in = ExternalInputs(stage);
    return in.empty() ? "  ▼" : "  ▼ " + InputNames(in);
  }

  std::vector<std::string> Sequential(size_t stage) const {
    std::vector<std::string> lines;
    if (stage > 0)
      for (std::string& l : WrapText(Connector(stage), width_, 4)) lines.push_back(std::move(l));
    for (std::string& l : StageLines(stage, width_)) lines.push_back(std::move(l));
    return lines;
  }

  static size_t Width(const std::vector<std::string>& lines) {
    size_t w = 0;
    for (const std::string& l : lines) w = std::max(w, DisplayWidth(l));
    return w;
  }

  // Stages [begin, end) are drawn side by side when they form a fork: each reads a tensor
  // an earlier stage made that all of them read (wi_0 and wi_1 both read the dispatched
  // tokens), none reads another's tensors, and they fit, at their natural width or
  // wrapped to an equal share of it. Returns `end` and sets `column_width` (0: natural).
  size_t GroupEnd(size_t begin, size_t* column_width) const {
    *column_width = 0;
    if (begin == 0 || stages_[begin].scope.empty()) return begin + 1;
    std::vector<int> shared = ExternalInputs(begin);
    size_t end = begin + 1;
    while (end < stages_.size() && end - begin < 3 && !stages_[end].scope.empty()) {
      const std::vector<int> in = ExternalInputs(end);
      bool independent = true;
      for (const int id : in)
        if (stage_of_[id] >= static_cast<int>(begin)) independent = false;
      std::vector<int> common;
      for (const int id : shared)
        if (std::find(in.begin(), in.end(), id) != in.end()) common.push_back(id);
      if (!independent || common.empty()) break;
      shared = common;
      ++end;
    }
    while (end - begin > 1) {
      const size_t n = end - begin;
      size_t natural = 2 * (n - 1);
      for (size_t s = begin; s < end; ++s) natural += Width(StageLines(s, width_));
      if (natural <= width_) return end;
      const size_t share = (width_ - 2 * (n - 1)) / n;
      if (share >= 56) {
        *column_width = share;
        return end;
      }
      --end;
    }
    return end;
  }

  // Independent stages under a fork from the flow's column, closed by a join.
  std::vector<std::string> Parallel(size_t begin, size_t end, size_t column_width) const {
    std::vector<std::vector<std::string>> columns;
    std::vector<size_t> starts;
    size_t x = 0;
    for (size_t s = begin; s < end; ++s) {
      const std::vector<std::string> box = StageLines(s, column_width ? column_width : width_);
      std::vector<std::string> col = WrapText(Connector(s), Width(box), 4);
      col.insert(col.end(), box.begin(), box.end());
      starts.push_back(x);
      x += Width(col) + 2;
      columns.push_back(std::move(col));
    }
    const auto edge = [&](const std::string& left, const std::string& mid,
                          const std::string& right) {
      std::string line = "  " + left;
      size_t at = 3;
      for (size_t k = 1; k < starts.size(); ++k) {
        line += Repeat("─", starts[k] + 2 - at) + (k + 1 == starts.size() ? right : mid);
        at = starts[k] + 3;
      }
      return line;
    };
    std::vector<std::string> lines;
    lines.push_back(edge("├", "┬", "┐"));
    size_t height = 0;
    for (const auto& col : columns) height = std::max(height, col.size());
    for (size_t row = 0; row < height; ++row) {
      std::string line;
      for (size_t k = 0; k < columns.size(); ++k) {
        // A column that ended early continues its flow line down to the join.
        line = PadTo(line, starts[k]);
        line += row < columns[k].size() ? columns[k][row] : "  │";
      }
      lines.push_back(line);
    }
    lines.push_back(edge("├", "┴", "┘"));
    return lines;
  }

  const Trace& trace_;
  const SpmdResult& spmd_;
  size_t width_;
  std::vector<int> producer_;  // tensor id -> index of the op that made it, -1 if none
  std::vector<int> stage_of_;  // tensor id -> stage index
  std::vector<Stage> stages_;
};

}  // namespace

std::string ShortDtype(DType dtype) {
  switch (dtype) {
    case DType::kBfloat16:
      return "bf16";
    case DType::kFloat16:
      return "f16";
    case DType::kFloat32:
      return "f32";
    case DType::kInt32:
      return "i32";
    case DType::kBool:
      return "bool";
    case DType::kFloat8E4M3Fn:
      return "f8e4m3fn";
  }
  return ToString(dtype);
}

std::string OpFormula(const Trace& trace, const OpRecord& op) {
  for (const auto& [key, value] : op.attrs) {
    if (key != "expr") continue;
    if (op.kind == OpKind::kTransformArray && !op.inputs.empty())
      return fmt::format("{}, A = {}", value, trace.tensors[op.inputs.front()].name);
    return value;
  }
  return "";
}

std::string TensorHead(const TensorRecord& t) {
  return fmt::format("{}: {} {} {}", t.name, ToString(t.kind), DimShape(t), ShortDtype(t.dtype));
}

std::string AsciiFlow(const Trace& trace, const SpmdResult& spmd, size_t max_width,
                      std::string_view only_scope) {
  return FlowRenderer(trace, spmd, max_width, only_scope).Render();
}

}  // namespace shardtrace
