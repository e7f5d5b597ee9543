#include "check/trace_diff.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "paths/moe_block.h"
#include "run/run.h"
#include "spmd/trace_totals.h"
#include "util/error.h"

namespace shardtrace {
namespace {

TensorSide SideOf(const TensorRecord& t, const TensorSpmd& spmd) {
  TensorSide s;
  s.kind = t.kind;
  s.dtype = t.dtype;
  s.dims = t.dims;
  s.shape = t.shape;
  s.logical_axes = t.logical_axes;
  s.written_spec = t.partition_spec;
  s.propagated_spec = spmd.propagated_spec;
  s.placement = spmd.placement;
  s.constraint = ToString(t.constraint);
  s.bytes_per_device = KnownBytesPerDevice(t, spmd);
  if (s.bytes_per_device) s.local_shape = spmd.local_shape;
  return s;
}

std::vector<std::string> ChangedFields(const TensorSide& a, const TensorSide& b) {
  std::vector<std::string> changed;
  if (a.kind != b.kind) changed.push_back("kind");
  if (a.dtype != b.dtype) changed.push_back("dtype");
  if (a.shape != b.shape) changed.push_back("shape");
  if (a.logical_axes != b.logical_axes) changed.push_back("logical axes");
  if (a.written_spec != b.written_spec) changed.push_back("spec");
  // A tensor no statement places can change only in what XLA's propagation gives it.
  if (a.propagated_spec != b.propagated_spec) changed.push_back("propagated spec");
  if (a.constraint != b.constraint) changed.push_back("constraint");
  if (a.local_shape != b.local_shape) changed.push_back("local shape");
  return changed;
}

int64_t MaxOf(const std::vector<int64_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// Every collective that moves bytes, in program order: the ones moe.py writes, and after each
// op the ones XLA inserts for it.
std::vector<std::pair<std::string, CollectiveSide>> Collectives(const Trace& trace,
                                                                const SpmdResult& spmd) {
  std::vector<std::pair<std::string, CollectiveSide>> out;
  for (const OpRecord& op : trace.ops) {
    std::map<std::string, int> seen;  // an op may need the same kind on one tensor twice
    for (const ImpliedCollective& c : spmd.implied_at(op.id)) {
      if (c.bytes_per_device == 0) continue;  // a local slice moves nothing
      CollectiveSide s;
      s.kind = c.kind;
      s.written = false;
      s.axes = c.axes;
      s.participants = c.participants;
      s.input = s.output = trace.tensors[static_cast<size_t>(c.tensor)].name;
      s.sent_per_device = s.received_per_device = c.bytes_per_device;
      std::string key = fmt::format("{} \u21c4 xla {}:{}", op.stable_id, HloName(c.kind), s.input);
      if (const int n = seen[key]++; n > 0) key += fmt::format(" ({})", n + 1);
      out.push_back({key, s});
    }
    if (!op.collective) continue;
    CollectiveSide s;
    s.kind = op.collective->kind;
    s.axes = op.collective->axes;
    s.participants = op.collective->participants;
    if (!op.inputs.empty()) s.input = trace.tensors[op.inputs.front()].name;
    if (!op.outputs.empty()) s.output = trace.tensors[op.outputs.front()].name;
    s.sent_per_device = MaxOf(op.collective->bytes_sent);
    s.received_per_device = MaxOf(op.collective->bytes_received);
    out.push_back({op.stable_id, s});
  }
  return out;
}

SideTotals TotalsOf(const Trace& trace, const SpmdResult& spmd,
                    const std::vector<std::string>& keys) {
  // Weights and collectives from ComputeTotals, the peak from the SPMD memory model; the
  // activations no sharding reached are listed beside them.
  const TraceTotals t = ComputeTotals(trace, spmd);
  SideTotals s;
  s.weight_bytes = t.weight_bytes_per_device;
  s.peak_activation_bytes = spmd.memory.peak_temporary_bytes;
  s.written_sent_bytes = t.collective_bytes_sent_per_device;
  s.implied_sent_bytes = t.implied_bytes_sent_per_device;
  for (size_t i = 0; i < trace.tensors.size(); ++i)
    if (trace.tensors[i].kind == TensorKind::kAct &&
        !KnownBytesPerDevice(trace.tensors[i], spmd.tensor(static_cast<int>(i))))
      s.unconstrained.push_back(keys[i]);
  return s;
}

std::map<std::string, std::string> RulesByName(const AxisRules& rules) {
  std::map<std::string, std::vector<std::string>> lists;
  for (const AxisRule& r : rules)
    lists[r.logical].push_back(fmt::format("[{}]", fmt::join(r.mesh_axes, ", ")));
  std::map<std::string, std::string> out;
  for (const auto& [name, l] : lists) out[name] = fmt::format("{}", fmt::join(l, " | "));
  return out;
}

std::vector<KeyChange> ChangedKeys(const std::map<std::string, std::string>& a,
                                   const std::map<std::string, std::string>& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<KeyChange> out;
  for (const std::string& k : keys) {
    const auto ia = a.find(k), ib = b.find(k);
    const std::string va = ia == a.end() ? "(unset)" : ia->second;
    const std::string vb = ib == b.end() ? "(unset)" : ib->second;
    if (va != vb) out.push_back({k, va, vb});
  }
  return out;
}

std::map<std::string, std::string> ValuesOf(const Config& config) {
  std::map<std::string, std::string> out;
  // logical_axis_rules are compared rule by rule (TraceDiff::axis_rules).
  config.ForEachValue([&](const std::string& k, const ConfigValue& v) {
    if (k != "logical_axis_rules") out[k] = v.ToString();
  });
  std::vector<std::string> quoted;
  for (const std::string& axis : config.mesh_axes()) quoted.push_back("'" + axis + "'");
  out["mesh_axes"] = fmt::format("[{}]", fmt::join(quoted, ", "));
  return out;
}

// The changed keys behind a path change: keys named in a path reason that only one side
// gives, and the parallelism keys behind an expert/tensor-parallel reason.
std::vector<std::string> PathSelectors(const TraceDiff& d) {
  std::vector<std::string> reasons;
  for (const auto* side : {&d.a, &d.b})
    for (const std::string& r : side->path_reasons) {
      const auto& other = side == &d.a ? d.b.path_reasons : d.a.path_reasons;
      if (std::find(other.begin(), other.end(), r) == other.end()) reasons.push_back(r);
    }
  std::vector<std::string> out;
  for (const KeyChange& k : d.config_keys) {
    bool selects = false;
    for (const std::string& r : reasons) {
      selects |= r.find(k.key) != std::string::npos;
      selects |= r.find("expert parallelism") != std::string::npos &&
                 (k.key.find("expert_parallelism") != std::string::npos ||
                  k.key == "custom_mesh_and_rule");
      selects |= r.find("tensor parallelism") != std::string::npos &&
                 k.key.find("tensor_parallelism") != std::string::npos;
    }
    if (selects) out.push_back(k.key);
  }
  // Same reasons, another label (EP=2 -> TP=2): the mesh keys changed the path's variant.
  if (out.empty())
    for (const KeyChange& k : d.config_keys)
      if (k.key.ends_with("_parallelism") || k.key == "custom_mesh_and_rule") out.push_back(k.key);
  return out;
}

struct Side {
  RunSetup in;
  Trace trace;
  SpmdResult spmd;
  std::optional<StepResult> step;
};

// Each side's training step too, unless it runs inference (no backward pass).
Side Load(const std::vector<std::string>& args, const std::string& block,
          std::optional<int64_t> devices) {
  RunRequest request = SymbolicRequest(args, devices, ParseBlock(block));
  request.step = !Prepare(request).setup.inference;
  RunResult run = Run(request);
  return {std::move(run.setup), std::move(run.trace), std::move(run.spmd), std::move(run.step)};
}

DiffSideInfo InfoOf(const std::vector<std::string>& args, const Side& s,
                    const std::vector<std::string>& keys) {
  DiffSideInfo info;
  info.args = args;
  info.config_files = s.in.config.loaded_files();
  info.maxtext_revision = s.in.config.revision().Title();
  info.mesh = s.in.mesh.ToString();
  info.devices = s.in.mesh.num_devices();
  info.path = s.trace.path;
  for (const std::string& n : s.trace.notes)
    if (n.rfind("path: ", 0) == 0) info.path_reasons.push_back(n.substr(6));
  info.totals = TotalsOf(s.trace, s.spmd, keys);
  if (s.step) {
    SideTotals& t = info.totals;
    t.has_step = true;
    t.remat_policy = s.step->policy.name;
    t.step_peak_bytes = s.step->memory.peak_bytes();
    t.saved_bytes = s.step->memory.saved_bytes;
    t.recomputed_bytes = s.step->memory.recomputed_bytes;
    t.backward_sent_bytes = s.step->backward_bytes_per_device;
  }
  return info;
}

}  // namespace

std::optional<int64_t> KnownBytesPerDevice(const TensorRecord& t, const TensorSpmd& s) {
  // Placed by a statement, a shard_map block, or the SPMD propagation model.
  if (t.partition_spec || t.in_shard_map || s.placement == Placement::kPropagated ||
      s.placement == Placement::kArgument)
    return s.bytes_per_device;
  return std::nullopt;
}

std::vector<std::string> AlignmentKeys(const Trace& trace) {
  std::vector<std::string> keys;
  for (const TensorRecord& t : trace.tensors) keys.push_back(t.stable_id);
  return keys;
}

bool TraceDiff::same_sharding() const {
  return !path_changed() && !mesh_changed() && tensors.empty() && collectives.empty();
}

bool TraceDiff::same() const {
  return same_sharding() && a.totals.has_step == b.totals.has_step &&
         a.totals.has_step == b.totals.has_step &&
         a.totals.step_peak_bytes == b.totals.step_peak_bytes &&
         a.totals.saved_bytes == b.totals.saved_bytes &&
         a.totals.backward_sent_bytes == b.totals.backward_sent_bytes;
}

TraceDiff DiffConfigs(const DiffRequest& request) {
  // A side that cannot be traced says which one: `--a ici_expert_parallelism=3` fails on A only.
  const auto load = [&](const std::vector<std::string>& args, const char* name) {
    try {
      return Load(args, request.block, request.devices);
    } catch (const Error& e) {
      throw Error(fmt::format("diff side {}: {}", name, e.what()), e.warnings());
    }
  };
  const Side a = load(request.args_a, "A");
  const Side b = WarnedBefore(a.in.warnings, [&] { return load(request.args_b, "B"); });
  const std::vector<std::string> keys_a = AlignmentKeys(a.trace), keys_b = AlignmentKeys(b.trace);
  TraceDiff d;
  d.block = request.block;
  d.a = InfoOf(request.args_a, a, keys_a);
  d.b = InfoOf(request.args_b, b, keys_b);
  d.warnings = a.in.warnings;
  AddWarnings(d.warnings, b.in.warnings);
  d.config_keys = ChangedKeys(ValuesOf(a.in.config), ValuesOf(b.in.config));
  d.axis_rules = ChangedKeys(RulesByName(a.in.config.logical_axis_rules()),
                             RulesByName(b.in.config.logical_axis_rules()));
  if (d.path_changed()) d.path_selected_by = PathSelectors(d);

  // Tensors: B's order first (then A-only rows in A's order); stable sort by impact keeps it.
  std::map<std::string, size_t> index_a;
  for (size_t i = 0; i < keys_a.size(); ++i) index_a[keys_a[i]] = i;
  std::set<std::string> in_b(keys_b.begin(), keys_b.end());
  for (size_t i = 0; i < keys_b.size(); ++i) {
    TensorDiff t;
    t.key = keys_b[i];
    t.b = SideOf(b.trace.tensors[i], b.spmd.tensors[i]);
    const auto it = index_a.find(keys_b[i]);
    if (it != index_a.end()) {
      t.a = SideOf(a.trace.tensors[it->second], a.spmd.tensors[it->second]);
      t.changed = ChangedFields(*t.a, *t.b);
      if (t.changed.empty()) continue;
      if (t.a->bytes_per_device && t.b->bytes_per_device) {
        t.delta_bytes = *t.b->bytes_per_device - *t.a->bytes_per_device;
        t.impact = std::abs(t.delta_bytes);
      } else {
        // Placed on one side only: what that side holds is the impact; no delta is claimed.
        t.impact = std::max(t.a->bytes_per_device.value_or(0), t.b->bytes_per_device.value_or(0));
      }
    } else {
      t.impact = t.b->bytes_per_device.value_or(0);
      t.delta_bytes = t.impact;
    }
    d.tensors.push_back(std::move(t));
  }
  for (size_t i = 0; i < keys_a.size(); ++i) {
    if (in_b.count(keys_a[i])) continue;
    TensorDiff t;
    t.key = keys_a[i];
    t.a = SideOf(a.trace.tensors[i], a.spmd.tensors[i]);
    t.impact = t.a->bytes_per_device.value_or(0);
    t.delta_bytes = -t.impact;
    d.tensors.push_back(std::move(t));
  }
  std::stable_sort(d.tensors.begin(), d.tensors.end(),
                   [](const TensorDiff& x, const TensorDiff& y) { return x.impact > y.impact; });

  const auto coll_a = Collectives(a.trace, a.spmd), coll_b = Collectives(b.trace, b.spmd);
  for (const auto& [key, sb] : coll_b) {
    CollectiveDiff c;
    c.key = key;
    c.b = sb;
    const auto it = std::find_if(coll_a.begin(), coll_a.end(),
                                 [&key = key](const auto& x) { return x.first == key; });
    if (it != coll_a.end()) {
      c.a = it->second;
      if (c.a->axes != sb.axes) c.changed.push_back("axes");
      if (c.a->participants != sb.participants) c.changed.push_back("participants");
      if (c.a->sent_per_device != sb.sent_per_device ||
          c.a->received_per_device != sb.received_per_device)
        c.changed.push_back("bytes");
      if (c.changed.empty()) continue;
    }
    c.delta_sent = sb.sent_per_device - (c.a ? c.a->sent_per_device : 0);
    c.impact = std::abs(c.delta_sent);
    d.collectives.push_back(std::move(c));
  }
  for (const auto& [key, sa] : coll_a) {
    if (std::any_of(coll_b.begin(), coll_b.end(),
                    [&key = key](const auto& x) { return x.first == key; }))
      continue;
    CollectiveDiff c;
    c.key = key;
    c.a = sa;
    c.delta_sent = -sa.sent_per_device;
    c.impact = sa.sent_per_device;
    d.collectives.push_back(std::move(c));
  }
  std::stable_sort(
      d.collectives.begin(), d.collectives.end(),
      [](const CollectiveDiff& x, const CollectiveDiff& y) { return x.impact > y.impact; });
  return d;
}

}  // namespace shardtrace
