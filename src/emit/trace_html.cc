#include "emit/trace_html.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "emit/human_bytes.h"

namespace shardtrace {
namespace {

HtmlTable::Cell Bytes(int64_t bytes) {
  return {HumanBytes(bytes), static_cast<double>(bytes)};
}

HtmlTable::Cell Number(int64_t n) { return {fmt::format("{}", n), static_cast<double>(n)}; }

std::string Axes(const std::vector<std::string>& axes) {
  return fmt::format("{}", fmt::join(axes, ", "));
}

}  // namespace

HtmlTable TensorHtmlTable(const Trace& trace, const SpmdResult& spmd) {
  HtmlTable table{.id = "tensors-table",
                  .caption = "tensors",
                  .headers = {"#", "name", "kind", "scope", "dtype", "shape", "logical axes",
                              "sharding", "placed by", "per-device shape", "bytes per device"},
                  .rows = {}};
  for (const TensorRecord& t : trace.tensors) {
    const TensorSpmd& s = spmd.tensor(t.id);
    std::string axes = "-";
    if (t.logical_axes) {
      std::vector<std::string> names;
      for (const auto& a : *t.logical_axes) names.push_back(a ? *a : "None");
      axes = "(" + Axes(names) + ")";
    }
    const PartitionSpec* spec = spmd.SpecOf(t);
    table.rows.push_back({Number(t.id),
                          {t.name, {}},
                          {ToString(t.kind), {}},
                          {t.scope, {}},
                          {ToString(t.dtype), {}},
                          {ShapeToString(t.shape), {}},
                          {axes, {}},
                          {spec ? spec->ToString() : "-", {}},
                          {ToString(s.placement), {}},
                          {ShapeToString(s.local_shape), {}},
                          Bytes(s.bytes_per_device)});
  }
  return table;
}

HtmlTable CollectiveHtmlTable(const Trace& trace, const SpmdResult& spmd) {
  HtmlTable table{.id = "collectives-table",
                  .caption = "collectives",
                  .headers = {"op", "collective", "written by", "tensor", "mesh axes",
                              "devices per group", "bytes sent per device", "why"},
                  .rows = {}};
  for (const OpRecord& op : trace.ops) {
    if (op.collective) {
      const CollectiveRecord& c = *op.collective;
      const int64_t sent =
          c.bytes_sent.empty() ? 0 : *std::max_element(c.bytes_sent.begin(), c.bytes_sent.end());
      const std::string tensor =
          op.inputs.empty() ? "-" : trace.tensors[static_cast<size_t>(op.inputs.front())].name;
      table.rows.push_back({Number(op.id),
                            {op.Name(), {}},
                            {"moe.py", {}},
                            {tensor, {}},
                            {Axes(c.axes), {}},
                            Number(c.participants),
                            Bytes(sent),
                            {op.scope, {}}});
    }
    for (const ImpliedCollective& c : spmd.implied_at(op.id)) {
      table.rows.push_back({Number(op.id),
                            {ToString(c.kind), {}},
                            {"XLA", {}},
                            {trace.tensors[static_cast<size_t>(c.tensor)].name, {}},
                            {Axes(c.axes), {}},
                            Number(c.participants),
                            Bytes(c.bytes_per_device),
                            {c.reason, {}}});
    }
  }
  return table;
}

}  // namespace shardtrace
