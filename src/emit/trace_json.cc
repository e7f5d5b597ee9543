#include "emit/trace_json.h"

#include <nlohmann/json.hpp>

#include "ir/fact_text.h"
#include "spmd/trace_totals.h"

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

Json TensorJson(const TensorRecord& t, const TensorSpmd& s) {
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
  j["local_shape"] = s.local_shape;
  j["bytes_per_device"] = s.bytes_per_device;
  j["scope"] = t.scope;
  j["condition"] = t.condition.empty() ? Json(nullptr) : Json(t.condition);
  if (!t.note.empty()) j["note"] = t.note;
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
  j["placement"] = ToString(s.placement);
  j["propagated_spec"] = s.propagated_spec ? Json(s.propagated_spec->ToString()) : Json(nullptr);
  if (!t.warnings.empty()) j["warnings"] = t.warnings;
  return j;
}

Json StepJson(const Trace& trace, const StepResult& step) {
  Json backward = Json::array();
  for (const StepCollective& c : step.backward)
    backward.push_back({{"kind", c.written ? ToString(c.kind) : HloName(c.kind)},
                        {"pass", "backward"},
                        {"origin", c.written ? "written" : "xla"},
                        {"recompute", c.recompute},
                        {"forward_op", c.forward_op},
                        {"tensor", c.tensor},
                        {"axes", c.axes},
                        {"participants", c.participants},
                        {"groups", c.groups},
                        {"bytes_per_device", c.bytes_per_device},
                        {"dtype", ToString(c.dtype)},
                        {"xla_cpu_op", c.xla_cpu_op},
                        {"xla_cpu_bytes_per_device", c.xla_cpu_bytes_per_device},
                        {"xla_cpu_result_bytes", c.xla_cpu_result_bytes},
                        {"reason", c.reason}});
  Json grads = Json::array();
  for (const StepGradient& g : step.gradients)
    grads.push_back({{"tensor", g.tensor},
                     {"name", g.tensor == trace.input ? "inputs" : trace.tensors[g.tensor].name},
                     {"dtype", ToString(g.dtype)},
                     {"spec", g.spec.ToString()},
                     {"local_shape", g.local_shape},
                     {"bytes_per_device", g.bytes_per_device}});
  Json saved = Json::array();
  for (const SavedResidual& r : step.memory.saved)
    saved.push_back(
        {{"tensor", r.tensor}, {"name", r.name}, {"offloaded", r.offloaded}, {"bytes", r.bytes}});
  const StepMemory& m = step.memory;
  Json at_peak = Json::array();
  for (const StepBuffer& b : m.at_peak)
    at_peak.push_back({{"tensor", b.tensor}, {"bytes", b.bytes}, {"cotangent", b.cotangent}});
  Json j;
  j["remat_policy"] = {{"name", step.policy.name},
                       {"wrapped", step.policy.wrapped},
                       {"saved_names", step.policy.saved},
                       {"offloaded_names", step.policy.offloaded},
                       {"summary", step.policy.summary}};
  j["gradients"] = grads;
  j["memory"] = {{"parameter_bytes", m.parameter_bytes},
                 {"input_bytes", m.input_bytes},
                 {"gradient_bytes", m.gradient_bytes},
                 {"input_gradient_bytes", m.input_gradient_bytes},
                 {"saved_bytes", m.saved_bytes},
                 {"offloaded_bytes", m.offloaded_bytes},
                 {"residual_bytes", m.residual_bytes},
                 {"recomputed_bytes", m.recomputed_bytes},
                 {"saved", saved},
                 {"forward_temporary_bytes", m.forward_temporary_bytes},
                 {"backward_temporary_bytes", m.backward_temporary_bytes},
                 {"backward_peak_op", m.backward_peak_op},
                 {"backward_at_peak", at_peak},
                 {"xla_cpu_notes", m.xla_cpu_notes},
                 {"peak_temporary_bytes", m.peak_temporary_bytes()},
                 {"peak_bytes", m.peak_bytes()}};
  j["totals"] = {{"forward_bytes_sent_per_device", step.forward_bytes_per_device},
                 {"backward_bytes_sent_per_device", step.backward_bytes_per_device},
                 {"recompute_bytes_sent_per_device", step.recompute_bytes_per_device},
                 {"step_bytes_sent_per_device", step.step_bytes_per_device()}};
  return {{"backward_collectives", backward}, {"step", j}};
}

Json TpuJson(const TpuStepCollectives& tpu) {
  auto list = [](const std::vector<TpuCollective>& cs) {
    Json a = Json::array();
    for (const TpuCollective& c : cs)
      a.push_back({{"op", c.op},
                   {"group_size", c.group},
                   {"result_bytes", c.result_bytes},
                   {"recompute", c.recompute},
                   {"tensor", c.tensor},
                   {"source", c.source},
                   {"rule", ToString(c.rule)},
                   {"combined_group", c.combined_group},
                   {"reason", c.reason}});
    return a;
  };
  return {{"forward", list(tpu.forward)},
          {"backward", list(tpu.backward)},
          {"dropped", list(tpu.dropped)}};
}

}  // namespace

