#include "emit/spec_markdown.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <kainjow/mustache.hpp>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "config/moe_lines.h"
#include "emit/ascii_flow.h"
#include "emit/dim_letters.h"
#include "emit/human_bytes.h"
#include "emit/tensor_glossary.h"
#include "emit/text_table.h"
#include "emit/xla_spmd_text.h"
#include "ir/fact_text.h"
#include "spmd/trace_totals.h"
#include "util/error.h"

namespace shardtrace {
namespace {

using kainjow::mustache::data;
using kainjow::mustache::mustache;

// Code blocks stay within this many columns (GitHub shows ~100 without scrolling).
constexpr size_t kCodeWidth = 100;

// Markdown table cells cannot hold a bare '|'.
std::string Cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// A table cell in code font; empty stays empty (no stray backticks).
std::string Code(const std::string& text) {
  return text.empty() ? "" : fmt::format("`{}`", Cell(text));
}

std::string DimsShape(const TensorRecord& t) {
  return t.dims.empty() ? ShapeToString(t.shape) : ShapeToString(t.shape) + " " + DimsText(t.dims);
}

data List() { return data(data::type::list); }

// Sizes each letter takes, outside shard_map (global) and inside (per device), in order of
// first appearance.
// A meaning longer than this goes under the table (rows stay within 200 characters).
constexpr size_t kLongMeaning = 140;

data Definitions(const Trace& trace, std::vector<std::string>* notes) {
  std::map<char, std::pair<std::vector<int64_t>, std::vector<int64_t>>> sizes;
  for (const TensorRecord& t : trace.tensors) {
    if (t.dims.size() != t.shape.size()) continue;
    for (size_t i = 0; i < t.dims.size(); ++i) {
      auto& seen = t.in_shard_map ? sizes[t.dims[i]].second : sizes[t.dims[i]].first;
      if (std::find(seen.begin(), seen.end(), t.shape[i]) == seen.end()) seen.push_back(t.shape[i]);
    }
  }
  const bool context_groups = sizes.count('N') > 0;
  data rows = List();
  for (const char letter : DimLetterOrder()) {
    const auto found = sizes.find(letter);
    if (found == sizes.end()) continue;
    const auto& [global, local] = found->second;
    // Inside shard_map only the sizes that differ from the global ones say something.
    std::vector<int64_t> only_local;
    for (const int64_t size : local)
      if (std::find(global.begin(), global.end(), size) == global.end()) only_local.push_back(size);
    std::vector<std::string> parts;
    if (!global.empty()) parts.push_back(fmt::format("{}", fmt::join(global, ", ")));
    if (!only_local.empty())
      parts.push_back(fmt::format("{} inside shard_map", fmt::join(only_local, ", ")));
    // A meaning says what the letter is on this trace: E is the local experts only where
    // shard_map shows a size of its own, S per context group only under context groups.
    std::string meaning = DimMeaning(letter, trace.revision);
    if (letter == 'S' && context_groups) meaning += " (per context group)";
    if (letter == 'E' && !only_local.empty())
      meaning += "; inside shard_map, this device's local experts";
    data row;
    row.set("letter", DimLabel(letter));
    if (DisplayWidth(meaning) > kLongMeaning) {
      notes->push_back(fmt::format("`{}`: {}", DimLabel(letter), meaning));
      meaning = "(under the table)";
    }
    row.set("meaning", Cell(meaning));
    row.set("sizes", fmt::format("{}", fmt::join(parts, "; ")));
    rows.push_back(row);
  }
  return rows;
}

// One row per value a reader tells apart, in order of first appearance: the records of one
// name, kind, shape and meaning are one row even when moe.py casts or constrains it in
// between (`float32→bfloat16`, the placement the statement set); a second, different explicit
// placement of the same value gets a row of its own.
data DataStructures(const Trace& trace, const SpmdResult& spmd) {
  struct Row {
    std::string key;  // name, kind, shape, meaning
    const TensorRecord* first = nullptr;
    const TensorRecord* placed = nullptr;  // the constrained record, if one
    std::vector<DType> dtypes;
    std::string meaning;
    std::string note;              // the first record's note that has one
    std::optional<DType> back_to;  // the last record's dtype, when an earlier one
  };
  const auto placement = [&](const TensorRecord& t) {
    return fmt::format("{}|{}|{}|{}", t.logical_axes ? LogicalAxesToString(*t.logical_axes) : "",
                       t.partition_spec ? t.partition_spec->ToString() : "",
                       ShapeToString(spmd.tensor(t.id).local_shape), ToString(t.constraint));
  };
  std::vector<bool> constant_scalar(trace.tensors.size(), false);  // nothing for XLA to place
  for (const OpRecord& op : trace.ops)
    for (const int o : op.outputs)
      constant_scalar[o] = op.kind == OpKind::kConstant && trace.tensors[o].shape.empty();
  std::vector<Row> merged;
  for (const TensorRecord& t : trace.tensors) {
    const std::string meaning = TensorMeaning(t, trace.revision);
    // The block's input is its own row: it arrives placed by the decoder layer, and a later
    // value moe.py casts or constrains under the same name is not it.
    const std::string key = fmt::format("{}|{}|{}|{}{}", t.name, ToString(t.kind), DimsShape(t),
                                        meaning, t.id == trace.input ? "|block input" : "");
    const bool constrained = t.constraint != Constraint::kNone;
    Row* row = nullptr;
    for (Row& r : merged) {
      if (r.key != key) continue;
      if (!constrained || !r.placed || placement(*r.placed) == placement(t)) {
        row = &r;
        break;
      }
    }
    if (!row) {
      merged.push_back({key, &t, nullptr, {}, meaning, "", std::nullopt});
      row = &merged.back();
    }
    if (row->note.empty()) row->note = t.note;
    if (constrained && !row->placed) row->placed = &t;
    // Each dtype once, in order, and a cast back at the end (bf16→f32→bf16); a loop's
    // iterations repeating the same casts do not repeat them.
    if (std::find(row->dtypes.begin(), row->dtypes.end(), t.dtype) == row->dtypes.end()) {
      row->dtypes.push_back(t.dtype);
      row->back_to = std::nullopt;
    } else {
      row->back_to = t.dtype == row->dtypes.back() ? std::nullopt : std::optional(t.dtype);
    }
  }
  data rows = List();
  for (const Row& r : merged) {
    const TensorRecord& t = r.placed ? *r.placed : *r.first;
    const TensorSpmd& s = spmd.tensor(t.id);
    const std::string local =
        t.constraint != Constraint::kNone || t.in_shard_map
            ? fmt::format("{} ({})", ShapeToString(s.local_shape), HumanBytes(s.bytes_per_device))
            : "";
    std::vector<std::string> dtypes;
    for (const DType d : r.dtypes) dtypes.push_back(ToString(d));
    if (r.back_to) dtypes.push_back(ToString(*r.back_to));
    data row;
    row.set("name", Cell(t.name));
    row.set("kind", ToString(t.kind));
    row.set("dtype", fmt::format("{}", fmt::join(dtypes, "→")));
    row.set("shape", Cell(DimsShape(t)));
    const bool arrives = s.placement == Placement::kArgument && s.propagated_spec;
    row.set("logical", Code(t.logical_axes ? LogicalAxesToString(*t.logical_axes) : ""));
    row.set("spec", Code(t.partition_spec ? t.partition_spec->ToString()
                         : arrives        ? s.propagated_spec->ToString()
                                          : ""));
    row.set("local", Cell(arrives ? fmt::format("{} ({})", ShapeToString(s.local_shape),
                                                HumanBytes(s.bytes_per_device))
                                  : local));
    row.set("constraint", arrives ? "the decoder layer (block input, a jit argument)"
                          : t.constraint != Constraint::kNone ? ToString(t.constraint)
                          : t.in_shard_map                    ? "per device (shard_map body)"
                          : t.kind == TensorKind::kWeight     ? "-"
                          : constant_scalar[t.id]             ? "- (a constant)"
                                                              : "propagated by XLA");
    row.set("meaning", Cell(r.note.empty()      ? r.meaning
                            : r.meaning.empty() ? r.note
                                                : r.meaning + "; " + r.note));
    row.set("scope", Cell(r.first->scope.empty() ? "(top)" : ScopeText(r.first->scope)));
    rows.push_back(row);
  }
  return rows;
}

std::string Names(const Trace& trace, const std::vector<int>& ids) {
  std::vector<std::string> names;
  for (const int id : ids) names.push_back(trace.tensors[id].name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// The attributes worth a reader's eye in pseudocode; the rest (tilings, formatted index
// expressions) stay in `shardtrace trace` output.
bool ShowAttr(const std::string& key, const std::string& value) {
  return key != "logical_axes" && key != "global_shape" && key != "tiling_fwd" &&
         key != "padded_rows" && key != "index" && value.size() <= 40;
}

// The recorded ops as pseudocode, one statement per value a later step reads by name:
// a value only the next op of the same scope reads is folded into that op's expression
// (`top_k_weights = softmax(top_k_weights as f32) as bf16`), casts read `x as bf16`,
// sharding constraints `constrain(x, P(...))`, collectives `⇄ kind(x over axes)`. A `#`
// header names each scope (and, `line_refs`, where it starts in moe.py). Names repeat as
// moe.py reuses them: a bare name is the latest value, `name@N` the one statement N made.
std::string Algorithm(const Trace& trace, bool line_refs) {
  std::vector<int> uses(trace.tensors.size(), 0);
  std::vector<int> reader(trace.tensors.size(), -1);  // the op that reads it (if one)
  for (size_t i = 0; i < trace.ops.size(); ++i)
    for (const int in : trace.ops[i].inputs) {
      ++uses[in];
      reader[in] = static_cast<int>(i);
    }
  std::vector<std::string> pending(trace.tensors.size());       // folded expressions
  std::vector<int> step_of(trace.tensors.size(), 0);            // tensor id -> statement number
  std::map<std::string, int> latest;                            // name -> id of its latest value
  std::vector<std::pair<std::string, std::string>> statements;  // (scope, text)
  const auto arg = [&](int in) {
    if (!pending[in].empty()) return std::exchange(pending[in], "");
    const std::string& name = trace.tensors[in].name;
    const auto found = latest.find(name);
    const bool stale = found != latest.end() && found->second != in && step_of[in] > 0;
    return stale ? fmt::format("{}@{}", name, step_of[in]) : name;
  };
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const OpRecord& op = trace.ops[i];
    std::vector<std::string> args;
    if (!op.equation.empty()) args.push_back(fmt::format("\"{}\"", PageEquation(trace, op)));
    for (const int in : op.inputs) args.push_back(arg(in));
    std::vector<std::string> attrs = args;
    for (const auto& [key, value] : op.attrs)
      if (ShowAttr(key, value) && key != "dtype" && key != "spec")
        attrs.push_back(fmt::format("{}={}", key, value));
    std::string expr;
    const TensorRecord* out = op.outputs.empty() ? nullptr : &trace.tensors[op.outputs.front()];
    if (op.kind == OpKind::kAstype && args.size() == 1 && out) {
      expr = fmt::format("{} as {}", args[0], ShortDtype(out->dtype));
    } else if (op.collective) {
      expr = fmt::format("⇄ {}({} over {})", op.Name(), fmt::join(args, ", "),
                         fmt::join(op.collective->axes, ","));
    } else if (out && out->constraint != Constraint::kNone && out->partition_spec) {
      const std::string fn = args.empty()                                  ? "param"
                             : out->constraint == Constraint::kShardMapIn  ? "shard_map_in"
                             : out->constraint == Constraint::kShardMapOut ? "shard_map_out"
                                                                           : "constrain";
      args.push_back(out->partition_spec->ToString());
      // Where moe.py makes this statement, when the trace is moe.py's.
      const std::string line = line_refs ? MoeStatementLine(trace.revision, op.scope, out->name,
                                                            ToString(out->constraint))
                                         : "";
      expr = fmt::format("{}({})  # {}{}", fn, fmt::join(args, ", "), ToString(out->constraint),
                         line.empty() ? "" : ", " + line);
    } else if (const std::string formula = OpFormula(trace, op);
               !formula.empty() && std::equal(args.begin(), args.end(), op.inputs.begin(),
                                              [&](const std::string& a, int in) {
                                                return a == trace.tensors[in].name;
                                              })) {
      expr = formula;  // what moe.py computes, when no folded input needs writing out
    } else {
      expr = fmt::format("{}({})", op.Name(), fmt::join(attrs, ", "));
    }
    // Fold a single-use value into the next op of the same scope that reads it.
    // Named constants (zeros, capacity) keep their statement; long expressions too.
    if (op.outputs.size() == 1 && uses[op.outputs[0]] == 1 && !op.inputs.empty() &&
        DisplayWidth(expr) <= 48 && reader[op.outputs[0]] == static_cast<int>(i) + 1 &&
        trace.ops[i + 1].scope == op.scope && out->constraint == Constraint::kNone &&
        out->note.empty() && !op.collective && expr.find("  #") == std::string::npos) {
      pending[op.outputs[0]] = expr;
      continue;
    }
    // A note on the value (who reads it) follows as a comment; it is not a condition.
    const std::string note = out && !out->note.empty() ? fmt::format("  # {}", out->note) : "";
    statements.emplace_back(op.scope,
                            fmt::format("{} = {}{}", Names(trace, op.outputs), expr, note));
    for (const int o : op.outputs) {
      step_of[o] = static_cast<int>(statements.size());
      latest[trace.tensors[o].name] = o;
    }
  }
  const int width = static_cast<int>(std::to_string(statements.size()).size());
  std::string text;
  std::string scope = "\x01";
  for (size_t n = 0; n < statements.size(); ++n) {
    const auto& [sc, body] = statements[n];
    if (sc != scope) {
      scope = sc;
      const std::string ref = line_refs ? MoeLineRef(trace.revision, sc) : "";
      const std::string header = fmt::format("# {}{}", sc.empty() ? "(top)" : ScopeText(sc),
                                             ref.empty() ? "" : "  (" + ref + ")");
      text += text.empty() ? "" : "\n";
      for (const std::string& piece : WrapText(header, kCodeWidth, 2)) text += piece + "\n";
    }
    const std::string line = fmt::format("{:>{}}. {}", n + 1, width, body);
    for (const std::string& piece : WrapText(line, kCodeWidth, width + 6)) text += piece + "\n";
  }
  return text;
}

std::string Indexed(const std::string& name, const std::string& letters) {
  std::vector<std::string> idx;
  for (const char c : letters) idx.push_back(DimLabel(c));
  return fmt::format("{}[{}]", name, fmt::join(idx, ","));
}

// What an equation computes, written out as a sum: `out[B,S,E] = Σ_M x[B,S,M] · w[M,E]`.
std::string EinsumMeaning(const Trace& trace, const OpRecord& op) {
  const std::string out_name = trace.tensors[op.outputs.front()].name;
  if (op.kind == OpKind::kGmm && op.inputs.size() >= 3) {
    std::string kernel;
    for (const auto& [key, value] : op.attrs)
      if (key == "kernel") kernel = ", " + value;
    return fmt::format(
        "grouped matmul{}: `{}[r,:] = {}[r,:] · {}[group(r)]`, row r's group from the sizes in "
        "`{}` (rows are sorted by expert)",
        kernel, out_name, trace.tensors[op.inputs[0]].name, trace.tensors[op.inputs[1]].name,
        trace.tensors[op.inputs[2]].name);
  }
  if (!op.einsum) return "";
  // In the page's letters (the Definitions table's), not moe.py's.
  const ParsedEinsum page = PageEinsum(trace, op).value_or(*op.einsum);
  const std::vector<std::string>& operands = page.operands;
  const std::string& out_letters = page.output;
  const std::string& contracted = page.contracted;
  if (operands.size() != op.inputs.size()) return "";
  std::vector<std::string> factors;
  for (size_t i = 0; i < operands.size(); ++i)
    factors.push_back(Indexed(trace.tensors[op.inputs[i]].name, operands[i]));
  const std::string product = fmt::format("{}", fmt::join(factors, " · "));
  if (contracted.empty())
    return fmt::format("`{} = {}`: no contraction (broadcast product)",
                       Indexed(out_name, out_letters), product);
  std::vector<std::string> what;
  std::vector<std::string> over_labels;
  for (const char c : contracted) {
    over_labels.push_back(DimLabel(c));
    what.push_back(fmt::format("{} ({})", DimLabel(c), DimMeaning(c, trace.revision)));
  }
  const std::string over = over_labels.size() == 1
                               ? over_labels.front()
                               : fmt::format("{{{}}}", fmt::join(over_labels, ","));
  return fmt::format("`{} = Σ_{} {}`: contracts {}", Indexed(out_name, out_letters), over, product,
                     fmt::join(what, ", "));
}

data Einsums(const Trace& trace) {
  std::vector<std::pair<std::string, const OpRecord*>> order;
  std::map<std::string, int> counts;
  for (const OpRecord& op : trace.ops) {
    if (op.equation.empty() || op.outputs.empty()) continue;
    std::vector<std::string> in_names;
    for (const int in : op.inputs) in_names.push_back(trace.tensors[in].name);
    const std::string call = fmt::format("{} = {}(\"{}\", {})", Names(trace, op.outputs), op.Name(),
                                         PageEquation(trace, op), fmt::join(in_names, ", "));
    if (counts[call]++ == 0) order.emplace_back(call, &op);
  }
  data rows = List();
  for (const auto& [call, op] : order) {
    const int n = counts[call];
    data row;
    row.set("call", Cell(call));
    // moe.py's own letters, where the page renamed them, so the reader finds the line.
    const std::string page = PageEquation(trace, *op);
    const std::string spelled =
        page == op->equation ? ""
        : op->kind == OpKind::kGmm
            ? fmt::format("; moe.py calls gmm with no equation, the trace spells it `{}`",
                          op->equation)
            : fmt::format("; moe.py spells it `{}`", op->equation);
    row.set("meaning",
            Cell(EinsumMeaning(trace, *op) + spelled + (n > 1 ? fmt::format(" (x{})", n) : "")));
    row.set("scope", Cell(ScopeText(op->scope)));
    rows.push_back(row);
  }
  return rows;
}

std::string ByteRange(const std::vector<int64_t>& bytes) {
  if (bytes.empty()) return "";
  const auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
  return *lo == *hi ? HumanBytes(*hi) : fmt::format("{}–{}", HumanBytes(*lo), HumanBytes(*hi));
}

// Whether a collective XLA implies moves data: a slice to a finer sharding is local.
bool Communicates(const ImpliedCollective& c) { return c.kind != CollectiveKind::kSlice; }

// The reshards XLA does without communication (each device slices what it holds whole).
data LocalReshards(const Trace& trace, const SpmdResult& spmd) {
  data rows = List();
  for (const OpRecord& op : trace.ops)
    for (const ImpliedCollective& c : spmd.implied_at(op.id)) {
      if (Communicates(c)) continue;
      data row;
      row.set("tensor", Cell(trace.tensors[c.tensor].name));
      row.set("from", c.from.ToString());
      row.set("to", c.to.ToString());
      row.set("axes", fmt::format("{}", fmt::join(c.axes, ", ")));
      row.set("output", Cell(Names(trace, op.outputs)));
      row.set("scope", Cell(ScopeText(op.scope)));
      rows.push_back(row);
    }
  return rows;
}

// A collective row's scope: its last three segments after "…/" when deeper, so a row of
// DeepSeek's group routing (RoutedAndSharedMoE/RoutedMoE/dense_matmul/get_topk/...) stays on
// one screen line; the ops table beside it keeps the whole path.
std::string CollectiveScope(const std::string& scope) {
  const std::string text = ScopeText(scope);
  size_t cut = text.size();
  for (int kept = 0; kept < 3 && cut != std::string::npos && cut > 0; ++kept)
    cut = text.rfind('/', cut - 1);
  return cut == std::string::npos || cut == 0 ? text : "…" + text.substr(cut);
}

// `written_in` names the code whose collectives the trace records ("moe.py", or PR 3981's
// pipeline as shardtrace models it).
data Collectives(const Trace& trace, const SpmdResult& spmd, const std::string& written_in) {
  data rows = List();
  for (const OpRecord& op : trace.ops) {
    for (const ImpliedCollective& c : spmd.implied_at(op.id)) {
      if (!Communicates(c)) continue;
      data row;
      row.set("op", HloName(c.kind));
      row.set("origin", "implied by XLA");
      row.set("axes", Cell(fmt::format("{}", fmt::join(c.axes, ", "))));
      row.set("participants", std::to_string(c.participants));
      row.set("input", Cell(trace.tensors[c.tensor].name));
      row.set("output", Cell(Names(trace, op.outputs)));
      row.set("scope", Cell(CollectiveScope(op.scope)));
      row.set("sent", HumanBytes(c.bytes_per_device));
      row.set("received", HumanBytes(c.bytes_per_device));
      rows.push_back(row);
    }
    if (!op.collective) continue;
    const CollectiveRecord& c = *op.collective;
    data row;
    row.set("op", ToString(c.kind));
    row.set("origin",
            c.origin == CollectiveOrigin::kWritten ? "written in " + written_in : "implied by XLA");
    row.set("axes", Cell(fmt::format("{}", fmt::join(c.axes, ", "))));
    row.set("participants", std::to_string(c.participants));
    row.set("input", op.inputs.empty() ? "" : Cell(trace.tensors[op.inputs.front()].name));
    row.set("output", Cell(Names(trace, op.outputs)));
    row.set("scope", Cell(CollectiveScope(op.scope)));
    row.set("sent", ByteRange(c.bytes_sent));
    row.set("received", ByteRange(c.bytes_received));
    rows.push_back(row);
  }
  return rows;
}

data Invariants(const std::vector<Invariant>& invariants) {
  data rows = List();
  int n = 0;
  for (const Invariant& inv : invariants) {
    data row;
    row.set("n", std::to_string(++n));
    row.set("statement", inv.statement);
    row.set("reason", inv.reason);
    row.set("result", inv.result);
    row.set("source", inv.source);
    row.set("has_source", !inv.source.empty());
    row.set("run", inv.run);
    row.set("has_run", !inv.run.empty());
    rows.push_back(row);
  }
  return rows;
}

data Facts(const Trace& trace) {
  data rows = List();
  std::map<std::string, int> uses;  // a fact recorded once per loop iteration repeats its name
  for (const Fact& f : trace.facts) ++uses[FactName(f)];
  for (const Fact& f : trace.facts) {
    data row;
    // Repeated names say where each was recorded: the last two parts of the scope
    // ("chunk_0/dispatch").
    std::string where;
    if (uses[FactName(f)] > 1) {
      const size_t last = f.scope.rfind('/');
      const size_t cut =
          last == std::string::npos || last == 0 ? std::string::npos : f.scope.rfind('/', last - 1);
      where = fmt::format(" in `{}`", cut == std::string::npos ? f.scope : f.scope.substr(cut + 1));
    }
    row.set("name", FactName(f) + where);
    row.set("values", FactValuesText(f));
    const std::string note = FactNote(f);
    row.set("note", note.empty() ? "" : " (" + note + ")");
    rows.push_back(row);
  }
  return rows;
}

// Rows = explicitly placed weights (in the order the first variant records them), columns =
// variants; a weight a variant does not place shows "-".
std::string VariantTable(const std::vector<VariantColumn>& all) {
  std::vector<VariantColumn> variants;
  std::string untraced;
  for (const VariantColumn& v : all) {
    if (v.not_traced.empty())
      variants.push_back(v);
    else
      untraced += fmt::format("\nNot traced: {}: {}\n", v.label, v.not_traced);
  }
  if (variants.empty()) return "";
  std::vector<std::string> rows;
  for (const VariantColumn& v : variants)
    for (const auto& [name, spec] : v.specs)
      if (std::find(rows.begin(), rows.end(), name) == rows.end()) rows.push_back(name);
  std::string out = "| weight |";
  std::string rule = "|---|";
  for (const VariantColumn& v : variants) {
    out += " " + Cell(v.label) + " |";
    rule += "---|";
  }
  out += "\n" + rule + "\n| mesh |";
  for (const VariantColumn& v : variants) out += " " + Code(v.mesh) + " |";
  out += "\n";
  for (const std::string& name : rows) {
    out += "| " + Cell(name) + " |";
    for (const VariantColumn& v : variants) {
      std::string cell = "-";
      for (const auto& [n, spec] : v.specs)
        if (n == name) cell = Code(spec);
      out += " " + cell + " |";
    }
    out += "\n";
  }
  return out + untraced;
}

data Strings(const std::vector<std::string>& items) {
  data list = List();
  for (const std::string& s : items) list.push_back(data(s));
  return list;
}

// kainjow keeps the newline after the closing tag of a section that renders nothing, so
// an empty list or a false flag leaves a blank line; squeeze runs of blank lines outside
// fenced code blocks (whose contents stay byte-exact) and end with one newline.
std::string SqueezeBlankLines(const std::string& text) {
  std::string out;
  bool in_fence = false, previous_blank = false;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("```", 0) == 0) in_fence = !in_fence;
    const bool blank = line.empty();
    if (blank && previous_blank && !in_fence) continue;
    out += line + "\n";
    previous_blank = blank && !in_fence;
  }
  while (out.size() > 1 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n')
    out.pop_back();
  return out;
}

}  // namespace

std::string RenderVisualization(const VisualizationDoc& doc, const Trace& trace,
                                const SpmdResult& spmd) {
  std::vector<std::string> triggers, notes;
  for (const std::string& note : trace.notes) {
    if (note.rfind("path: ", 0) == 0)
      triggers.push_back(note.substr(6));
    else
      notes.push_back(note);
  }
  data examples = List();
  for (const MarkdownExample& e : doc.examples) {
    data example;
    example.set("heading", e.heading);
    example.set("intro", e.intro);
    example.set("text", e.text);
    examples.push_back(example);
  }
  const bool has_einsums = std::any_of(trace.ops.begin(), trace.ops.end(),
                                       [](const OpRecord& op) { return !op.equation.empty(); });
  const bool has_collectives =
      std::any_of(trace.ops.begin(), trace.ops.end(), [&](const OpRecord& op) {
        const std::vector<ImpliedCollective>& implied = spmd.implied_at(op.id);
        return op.collective || std::any_of(implied.begin(), implied.end(), Communicates);
      });
  const bool has_local_reshards =
      std::any_of(spmd.implied.begin(), spmd.implied.end(), [](const auto& implied) {
        return std::any_of(implied.begin(), implied.end(),
                           [](const ImpliedCollective& c) { return !Communicates(c); });
      });
  data view;
  view.set("title", doc.title);
  view.set("summary", doc.summary);
  view.set("summary_section", doc.summary_section);
  view.set("command", doc.command);
  view.set("block", trace.block);
  view.set("path", trace.path);
  view.set("reference_path", trace.reference_path);
  view.set("has_routing", !trace.routing.empty());
  view.set("routing", Strings(trace.routing));
  view.set("get_topk_line", MoeRef(trace.revision, {MoeStatement::kGetTopk}));
  view.set("get_topk_lines", MoeRef(trace.revision, {MoeStatement::kGetTopkBody}));
  view.set("mesh", trace.mesh);
  view.set("devices", std::to_string(trace.num_devices));
  view.set("mode", trace.numeric ? "numeric: real values on every simulated device"
                                 : "symbolic: shapes and shardings only");
  view.set("numeric", trace.numeric);
  view.set("has_triggers", !triggers.empty());
  view.set("triggers", Strings(triggers));
  view.set("has_notes", !notes.empty());
  view.set("notes", Strings(notes));
  view.set("legend", doc.legend);
  view.set("overview", doc.overview);
  view.set("flow", doc.flow);
  if (!doc.graphs.empty()) {
    view.set("graph_title", doc.graphs.front().first);
    view.set("graph", doc.graphs.front().second);
  }
  data more_graphs = List();
  std::vector<std::string> more_titles, example_titles;
  for (size_t g = 1; g < doc.graphs.size(); ++g) {
    data graph;
    graph.set("title", doc.graphs[g].first);
    graph.set("text", doc.graphs[g].second);
    more_graphs.push_back(graph);
    more_titles.push_back(doc.graphs[g].first);
  }
  view.set("has_more_graphs", doc.graphs.size() > 1);
  view.set("more_graphs", more_graphs);
  view.set("more_graph_titles", fmt::format("{}", fmt::join(more_titles, ", ")));
  for (const MarkdownExample& e : doc.examples)
    example_titles.push_back(e.heading.rfind("Tree: ", 0) == 0 ? e.heading.substr(6) : e.heading);
  view.set("has_examples", !doc.examples.empty());
  view.set("example_titles", fmt::format("{}", fmt::join(example_titles, "; ")));
  view.set("source", doc.source);
  view.set("config_files", Cell(fmt::format("{}", fmt::join(doc.config_files, " ← "))));
  view.set("has_variants", !doc.variants.empty());
  view.set("variants", VariantTable(doc.variants));
  view.set("examples", examples);
  std::vector<std::string> definition_notes;
  view.set("definitions", Definitions(trace, &definition_notes));
  view.set("definition_notes", Strings(definition_notes));
  view.set("tensors", DataStructures(trace, spmd));
  view.set("algorithm", Algorithm(trace, doc.moe_line_refs));
  view.set("has_einsums", has_einsums);
  view.set("einsums", Einsums(trace));
  view.set("has_collectives", has_collectives);
  view.set("collectives", Collectives(trace, spmd, doc.collectives_written_in));
  view.set("has_local_reshards", has_local_reshards);
  view.set("local_reshards", LocalReshards(trace, spmd));
  view.set("invariants", Invariants(doc.invariants));
  view.set("has_facts", !trace.facts.empty());
  view.set("facts", Facts(trace));

  mustache tmpl{std::string(VisualizationTemplate())};
  if (!tmpl.is_valid())
    Fail("the embedded visualization template does not parse: {}", tmpl.error_message());
  // The output is markdown: mustache's default HTML escaping would mangle `<` and `&`.
  tmpl.set_custom_escape([](const std::string& text) { return text; });
  const std::string out = tmpl.render(view);
  if (!tmpl.is_valid())
    Fail("rendering the visualization template failed: {}", tmpl.error_message());
  return SqueezeBlankLines(out);
}

}  // namespace shardtrace
