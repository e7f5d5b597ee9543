#include "emit/trace_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "emit/dim_letters.h"
#include "emit/human_bytes.h"
#include "emit/text_table.h"
#include "emit/xla_spmd_text.h"
#include "ir/fact_text.h"
#include "spmd/trace_totals.h"

namespace shardtrace {
namespace {

// Floats: min/max/mean; ints and bools: nonzero count (masks, indices).
std::string SummaryText(const NumericSummary& s, DType dtype) {
  if (!IsFloating(dtype))
    return fmt::format("nnz {}/{} max {}", s.nonzeros, s.elements, FactValueText(s.max));
  return fmt::format("min {:.4g} max {:.4g} mean {:.4g}", s.min, s.max, s.mean);
}

}  // namespace

std::string TraceToTable(const Trace& trace, const SpmdResult& spmd) {
  std::string out;
  out += fmt::format("block  {}\npath   {}\nmesh   {} ({} device{}), {}\nmoe.py {} ({})\n",
                     trace.block, trace.path, trace.mesh, trace.num_devices,
                     trace.num_devices == 1 ? "" : "s", trace.numeric ? "numeric" : "symbolic",
                     trace.maxtext_revision, trace.maxtext_revision_why);
  for (const std::string& w : trace.warnings) out += fmt::format("warning: {}\n", w);
  for (const std::string& note : trace.notes) out += fmt::format("note   {}\n", note);
  std::string scope = "\x01";
  TextTable* table = nullptr;
  std::vector<std::pair<std::string, TextTable>> tables;
  for (const TensorRecord& t : trace.tensors) {
    const TensorSpmd& s = spmd.tensor(t.id);
    if (t.scope != scope) {
      scope = t.scope;
      tables.emplace_back(
          scope,
          TextTable(trace.numeric
                        ? std::vector<std::string>{"name", "kind", "dtype", "shape", "logical axes",
                                                   "spec", "local", "bytes/dev", "constraint",
                                                   "condition", "values"}
                        : std::vector<std::string>{"name", "kind", "dtype", "shape", "logical axes",
                                                   "spec", "local", "bytes/dev", "constraint",
                                                   "condition"}));
      table = &tables.back().second;
    }
    std::vector<std::string> row = {
        t.name,
        ToString(t.kind),
        ToString(t.dtype),
        fmt::format("{} {}", ShapeToString(t.shape), DimsText(t.dims)),
        t.logical_axes ? LogicalAxesToString(*t.logical_axes) : "",
        t.partition_spec    ? t.partition_spec->ToString()
        : s.propagated_spec ? s.propagated_spec->ToString()
                            : "",
        ShapeToString(s.local_shape) + (t.in_shard_map ? " (per device)" : ""),
        HumanBytes(s.bytes_per_device),
        t.constraint != Constraint::kNone                          ? ToString(t.constraint)
        : s.placement == Placement::kPropagated                    ? "(propagated)"
        : s.placement == Placement::kArgument                      ? "(argument)"
        : s.placement == Placement::kUnresolved && !t.in_shard_map ? "(unresolved: replicated)"
                                                                   : "",
        t.condition};
    if (t.summary) row.push_back(SummaryText(*t.summary, t.dtype));
    table->AddRow(std::move(row));
  }
  for (const auto& [name, tab] : tables)
    out += fmt::format("\n{}\n{}", name.empty() ? "(top)" : name, tab.Render("  "));

  TextTable collectives({"op", "axes", "participants", "output", "scope", "sent/device",
                         "received/device", "reshard"});
  for (const OpRecord& op : trace.ops) {
    for (const ImpliedCollective& c : spmd.implied_at(op.id))
      collectives.AddRow({ImpliedLabel(c), fmt::format("{}", fmt::join(c.axes, ",")),
                          std::to_string(c.participants), trace.tensors[c.tensor].name, op.scope,
                          HumanBytes(c.bytes_per_device), HumanBytes(c.bytes_per_device),
                          ImpliedDetail(trace, c)});
    if (!op.collective) continue;
    const CollectiveRecord& c = *op.collective;
    const std::string sent =
        c.bytes_sent.empty()
            ? ""
            : HumanBytes(*std::max_element(c.bytes_sent.begin(), c.bytes_sent.end()));
    const std::string recv =
        c.bytes_received.empty()
            ? ""
            : HumanBytes(*std::max_element(c.bytes_received.begin(), c.bytes_received.end()));
    collectives.AddRow({ToString(c.kind), fmt::format("{}", fmt::join(c.axes, ",")),
                        std::to_string(c.participants), trace.tensors[op.outputs.front()].name,
                        op.scope, sent, recv, "written in moe.py"});
  }
  if (!collectives.empty())
    out += "\ncollectives (max over devices; \u21c4 xla: inserted by XLA's SPMD partitioner)\n" +
           collectives.Render("  ");
  if (!trace.facts.empty()) {
    out += "\nfacts\n";
    for (const Fact& f : trace.facts) {
      const std::string note = FactNote(f);
      out += fmt::format("  {} = {}{}\n", FactName(f), FactValuesText(f),
                         note.empty() ? "" : "   # " + note);
    }
  }
  const TraceTotals totals = ComputeTotals(trace, spmd);
  out += fmt::format("\ncollectives sent per device: {} written in moe.py, {} inserted by XLA\n",
                     HumanBytes(totals.collective_bytes_sent_per_device),
                     HumanBytes(totals.implied_bytes_sent_per_device));
  if (totals.implied_bytes_sent_per_device_on_xla_cpu != totals.implied_bytes_sent_per_device)
    out += fmt::format(
        "  (as TPU sends them; XLA:CPU on fake devices sends {} of the inserted ones: it widens "
        "16-bit floats to float32 before a collective)\n",
        HumanBytes(totals.implied_bytes_sent_per_device_on_xla_cpu));
  const std::vector<std::string> memory = MemoryLines(trace, spmd);
  if (!memory.empty()) {
    out += "\nmemory per device (forward pass; docs/xla-model.md)\n";
    for (const std::string& line : memory) out += "  " + line + "\n";
  }
  for (const TensorRecord& t : trace.tensors)
    for (const std::string& w : t.warnings) out += fmt::format("warning: {}\n", w);
  return out;
}

}  // namespace shardtrace
