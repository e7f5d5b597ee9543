#include "emit/step_text.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "emit/human_bytes.h"
#include "emit/text_table.h"

namespace shardtrace {

std::vector<std::string> StepSummaryLines(const StepResult& step) {
  const StepMemory& m = step.memory;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("remat_policy={}: {}", step.policy.name, step.policy.summary));
  lines.push_back(fmt::format(
      "step peak {} per device = parameters {} + gradients {} + input {} + its gradient {} + "
      "temporaries {} ({})",
      HumanBytes(m.peak_bytes()), HumanBytes(m.parameter_bytes), HumanBytes(m.gradient_bytes),
      HumanBytes(m.input_bytes), HumanBytes(m.input_gradient_bytes),
      HumanBytes(m.peak_temporary_bytes()),
      m.backward_temporary_bytes >= m.forward_temporary_bytes ? "backward: residuals + cotangents"
                                                              : "forward + what it keeps"));
  lines.push_back(fmt::format(
      "kept for the backward per layer: {} on device{}; residuals the backward reads {}, "
      "recomputed {}",
      HumanBytes(m.saved_bytes),
      m.offloaded_bytes > 0 ? fmt::format(", {} offloaded to host", HumanBytes(m.offloaded_bytes))
                            : std::string(),
      HumanBytes(m.residual_bytes), HumanBytes(m.recomputed_bytes)));
  lines.push_back(fmt::format(
      "step communication {} per device = forward {} + backward {} (of which remat re-runs {})",
      HumanBytes(step.step_bytes_per_device()), HumanBytes(step.forward_bytes_per_device),
      HumanBytes(step.backward_bytes_per_device), HumanBytes(step.recompute_bytes_per_device)));
  return lines;
}

namespace {

// The collectives TPU's compiler writes otherwise than the tables above, by pass: the rewritten
// ones, what it does not write, and the tuple all-reduces its combiner sends.
std::string TpuSection(const Trace& trace, const TpuStepCollectives& tpu) {
  // Tuples numbered in the order they appear; a run of the same rewritten op (a windowed
  // einsum's permutes) is one row with its count.
  std::map<int, int> tuple;
  struct Row {
    std::string pass;
    const TpuCollective* c;
    bool dropped;
    int count;
  };
  std::vector<Row> rows;
  auto add = [&](const std::string& pass, const TpuCollective& c, bool dropped) {
    if (c.rule == TpuRule::kAsModelled) return;
    if (c.combined_group >= 0) tuple.emplace(c.combined_group, static_cast<int>(tuple.size()) + 1);
    if (!rows.empty()) {
      Row& last = rows.back();
      if (last.pass == pass && last.dropped == dropped && last.c->op == c.op &&
          last.c->group == c.group && last.c->result_bytes == c.result_bytes &&
          last.c->tensor == c.tensor && last.c->rule == c.rule && c.combined_group < 0) {
        ++last.count;
        return;
      }
    }
    rows.push_back({pass, &c, dropped, 1});
  };
  for (const TpuCollective& c : tpu.forward) add("forward", c, false);
  for (const TpuCollective& c : tpu.backward)
    add(c.recompute ? "backward, recompute" : "backward", c, false);
  for (const TpuCollective& c : tpu.dropped)
    add(c.recompute ? "backward, recompute" : "forward", c, true);
  std::string out = fmt::format(
      "\nas TPU's compiler writes them (rules measured on libtpu 0.0.51; docs/step.md): {} "
      "forward and {} backward collectives\n",
      tpu.forward.size(), tpu.backward.size());
  if (rows.empty()) return out + "  every collective as above\n";
  TextTable table({"pass", "TPU writes", "group", "result/device", "moves", "rule", "why"});
  for (const Row& r : rows) {
    const TpuCollective& c = *r.c;
    std::string op = r.dropped ? "nothing (" + c.op + ")" : c.op;
    if (r.count > 1) op = fmt::format("{} x {}", r.count, op);
    if (c.combined_group >= 0) op += fmt::format(" (tuple {})", tuple.at(c.combined_group));
    table.AddRow({r.pass, op, std::to_string(c.group), HumanBytes(c.result_bytes),
                  c.tensor >= 0 ? trace.tensors[static_cast<size_t>(c.tensor)].name : "",
                  ToString(c.rule), c.reason});
  }
  return out + table.Render("  ") + "  the others as above\n";
}

}  // namespace