std::string TraceToJson(const Trace& trace, const SpmdResult& spmd, const StepResult* step,
                        const TpuStepCollectives* tpu) {
  Json j;
  j["schema"] = 1;
  j["block"] = trace.block;
  j["path"] = trace.path;
  j["mode"] = trace.numeric ? "numeric" : "symbolic";
  j["mesh"] = trace.mesh;
  j["devices"] = trace.num_devices;
  j["maxtext_revision"] = trace.maxtext_revision;
  j["maxtext_revision_why"] = trace.maxtext_revision_why;
  j["notes"] = trace.notes;
  if (!trace.warnings.empty()) j["warnings"] = trace.warnings;
  Json tensors = Json::array();
  for (const TensorRecord& t : trace.tensors) tensors.push_back(TensorJson(t, spmd.tensor(t.id)));
  j["tensors"] = tensors;
  Json ops = Json::array();
  for (const OpRecord& op : trace.ops) {
    Json o;
    o["id"] = op.id;
    o["stable_id"] = op.stable_id;
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
      if (step) o["collective"]["pass"] = "forward";
    }
    if (!spmd.implied_at(op.id).empty()) {
      Json implied = Json::array();
      for (const ImpliedCollective& c : spmd.implied_at(op.id))
        implied.push_back({{"kind", ToString(c.kind)},
                           {"origin", "xla"},
                           {"tensor", c.tensor},
                           {"axes", c.axes},
                           {"participants", c.participants},
                           {"groups", c.groups},
                           {"bytes_per_device", c.bytes_per_device},
                           {"dtype", ToString(c.dtype)},
                           {"xla_cpu_bytes_per_device", c.xla_cpu_bytes_per_device},
                           {"from", c.from.ToString()},
                           {"to", c.to.ToString()},
                           {"local_before", c.local_before},
                           {"local_after", c.local_after},
                           {"reason", c.reason},
                           {"combined_group", c.combined_group}});
      if (step)
        for (Json& c : implied) c["pass"] = "forward";
      o["implied_collectives"] = implied;
    }
    ops.push_back(o);
  }
  j["ops"] = ops;
  Json facts = Json::array();
  for (const Fact& f : trace.facts) {
    Json inputs = Json::object();
    for (const FactInput& in : f.inputs) inputs[in.name] = in.value;
    facts.push_back({{"kind", ToString(f.kind)},
                     {"name", FactName(f)},
                     {"scope", f.scope},
                     {"shape", f.shape},
                     {"values", f.values},
                     {"inputs", inputs},
                     {"note", FactNote(f)}});
  }
  j["facts"] = facts;
  const TraceTotals totals = ComputeTotals(trace, spmd);
  Json by_collective = Json::array();
  for (const CollectiveTotal& c : totals.collectives)
    by_collective.push_back({{"kind", c.written ? ToString(c.kind) : HloName(c.kind)},
                             {"origin", c.written ? "written" : "implied"},
                             {"axes", c.axes},
                             {"count", c.count},
                             {"bytes_sent_per_device", c.bytes_sent_per_device}});
  j["totals"] = {{"weight_bytes_per_device", totals.weight_bytes_per_device},
                 {"collective_bytes_sent_per_device", totals.collective_bytes_sent_per_device},
                 {"implied_collective_bytes_sent_per_device", totals.implied_bytes_sent_per_device},
                 {"implied_collective_bytes_sent_per_device_on_xla_cpu",
                  totals.implied_bytes_sent_per_device_on_xla_cpu},
                 {"collectives", by_collective}};
  const MemoryEstimate& m = spmd.memory;
  Json by_dtype = Json::object();
  for (const auto& [dtype, bytes] : m.parameter_bytes_by_dtype) by_dtype[ToString(dtype)] = bytes;
  auto holders = [](const std::vector<MemoryHolder>& hs) {
    Json a = Json::array();
    for (const MemoryHolder& h : hs) a.push_back({{"tensor", h.tensor}, {"bytes", h.bytes}});
    return a;
  };
  j["memory"] = {{"parameter_bytes_by_dtype", by_dtype},
                 {"parameter_bytes", m.parameter_bytes},
                 {"input_bytes", m.input_bytes},
                 {"peak_temporary_bytes", m.peak_temporary_bytes},
                 {"peak_op", m.peak_op},
                 {"peak_bytes", m.peak_bytes()},
                 {"at_peak", holders(m.at_peak)},
                 {"largest_temporaries", holders(m.largest)},
                 {"weight_copy_bytes_at_peak", m.gathered_weight_bytes},
                 {"unresolved_bytes_at_peak", m.unresolved_bytes}};
  if (step) {
    Json s = StepJson(trace, *step);
    j["backward_collectives"] = s["backward_collectives"];
    j["step"] = s["step"];
  }
  if (tpu) j["tpu_collectives"] = TpuJson(*tpu);
  return j.dump(1) + "\n";
}

}  // namespace shardtrace
