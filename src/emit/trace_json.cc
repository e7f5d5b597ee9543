#include "emit/trace_json.h"

#include <nlohmann/json.hpp>

#include "trace/trace_totals.h"

namespace shardtrace {
namespace {

using Json = nlohmann::ordered_json;

Json SpecJson(const PartitionSpec& spec) {
  Json dims = Json::array();
  for (const auto& e : spec.entries()) {
    if (e.empty())
      dims.push_back(nullptr);
    else if (e.size() == 1)
      dims.push_back(e[0]);
    else
      dims.push_back(e);
  }
  return dims;
}

Json TensorJson(const TensorRecord& t) {
  Json j;
  j["id"] = t.id;
  j["stable_id"] = t.stable_id;
  j["name"] = t.name;
  j["kind"] = ToString(t.kind);
  j["dtype"] = ToString(t.dtype);
  j["dims"] = t.dims;
  j["shape"] = t.shape;
  if (t.logical_axes) {
    Json axes = Json::array();
    for (const auto& a : *t.logical_axes) axes.push_back(a ? Json(*a) : Json(nullptr));
    j["logical_axes"] = axes;
  } else {
    j["logical_axes"] = nullptr;
  }
  j["constraint"] =
      t.constraint == Constraint::kNone ? Json(nullptr) : Json(ToString(t.constraint));
  j["partition_spec"] = t.partition_spec ? SpecJson(*t.partition_spec) : Json(nullptr);
  j["physical"] = t.partition_spec ? Json(t.partition_spec->ToString()) : Json(nullptr);
  j["local_shape"] = t.local_shape;
  j["bytes_per_device"] = t.bytes_per_device;
  j["scope"] = t.scope;
  j["condition"] = t.condition.empty() ? Json(nullptr) : Json(t.condition);
  j["in_shard_map"] = t.in_shard_map;
  if (t.summary) {
    j["summary"] = {{"min", t.summary->min},
                    {"max", t.summary->max},
                    {"mean", t.summary->mean},
                    {"nonzeros", t.summary->nonzeros},
                    {"elements", t.summary->elements}};
  } else {
    j["summary"] = nullptr;
  }
  if (!t.warnings.empty()) j["warnings"] = t.warnings;
  return j;
}

}  // namespace

std::string TraceToJson(const Trace& trace) {
  Json j;
  j["schema"] = 1;
  j["block"] = trace.block;
  j["path"] = trace.path;
  j["mode"] = trace.numeric ? "numeric" : "symbolic";
  j["mesh"] = trace.mesh;
  j["devices"] = trace.num_devices;
  j["notes"] = trace.notes;
  Json tensors = Json::array();
  for (const TensorRecord& t : trace.tensors) tensors.push_back(TensorJson(t));
  j["tensors"] = tensors;
  Json ops = Json::array();
  for (const OpRecord& op : trace.ops) {
    Json o;
    o["id"] = op.id;
    o["kind"] = op.Name();
    if (!op.equation.empty()) o["equation"] = op.equation;
    o["inputs"] = op.inputs;
    o["outputs"] = op.outputs;
    Json attrs = Json::object();
    for (const auto& [k, v] : op.attrs) attrs[k] = v;
    o["attrs"] = attrs;
    o["scope"] = op.scope;
    if (op.collective) {
      o["collective"] = {{"axes", op.collective->axes},
                         {"participants", op.collective->participants},
                         {"groups", op.collective->groups},
                         {"bytes_sent", op.collective->bytes_sent},
                         {"bytes_received", op.collective->bytes_received}};
    }
    ops.push_back(o);
  }
  j["ops"] = ops;
  Json facts = Json::array();
  for (const Fact& f : trace.facts)
    facts.push_back({{"name", f.name},
                     {"scope", f.scope},
                     {"shape", f.shape},
                     {"values", f.values},
                     {"note", f.note}});
  j["facts"] = facts;
  const TraceTotals totals = ComputeTotals(trace);
  j["totals"] = {{"weight_bytes_per_device", totals.weight_bytes_per_device},
                 {"peak_activation_bytes_per_device", totals.peak_activation_bytes_per_device},
                 {"collective_bytes_sent_per_device", totals.collective_bytes_sent_per_device}};
  return j.dump(1) + "\n";
}

}  // namespace shardtrace