std::string StepToText(const Trace& trace, const StepResult& step, const TpuStepCollectives* tpu) {
  std::string out = "\nbackward pass (training step; docs/step.md)\n";
  TextTable collectives(
      {"op", "origin", "axes", "participants", "moves", "scope", "sent/device", "why"});
  for (const StepCollective& c : step.backward) {
    const std::string origin = c.recompute ? "recompute" : c.written ? "written" : "\u21c4 xla";
    const OpRecord& op = trace.ops[static_cast<size_t>(c.forward_op)];
    collectives.AddRow({c.written ? ToString(c.kind) : HloName(c.kind), origin,
                        fmt::format("{}", fmt::join(c.axes, ",")), std::to_string(c.participants),
                        c.tensor >= 0 ? trace.tensors[static_cast<size_t>(c.tensor)].name : "",
                        op.scope, HumanBytes(c.bytes_per_device), c.reason});
  }
  if (collectives.empty())
    out += "  no backward collectives\n";
  else
    out += collectives.Render("  ");
  TextTable grads({"gradient of", "dtype", "sharding", "per device", "bytes/device"});
  for (const StepGradient& g : step.gradients) {
    const TensorRecord& t = trace.tensors[static_cast<size_t>(g.tensor)];
    std::string shape;
    for (size_t i = 0; i < g.local_shape.size(); ++i)
      shape += fmt::format("{}{}", i ? "," : "", g.local_shape[i]);
    grads.AddRow({t.id == trace.input ? "inputs" : t.name, ToString(g.dtype), g.spec.ToString(),
                  "[" + shape + "]", HumanBytes(g.bytes_per_device)});
  }
  out += "\ngradients (sharded like their primals)\n" + grads.Render("  ");
  const StepMemory& m = step.memory;
  if (!m.saved.empty()) {
    TextTable saved({"kept for the backward", "name", "where", "bytes/device"});
    for (const SavedResidual& s : m.saved)
      saved.AddRow({trace.tensors[static_cast<size_t>(s.tensor)].name,
                    s.name.empty() ? "(no remat)" : s.name, s.offloaded ? "pinned_host" : "device",
                    HumanBytes(s.bytes)});
    out += "\n" + saved.Render("  ");
  }
  out += "\nstep per device (one layer)\n";
  for (const std::string& line : StepSummaryLines(step)) out += "  " + line + "\n";
  if (!m.at_peak.empty() && m.backward_peak_op >= 0) {
    std::vector<std::string> held;
    for (size_t i = 0; i < m.at_peak.size() && i < 4; ++i) {
      const StepBuffer& b = m.at_peak[i];
      const std::string& name = trace.tensors[static_cast<size_t>(b.tensor)].name;
      held.push_back(fmt::format("{} {}", b.cotangent ? "d_" + name : name, HumanBytes(b.bytes)));
    }
    if (m.at_peak.size() > 4) held.push_back(fmt::format("{} smaller", m.at_peak.size() - 4));
    out += fmt::format("  backward peak at the VJP of op {} ({}): {}\n", m.backward_peak_op,
                       trace.ops[static_cast<size_t>(m.backward_peak_op)].Name(),
                       fmt::join(held, ", "));
  }
  for (const std::string& note : m.xla_cpu_notes) out += "  (against XLA:CPU: " + note + ")\n";
  if (tpu) out += TpuSection(trace, *tpu);
  return out;
}

}  // namespace shardtrace
