#include "emit/trace_diff_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "emit/dim_letters.h"
#include "emit/human_bytes.h"
#include "emit/text_table.h"
#include "spmd/trace_totals.h"

namespace shardtrace {
namespace {

constexpr char kUnconstrained[] = "unconstrained (XLA chooses)";

constexpr char kUnset[] = "(unset)";

// Long config values (lists of mesh axes) cut to one table cell; JSON keeps them whole.
std::string Elide(const std::string& value) {
  return value.size() <= 60 ? value : value.substr(0, 56) + " ...";
}

// "  label a, b, c" wrapped at 100 columns.
std::string Wrapped(const std::string& label, const std::vector<std::string>& items) {
  std::string out, line = "  " + label;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item = " " + items[i] + (i + 1 < items.size() ? "," : "");
    if (line.size() + item.size() > 100) {
      out += line + "\n";
      line = "   ";
    }
    line += item;
  }
  return out + line + "\n";
}

std::string Signed(int64_t bytes) {
  if (bytes == 0) return "0 B";
  return (bytes > 0 ? "+" : "-") + HumanBytes(bytes > 0 ? bytes : -bytes);
}

std::string Change(const TensorDiff& t) {
  return !t.a ? "only in B" : !t.b ? "only in A" : "changed";
}
std::string Change(const CollectiveDiff& c) {
  return !c.a ? "added" : !c.b ? "removed" : "changed";
}

std::string Bytes(const std::optional<TensorSide>& s) {
  if (!s) return "-";
  return s->bytes_per_device ? HumanBytes(*s->bytes_per_device) : kUnconstrained;
}

std::string Logical(const std::optional<LogicalAxes>& l) {
  return l ? LogicalAxesToString(*l) : "none";
}
std::string Spec(const std::optional<PartitionSpec>& s) { return s ? s->ToString() : "none"; }
std::string Local(const std::optional<Shape>& s) { return s ? ShapeToString(*s) : "unconstrained"; }

// "spec P('expert', None) -> P(None, None); local shape [4,8] -> [8,8]".
std::string WhatChanged(const TensorDiff& t) {
  if (!t.a || !t.b) {
    const TensorSide& s = t.a ? *t.a : *t.b;
    std::string text =
        fmt::format("{} {} {}", ToString(s.dtype), ShapeToString(s.shape), DimsText(s.dims));
    if (s.written_spec) text += " " + s.written_spec->ToString();
    if (s.local_shape) text += " local " + ShapeToString(*s.local_shape);
    return text;
  }
  std::vector<std::string> parts;
  for (const std::string& f : t.changed) {
    if (f == "kind")
      parts.push_back(fmt::format("kind {} -> {}", ToString(t.a->kind), ToString(t.b->kind)));
    if (f == "dtype")
      parts.push_back(fmt::format("dtype {} -> {}", ToString(t.a->dtype), ToString(t.b->dtype)));
    if (f == "shape")
      parts.push_back(
          fmt::format("shape {} -> {}", ShapeToString(t.a->shape), ShapeToString(t.b->shape)));
    if (f == "logical axes")
      parts.push_back(
          fmt::format("logical {} -> {}", Logical(t.a->logical_axes), Logical(t.b->logical_axes)));
    if (f == "spec")
      parts.push_back(
          fmt::format("spec {} -> {}", Spec(t.a->written_spec), Spec(t.b->written_spec)));
    if (f == "propagated spec")
      parts.push_back(fmt::format("propagated {} -> {}", Spec(t.a->propagated_spec),
                                  Spec(t.b->propagated_spec)));
    if (f == "constraint")
      parts.push_back(fmt::format("set by {} -> {}",
                                  t.a->constraint.empty() ? "none" : t.a->constraint,
                                  t.b->constraint.empty() ? "none" : t.b->constraint));
    if (f == "local shape")
      parts.push_back(
          fmt::format("local {} -> {}", Local(t.a->local_shape), Local(t.b->local_shape)));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string Axes(const std::optional<CollectiveSide>& s) {
  return s ? fmt::format("{} ({})", fmt::join(s->axes, ","), s->participants) : "-";
}
std::string Sent(const std::optional<CollectiveSide>& s) {
  return s ? HumanBytes(s->sent_per_device) : "-";
}

std::string SummaryLine(const TraceDiff& d) {
  int only_a = 0, only_b = 0, changed = 0;
  for (const TensorDiff& t : d.tensors) (!t.a ? only_b : !t.b ? only_a : changed)++;
  std::string text = d.same()            ? "same sharding"
                     : d.same_sharding() ? "same sharding, the training step differs"
                                         : "sharding differs";
  text += fmt::format(": {} config keys, {} axis rules differ", d.config_keys.size(),
                      d.axis_rules.size());
  if (d.path_changed()) text += fmt::format("; path {} -> {}", d.a.path, d.b.path);
  if (d.mesh_changed()) text += fmt::format("; mesh {} -> {}", d.a.mesh, d.b.mesh);
  text += fmt::format("; tensors: {} changed, {} only in A, {} only in B; {} collectives differ",
                      changed, only_a, only_b, d.collectives.size());
  text += fmt::format("; per device: weights {}, peak activations {}, communication {}",
                      Signed(d.b.totals.weight_bytes - d.a.totals.weight_bytes),
                      Signed(d.b.totals.peak_activation_bytes - d.a.totals.peak_activation_bytes),
                      Signed(d.b.totals.sent_bytes() - d.a.totals.sent_bytes()));
  if (d.a.totals.has_step && d.b.totals.has_step)
    text += fmt::format(
        "; training step: peak {}, kept for the backward {}, backward communication {}",
        Signed(d.b.totals.step_peak_bytes - d.a.totals.step_peak_bytes),
        Signed(d.b.totals.saved_bytes - d.a.totals.saved_bytes),
        Signed(d.b.totals.backward_sent_bytes - d.a.totals.backward_sent_bytes));
  return text;
}

struct TotalsRow {
  std::string name;
  int64_t a, b;
};
std::vector<TotalsRow> Totals(const TraceDiff& d) {
  std::vector<TotalsRow> rows = {
      {"weights", d.a.totals.weight_bytes, d.b.totals.weight_bytes},
      {"peak temporaries (XLA model)", d.a.totals.peak_activation_bytes,
       d.b.totals.peak_activation_bytes},
      {"communication sent per layer, written in moe.py", d.a.totals.written_sent_bytes,
       d.b.totals.written_sent_bytes},
      {"communication sent per layer, inserted by XLA (\u21c4 xla)", d.a.totals.implied_sent_bytes,
       d.b.totals.implied_sent_bytes},
      {"communication sent per layer, total", d.a.totals.sent_bytes(), d.b.totals.sent_bytes()}};
  if (!d.a.totals.has_step || !d.b.totals.has_step) return rows;
  const std::string policy =
      d.a.totals.remat_policy == d.b.totals.remat_policy
          ? d.a.totals.remat_policy
          : d.a.totals.remat_policy + " -> " + d.b.totals.remat_policy;
  rows.push_back({fmt::format("training step peak (remat_policy={}; docs/step.md)", policy),
                  d.a.totals.step_peak_bytes, d.b.totals.step_peak_bytes});
  rows.push_back({"kept for the backward per layer", d.a.totals.saved_bytes,
                  d.b.totals.saved_bytes});
  rows.push_back({"recomputed by the backward per layer", d.a.totals.recomputed_bytes,
                  d.b.totals.recomputed_bytes});
  rows.push_back({"backward communication sent per layer", d.a.totals.backward_sent_bytes,
                  d.b.totals.backward_sent_bytes});
  rows.push_back({"step communication sent per layer (forward + backward)",
                  d.a.totals.step_sent_bytes(), d.b.totals.step_sent_bytes()});
  return rows;
}

std::string PathText(const TraceDiff& d) {
  if (!d.path_changed()) return d.a.path + " (same)";
  std::string text = fmt::format("A {} -> B {}", d.a.path, d.b.path);
  if (!d.path_selected_by.empty())
    text += fmt::format("; selected by {}", fmt::join(d.path_selected_by, ", "));
  return text;
}

std::string PathReasons(const DiffSideInfo& side) {
  return fmt::format("{}", fmt::join(side.path_reasons, "; "));
}

}  // namespace

std::string TraceDiffToText(const TraceDiff& d) {
  std::string out;
  out += fmt::format("diff   block {}, symbolic (full size)\n", d.block);
  out += fmt::format("A      {}\n", fmt::join(d.a.args, " "));
  out += fmt::format("B      {}\n", fmt::join(d.b.args, " "));
  out += fmt::format("moe.py {}\n",
                     d.a.maxtext_revision == d.b.maxtext_revision
                         ? d.a.maxtext_revision + " (both)"
                         : fmt::format("A {} -> B {}", d.a.maxtext_revision, d.b.maxtext_revision));
  out +=
      fmt::format("mesh   {}\n", d.mesh_changed()
                                     ? fmt::format("A {} ({} devices) -> B {} ({} devices)",
                                                   d.a.mesh, d.a.devices, d.b.mesh, d.b.devices)
                                     : fmt::format("{} ({} devices, same)", d.a.mesh, d.a.devices));
  out += fmt::format("path   {}\n", PathText(d));
  if (d.path_changed())
    out += fmt::format("       A because {}\n       B because {}\n", PathReasons(d.a),
                       PathReasons(d.b));
  if (!d.config_keys.empty()) {
    TextTable t({"key", "A", "B"});
    std::vector<std::string> only_a, only_b;
    for (const KeyChange& k : d.config_keys) {
      if (k.b == kUnset)
        only_a.push_back(k.key);
      else if (k.a == kUnset)
        only_b.push_back(k.key);
      else
        t.AddRow({k.key, Elide(k.a), Elide(k.b)});
    }
    out += "\nconfig keys that differ\n" + (t.empty() ? "" : t.Render("  "));
    if (!only_a.empty()) out += Wrapped(fmt::format("only in A ({}):", only_a.size()), only_a);
    if (!only_b.empty()) out += Wrapped(fmt::format("only in B ({}):", only_b.size()), only_b);
  }
  if (!d.axis_rules.empty()) {
    out += "\nlogical_axis_rules that differ (fallbacks separated by |)\n";
    for (const KeyChange& k : d.axis_rules)
      out += fmt::format("  {}\n    A {}\n    B {}\n", k.key, k.a, k.b);
  }
  if (!d.tensors.empty()) {
    TextTable t({"change", "tensor", "kind", "A bytes/dev", "B bytes/dev", "delta", "what"});
    for (const TensorDiff& x : d.tensors)
      t.AddRow({Change(x), x.key, ToString((x.a ? *x.a : *x.b).kind), Bytes(x.a), Bytes(x.b),
                x.a && x.b && (!x.a->bytes_per_device || !x.b->bytes_per_device)
                    ? "-"
                    : Signed(x.delta_bytes),
                WhatChanged(x)});
    out += "\ntensors, by impact (bytes per device)\n" + t.Render("  ");
  }
  if (!d.collectives.empty()) {
    TextTable t({"change", "collective", "A axes (group)", "B axes (group)", "A sent/dev",
                 "B sent/dev", "delta"});
    for (const CollectiveDiff& c : d.collectives)
      t.AddRow(
          {Change(c), c.key, Axes(c.a), Axes(c.b), Sent(c.a), Sent(c.b), Signed(c.delta_sent)});
    out += "\ncollectives, by impact (bytes sent per device, max over devices)\n" + t.Render("  ");
  }
  TextTable totals({"per device", "A", "B", "delta"});
  for (const TotalsRow& r : Totals(d))
    totals.AddRow({r.name, HumanBytes(r.a), HumanBytes(r.b), Signed(r.b - r.a)});
  totals.AddRow({"unconstrained activations (XLA chooses; not in the totals)",
                 std::to_string(d.a.totals.unconstrained.size()),
                 std::to_string(d.b.totals.unconstrained.size()),
                 fmt::format("{:+d}", static_cast<int64_t>(d.b.totals.unconstrained.size()) -
                                          static_cast<int64_t>(d.a.totals.unconstrained.size()))});
  out += "\ntotals\n" + totals.Render("  ");
  out += "\n" + SummaryLine(d) + "\n";
  return out;
}

std::string TraceDiffToMarkdown(const TraceDiff& d) {
  std::string out = fmt::format("**shardtrace diff: {}**\n\n", SummaryLine(d));
  out += "| | A | B |\n|---|---|---|\n";
  out += fmt::format("| arguments | `{}` | `{}` |\n", fmt::join(d.a.args, " "),
                     fmt::join(d.b.args, " "));
  out += fmt::format("| moe.py | {} | {} |\n", d.a.maxtext_revision, d.b.maxtext_revision);
  out += fmt::format("| mesh | `{}` ({} devices) | `{}` ({} devices) |\n", d.a.mesh, d.a.devices,
                     d.b.mesh, d.b.devices);
  out += fmt::format("| path (block {}) | `{}` | `{}` |\n", d.block, d.a.path, d.b.path);
  out += fmt::format("| because | {} | {} |\n", PathReasons(d.a), PathReasons(d.b));
  if (!d.path_selected_by.empty())
    out += fmt::format("\nThe path changed; selected by `{}`.\n",
                       fmt::join(d.path_selected_by, "`, `"));
  out += "\n### Totals per device\n\n| | A | B | delta |\n|---|---|---|---|\n";
  for (const TotalsRow& r : Totals(d))
    out += fmt::format("| {} | {} | {} | {} |\n", r.name, HumanBytes(r.a), HumanBytes(r.b),
                       Signed(r.b - r.a));
  out += fmt::format("| unconstrained activations (XLA chooses; not in the totals) | {} | {} | |\n",
                     d.a.totals.unconstrained.size(), d.b.totals.unconstrained.size());
  if (!d.config_keys.empty()) {
    out += "\n### Config keys that differ\n\n| key | A | B |\n|---|---|---|\n";
    for (const KeyChange& k : d.config_keys)
      out += fmt::format("| `{}` | `{}` | `{}` |\n", k.key, k.a, k.b);
  }
  if (!d.axis_rules.empty()) {
    out += "\n### logical_axis_rules that differ\n\n| logical axis | A | B |\n|---|---|---|\n";
    for (const KeyChange& k : d.axis_rules)
      out += fmt::format("| `{}` | `{}` | `{}` |\n", k.key, k.a, k.b);
  }
  if (!d.tensors.empty()) {
    out +=
        "\n### Tensors, by impact (bytes per device)\n\n"
        "| change | tensor | kind | A bytes/dev | B bytes/dev | delta | what |\n"
        "|---|---|---|---|---|---|---|\n";
    for (const TensorDiff& x : d.tensors)
      out += fmt::format("| {} | `{}` | {} | {} | {} | {} | {} |\n", Change(x), x.key,
                         ToString((x.a ? *x.a : *x.b).kind), Bytes(x.a), Bytes(x.b),
                         x.a && x.b && (!x.a->bytes_per_device || !x.b->bytes_per_device)
                             ? "-"
                             : Signed(x.delta_bytes),
                         WhatChanged(x));
  }
  if (!d.collectives.empty()) {
    out +=
        "\n### Collectives, by impact (bytes sent per device)\n\n"
        "| change | collective | A axes (group) | B axes (group) | A sent/dev | B sent/dev | "
        "delta |\n|---|---|---|---|---|---|---|\n";
    for (const CollectiveDiff& c : d.collectives)
      out += fmt::format("| {} | `{}` | {} | {} | {} | {} | {} |\n", Change(c), c.key, Axes(c.a),
                         Axes(c.b), Sent(c.a), Sent(c.b), Signed(c.delta_sent));
  }
  return out;
}

std::string TraceDiffToJson(const TraceDiff& d) {
  using Json = nlohmann::ordered_json;
  auto side_info = [](const DiffSideInfo& s) {
    Json j;
    j["args"] = s.args;
    j["config_files"] = s.config_files;
    j["maxtext_revision"] = s.maxtext_revision;
    j["mesh"] = s.mesh;
    j["devices"] = s.devices;
    j["path"] = s.path;
    j["path_reasons"] = s.path_reasons;
    j["totals"] = {{"weight_bytes_per_device", s.totals.weight_bytes},
                   {"peak_activation_bytes_per_device", s.totals.peak_activation_bytes},
                   {"written_collective_sent_bytes_per_device", s.totals.written_sent_bytes},
                   {"implied_collective_sent_bytes_per_device", s.totals.implied_sent_bytes},
                   {"collective_sent_bytes_per_device", s.totals.sent_bytes()},
                   {"unconstrained_activations", s.totals.unconstrained}};
    if (s.totals.has_step)
      j["step"] = {{"remat_policy", s.totals.remat_policy},
                   {"peak_bytes_per_device", s.totals.step_peak_bytes},
                   {"saved_bytes_per_device", s.totals.saved_bytes},
                   {"recomputed_bytes_per_device", s.totals.recomputed_bytes},
                   {"backward_sent_bytes_per_device", s.totals.backward_sent_bytes},
                   {"step_sent_bytes_per_device", s.totals.step_sent_bytes()}};
    return j;
  };
  auto tensor_side = [](const std::optional<TensorSide>& s) {
    if (!s) return Json(nullptr);
    Json j;
    j["kind"] = ToString(s->kind);
    j["dtype"] = ToString(s->dtype);
    j["dims"] = s->dims;
    j["shape"] = s->shape;
    j["logical_axes"] =
        s->logical_axes ? Json(LogicalAxesToString(*s->logical_axes)) : Json(nullptr);
    // The spec a statement wrote and the one XLA's propagation gives an unwritten tensor, apart;
    // `placement` says which holds (explicit, shard_map, propagated, argument, unresolved).
    j["written_spec"] = s->written_spec ? Json(s->written_spec->ToString()) : Json(nullptr);
    j["propagated_spec"] =
        s->propagated_spec ? Json(s->propagated_spec->ToString()) : Json(nullptr);
    j["placement"] = ToString(s->placement);
    j["constraint"] = s->constraint.empty() ? Json(nullptr) : Json(s->constraint);
    j["local_shape"] = s->local_shape ? Json(*s->local_shape) : Json(nullptr);
    j["bytes_per_device"] = s->bytes_per_device ? Json(*s->bytes_per_device) : Json(nullptr);
    return j;
  };
  auto collective_side = [](const std::optional<CollectiveSide>& s) {
    if (!s) return Json(nullptr);
    Json j;
    j["kind"] = ToString(s->kind);
    j["written"] = s->written;  // false: inserted by XLA's SPMD partitioner
    j["axes"] = s->axes;
    j["participants"] = s->participants;
    j["input"] = s->input;
    j["output"] = s->output;
    j["sent_bytes_per_device"] = s->sent_per_device;
    j["received_bytes_per_device"] = s->received_per_device;
    return j;
  };
  auto changes = [](const std::vector<KeyChange>& v, const char* name) {
    Json list = Json::array();
    for (const KeyChange& k : v) list.push_back({{name, k.key}, {"a", k.a}, {"b", k.b}});
    return list;
  };
  Json root;
  // 2: a tensor side's `spec` split into written_spec and propagated_spec; 3: collectives XLA
  // inserts listed beside the written ones (`written`), totals apart and summed.
  root["schema"] = 3;
  root["same"] = d.same();
  root["block"] = d.block;
  root["a"] = side_info(d.a);
  root["b"] = side_info(d.b);
  root["config_keys"] = changes(d.config_keys, "key");
  root["axis_rules"] = changes(d.axis_rules, "logical_axis");
  root["path"] = {{"changed", d.path_changed()}, {"selected_by", d.path_selected_by}};
  Json tensors = Json::array();
  for (const TensorDiff& t : d.tensors) {
    Json j;
    j["key"] = t.key;
    j["change"] = !t.a ? "only_in_b" : !t.b ? "only_in_a" : "changed";
    j["changed"] = t.changed;
    j["delta_bytes_per_device"] = t.a && t.b && (!t.a->bytes_per_device || !t.b->bytes_per_device)
                                      ? Json(nullptr)
                                      : Json(t.delta_bytes);
    j["impact_bytes_per_device"] = t.impact;
    j["a"] = tensor_side(t.a);
    j["b"] = tensor_side(t.b);
    tensors.push_back(j);
  }
  root["tensors"] = tensors;
  Json collectives = Json::array();
  for (const CollectiveDiff& c : d.collectives) {
    Json j;
    j["key"] = c.key;
    j["change"] = !c.a ? "added" : !c.b ? "removed" : "changed";
    j["changed"] = c.changed;
    j["delta_sent_bytes_per_device"] = c.delta_sent;
    j["a"] = collective_side(c.a);
    j["b"] = collective_side(c.b);
    collectives.push_back(j);
  }
  root["collectives"] = collectives;
  root["totals_delta"] = {
      {"weight_bytes_per_device", d.b.totals.weight_bytes - d.a.totals.weight_bytes},
      {"peak_activation_bytes_per_device",
       d.b.totals.peak_activation_bytes - d.a.totals.peak_activation_bytes},
      {"written_collective_sent_bytes_per_device",
       d.b.totals.written_sent_bytes - d.a.totals.written_sent_bytes},
      {"implied_collective_sent_bytes_per_device",
       d.b.totals.implied_sent_bytes - d.a.totals.implied_sent_bytes},
      {"collective_sent_bytes_per_device", d.b.totals.sent_bytes() - d.a.totals.sent_bytes()}};
  if (d.a.totals.has_step && d.b.totals.has_step) {
    root["totals_delta"]["step_peak_bytes_per_device"] =
        d.b.totals.step_peak_bytes - d.a.totals.step_peak_bytes;
    root["totals_delta"]["saved_bytes_per_device"] = d.b.totals.saved_bytes - d.a.totals.saved_bytes;
    root["totals_delta"]["backward_sent_bytes_per_device"] =
        d.b.totals.backward_sent_bytes - d.a.totals.backward_sent_bytes;
  }
  return root.dump(2) + "\n";
}

}  // namespace shardtrace
