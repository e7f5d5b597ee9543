#include "emit/dump_comparison_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "emit/text_table.h"

namespace shardtrace {
namespace {

using Kind = TensorComparison::Kind;
using Status = TensorComparison::Status;

std::string Summary(const DumpComparison& c) {
  std::string text = fmt::format(
      "{}: {} agree, {} differ, {} only in dump, {} only in trace; mesh {}; not compared "
      "(outside the MoE/MLP blocks): {} params, {} activation entries",
      c.agrees() ? "AGREE" : "DIFFER", c.Count(Status::kAgree), c.Count(Status::kDiffer),
      c.Count(Status::kOnlyInDump), c.Count(Status::kOnlyInTrace),
      c.mesh_agrees() ? "agrees" : "differs", c.params_not_compared, c.activations_not_compared);
  if (!c.blocks_not_in_dump.empty())
    text += fmt::format("; not in the dump: {} kernels of the {} block{} (the dump holds none)",
                        c.trace_params_not_compared, fmt::join(c.blocks_not_in_dump, ", "),
                        c.blocks_not_in_dump.size() == 1 ? "" : "s");
  if (c.trace_activations_not_compared > 0)
    text += fmt::format(
        "; {} traced Unknown entries not compared (a whole model's dump mixes its own in)",
        c.trace_activations_not_compared);
  return text;
}

std::string Inferred(const DumpComparison& c) {
  const InferredRun& r = c.inferred;
  std::vector<std::string> parts;
  if (!r.model_name.empty()) parts.push_back("model_name=" + r.model_name);
  for (const std::string& o : r.overrides) parts.push_back(o);
  if (r.devices) parts.push_back(fmt::format("--devices {}", *r.devices));
  return fmt::format("{} (topology {}, rule {})", fmt::join(parts, " "),
                     r.topology.empty() ? "?" : r.topology, r.rule.empty() ? "?" : r.rule);
}

// The side a row shows: the dump's values, or the trace's when the dump lacks the tensor.
const std::string& Shown(const TensorComparison& t, const std::string& dump,
                         const std::string& trace) {
  return t.dump_name.empty() ? trace : dump;
}

std::string Name(const TensorComparison& t) {
  return t.dump_name.empty() ? t.trace_name : t.dump_name;
}

}  // namespace

std::string DumpComparisonToText(const DumpComparison& c) {
  std::string out;
  out += fmt::format("dump      {}\n", c.dump_dir);
  out += fmt::format("inferred  {}\n", Inferred(c));
  out += fmt::format("traced    {} --devices {}\n", fmt::join(c.traced_args, " "), c.devices);
  out += fmt::format("config    {}\n", fmt::join(c.config_files, " <- "));
  out += fmt::format("moe.py    {}\n", c.maxtext_revision);
  out += fmt::format("mesh      dump {}, trace {}: {}\n", c.dump_mesh, c.trace_mesh,
                     c.mesh_agrees() ? "agree" : "DIFFER");
  for (const std::string& b : c.blocks) out += fmt::format("block     {}\n", b);
  for (const Kind kind : {Kind::kParam, Kind::kActivation}) {
    TextTable table({"status", kind == Kind::kParam ? "parameter (dump path)" : "activation",
                     "logical axes", "spec", kind == Kind::kParam ? "shape" : "type",
                     kind == Kind::kParam ? "trace tensor" : ""});
    for (const TensorComparison& t : c.tensors) {
      if (t.kind != kind) continue;
      table.AddRow({ToString(t.status), Name(t), Shown(t, t.dump_logical, t.trace_logical),
                    Shown(t, t.dump_spec, t.trace_spec), Shown(t, t.dump_shape, t.trace_shape),
                    kind == Kind::kParam ? t.trace_name : ""});
    }
    out += kind == Kind::kParam
               ? "\nparameters (scanned-layers axis removed; spec after size-1 removal)\n"
               : "\nactivations (input_shardings.json moe/ and linears/ entries)\n";
    out += table.empty() ? "  (none)\n" : table.Render("  ");
  }
  TextTable diffs({"tensor", "field", "dump", "trace"});
  for (const TensorComparison& t : c.tensors) {
    if (t.status != Status::kDiffer) continue;
    for (const std::string& f : t.differing) {
      const bool logical = f == "logical axes", spec = f == "spec";
      diffs.AddRow({Name(t), f,
                    logical ? t.dump_logical
                    : spec  ? t.dump_spec
                            : t.dump_shape,
                    logical ? t.trace_logical
                    : spec  ? t.trace_spec
                            : t.trace_shape});
    }
  }
  if (!diffs.empty()) out += "\ndifferences\n" + diffs.Render("  ");
  out += fmt::format("\n{}\n", Summary(c));
  return out;
}

std::string DumpComparisonToMarkdown(const DumpComparison& c) {
  std::string out;
  out += fmt::format("**compare-dump {}**\n\n", Summary(c));
  out += "| | |\n|---|---|\n";
  out += fmt::format("| dump | `{}` |\n", c.dump_dir);
  out += fmt::format("| inferred | `{}` |\n", Inferred(c));
  out += fmt::format("| traced | `{} --devices {}` |\n", fmt::join(c.traced_args, " "), c.devices);
  out += fmt::format("| moe.py | {} |\n", c.maxtext_revision);
  out += fmt::format("| mesh | dump `{}`, trace `{}` |\n", c.dump_mesh, c.trace_mesh);
  for (const std::string& b : c.blocks) out += fmt::format("| block | `{}` |\n", b);
  for (const Kind kind : {Kind::kParam, Kind::kActivation}) {
    out += kind == Kind::kParam ? "\n### Parameters\n\n| status | parameter | logical axes | "
                                  "spec | shape | trace tensor |\n|---|---|---|---|---|---|\n"
                                : "\n### Activations\n\n| status | entry | logical axes | spec | "
                                  "type |\n|---|---|---|---|---|\n";
    for (const TensorComparison& t : c.tensors) {
      if (t.kind != kind) continue;
      out +=
          fmt::format("| {} | `{}` | `{}` | `{}` | `{}` |", ToString(t.status), Name(t),
                      Shown(t, t.dump_logical, t.trace_logical),
                      Shown(t, t.dump_spec, t.trace_spec), Shown(t, t.dump_shape, t.trace_shape));
      out += kind == Kind::kParam ? fmt::format(" `{}` |\n", t.trace_name) : "\n";
    }
  }
  bool any = false;
  for (const TensorComparison& t : c.tensors) {
    if (t.status != Status::kDiffer) continue;
    if (!any) out += "\n### Differences\n\n| tensor | field | dump | trace |\n|---|---|---|---|\n";
    any = true;
    for (const std::string& f : t.differing) {
      const bool logical = f == "logical axes", spec = f == "spec";
      out += fmt::format("| `{}` | {} | `{}` | `{}` |\n", Name(t), f,
                         logical ? t.dump_logical
                         : spec  ? t.dump_spec
                                 : t.dump_shape,
                         logical ? t.trace_logical
                         : spec  ? t.trace_spec
                                 : t.trace_shape);
    }
  }
  return out;
}

std::string DumpComparisonToJson(const DumpComparison& c) {
  using Json = nlohmann::ordered_json;
  Json root;
  root["schema"] = 1;
  root["agree"] = c.agrees();
  root["dump"] = c.dump_dir;
  Json inferred;
  inferred["model_name"] = c.inferred.model_name;
  inferred["topology"] = c.inferred.topology;
  inferred["rule"] = c.inferred.rule;
  inferred["overrides"] = c.inferred.overrides;
  inferred["devices"] = c.inferred.devices ? Json(*c.inferred.devices) : Json(nullptr);
  root["inferred"] = inferred;
  root["traced_args"] = c.traced_args;
  root["devices"] = c.devices;
  root["config_files"] = c.config_files;
  root["maxtext_revision"] = c.maxtext_revision;
  root["mesh"] = {{"dump", c.dump_mesh}, {"trace", c.trace_mesh}, {"agree", c.mesh_agrees()}};
  root["blocks"] = c.blocks;
  Json tensors = Json::array();
  auto side = [](const std::string& name, const std::string& logical, const std::string& spec,
                 const std::string& shape) {
    if (name.empty()) return Json(nullptr);
    return Json{{"name", name}, {"logical_axes", logical}, {"spec", spec}, {"shape", shape}};
  };
  for (const TensorComparison& t : c.tensors) {
    Json j;
    j["kind"] = t.kind == Kind::kParam ? "param" : "activation";
    j["status"] = ToString(t.status);
    j["dump"] = side(t.dump_name, t.dump_logical, t.dump_spec, t.dump_shape);
    j["trace"] = side(t.trace_name, t.trace_logical, t.trace_spec, t.trace_shape);
    j["differing"] = t.differing;
    tensors.push_back(j);
  }
  root["tensors"] = tensors;
  root["counts"] = {{"agree", c.Count(Status::kAgree)},
                    {"differ", c.Count(Status::kDiffer)},
                    {"only_in_dump", c.Count(Status::kOnlyInDump)},
                    {"only_in_trace", c.Count(Status::kOnlyInTrace)},
                    {"params_not_compared", c.params_not_compared},
                    {"activations_not_compared", c.activations_not_compared},
                    {"blocks_not_in_dump", c.blocks_not_in_dump},
                    {"trace_params_not_compared", c.trace_params_not_compared},
                    {"trace_activations_not_compared", c.trace_activations_not_compared}};
  return root.dump(2) + "\n";
}

}  // namespace shardtrace
