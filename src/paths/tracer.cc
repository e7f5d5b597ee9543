#include "paths/tracer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "shard/blocks.h"
#include "shard/sharding.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace shardtrace {

NumericSummary Summarize(const std::vector<Array>& shards) {
  NumericSummary s;
  double sum = 0;
  bool first = true;
  for (const Array& a : shards) {
    if (!a.numeric()) return s;
    for (const float v : a.values()) {
      if (first) {
        s.min = s.max = v;
        first = false;
      }
      s.min = std::min<double>(s.min, v);
      s.max = std::max<double>(s.max, v);
      sum += v;
      s.nonzeros += v != 0.0f;
      ++s.elements;
    }
  }
  s.mean = s.elements ? sum / static_cast<double>(s.elements) : 0.0;
  return s;
}

Tracer::Tracer(const Mesh& mesh, const AxisRules& rules, bool numeric)
    : mesh_(mesh), rules_(rules), numeric_(numeric) {
  trace_.numeric = numeric;
  trace_.mesh = mesh.ToString();
  trace_.num_devices = mesh.num_devices();
}

std::string Tracer::CurrentScope() const {
  std::string scope;
  for (const std::string& s : scopes_)
    if (!s.empty()) scope += (scope.empty() ? "" : "/") + s;
  return scope;
}

Tracer::ScopeGuard Tracer::Iteration(const std::string& loop, int64_t index, int64_t count) {
  const std::string name = fmt::format("{}_{}", loop, index);
  const std::string parent = CurrentScope();
  trace_.loop_iterations.push_back(
      LoopIteration{loop, parent.empty() ? name : parent + "/" + name, index, count});
  return ScopeGuard(&scopes_, name);
}

int64_t Tracer::num_shards() const { return numeric_ ? mesh_.num_devices() : 1; }

int Tracer::Record(const Out& out, const std::vector<Array>& shards, bool per_device) {
  const Array& a = shards.front();
  if (out.dims.size() != a.shape.size())
    throw std::logic_error(fmt::format("tensor '{}': dims '{}' do not match shape {}", out.name,
                                       out.dims, ShapeToString(a.shape)));
  for (const Array& s : shards)
    if (s.shape != a.shape)
      throw std::logic_error(fmt::format("tensor '{}': device shapes differ", out.name));
  TensorRecord t;
  t.id = static_cast<int>(trace_.tensors.size());
  t.name = out.name;
  t.kind = out.kind;
  t.dtype = a.dtype;
  t.dims = out.dims;
  t.shape = a.shape;
  if (!t.shape.empty()) t.shape[0] = RecordedRows(out.dims, t.shape[0]);
  t.scope = CurrentScope();
  const std::string path = t.scope.empty() ? t.name : t.scope + "/" + t.name;
  t.stable_id = fmt::format("{}#{}", path, occurrences_[path]++);
  for (const std::string& c : conditions_)
    if (!c.empty()) t.condition_clauses.push_back(c);
  t.condition = fmt::format("{}", fmt::join(t.condition_clauses, " && "));
  t.in_shard_map = per_device || shard_map_depth_ > 0;
  if (numeric_ && summaries_) t.summary = Summarize(shards);
  trace_.tensors.push_back(std::move(t));
  return trace_.tensors.back().id;
}

int Tracer::RecordOp(OpDesc op, std::vector<int> inputs, std::vector<int> outputs) {
  OpRecord r;
  r.id = static_cast<int>(trace_.ops.size());
  r.kind = op.kind;
  r.function = std::move(op.function);
  r.einsum = std::move(op.einsum);
  r.equation = std::move(op.equation);
  r.attrs = std::move(op.attrs);
  r.inputs = std::move(inputs);
  r.outputs = std::move(outputs);
  r.scope = CurrentScope();
  std::string key = r.scope.empty() ? r.Name() : fmt::format("{}/{}", r.scope, r.Name());
  if (!r.outputs.empty()) key += ":" + trace_.tensors[r.outputs.front()].name;
  r.stable_id = fmt::format("{}#{}", key, op_occurrences_[key]++);
  trace_.ops.push_back(std::move(r));
  return trace_.ops.back().id;
}

Value Tracer::Weight(const Out& out, Array value, const LogicalAxes& kernel_axes,
                     const std::string& param) {
  const PartitionSpec spec = ResolveSpec(kernel_axes, rules_, &mesh_);
  Value v{-1, {std::move(value)}, false};
  v.tensor = Record(out, v.shards, false);
  TensorRecord& t = trace_.tensors[v.tensor];
  t.kind = TensorKind::kWeight;
  t.logical_axes = kernel_axes;
  t.constraint = Constraint::kKernelAxes;
  t.partition_spec = spec;
  // A parameter is a jit argument: JAX refuses a sharding that does not divide its dims
  // (MaxText cannot build such a block), where an activation would be padded.
  try {
    ShardTensor(t.name, t.shape, t.dtype, spec, mesh_, Divisibility::kRequire);
  } catch (const Error& e) {
    Fail(
        "{} (kernel_axes {}); MaxText cannot build this block: JAX refuses a parameter whose "
        "sharding does not divide it",
        e.what(), LogicalAxesToString(kernel_axes));
  }
  RecordOp({OpKind::kParam, "", {}}, {}, {v.tensor});
  trace_.parameters.emplace_back(param, v.tensor);
  if (tape_) tape_->AddLeaf(v.tensor);
  return v;
}

Value Tracer::Input(const Out& out, Array value) {
  Value v{-1, {std::move(value)}, false};
  v.tensor = Record(out, v.shards, false);
  RecordOp({OpKind::kInput, "", {}}, {}, {v.tensor});
  if (tape_) tape_->AddLeaf(v.tensor);
  return v;
}

std::vector<Value> Tracer::ApplyN(const OpDesc& op, const std::vector<const Value*>& inputs,
                                  const std::vector<Out>& outs, const Fn& fn, Vjp vjp) {
  bool per_device = false;
  size_t shards = 1;
  for (const Value* in : inputs) {
    per_device |= in->per_device;
    shards = std::max(shards, in->shards.size());
  }
  // Devices are independent until a collective: each computes its own shards, in
  // parallel, and errors surface as the lowest failing device's, as in a serial run.
  std::vector<std::vector<Array>> produced(shards);
  try {
    ParallelFor(numeric_ ? pool_ : nullptr, static_cast<int64_t>(shards), [&](int64_t d) {
      std::vector<const Array*> args;
      for (const Value* in : inputs) args.push_back(&in->shards[in->shards.size() == 1 ? 0 : d]);
      if (progress_ != nullptr)
        progress_->Update(fmt::format("{} in {}, device {}/{}", ToString(op.kind), CurrentScope(),
                                      d + 1, shards));
      produced[d] = fn(args);
      SHARDTRACE_CHECK(produced[d].size() == outs.size());
    });
  } catch (const Error& e) {
    std::vector<std::string> names;
    for (const Value* in : inputs) names.push_back(trace_.tensors[in->tensor].name);
    std::vector<std::string> out_names;
    for (const Out& o : outs) out_names.push_back(o.name);
    Fail("{} in {} ({} -> {}): {}",
         op.kind == OpKind::kActivation ? op.function : ToString(op.kind), CurrentScope(),
         fmt::join(names, ", "), fmt::join(out_names, ", "), e.what());
  }
  std::vector<std::vector<Array>> results(outs.size());
  for (size_t d = 0; d < shards; ++d)
    for (size_t i = 0; i < outs.size(); ++i) results[i].push_back(std::move(produced[d][i]));
  std::vector<int> in_ids;
  for (const Value* in : inputs) in_ids.push_back(in->tensor);
  std::vector<Value> values;
  std::vector<int> out_ids;
  for (size_t i = 0; i < outs.size(); ++i) {
    Value v{-1, std::move(results[i]), per_device};
    v.tensor = Record(outs[i], v.shards, per_device);
    out_ids.push_back(v.tensor);
    values.push_back(std::move(v));
  }
  RecordOp(op, in_ids, out_ids);
  if (tape_) {
    std::vector<const Value*> produced_values;
    for (const Value& v : values) produced_values.push_back(&v);
    RecordVjp(op, inputs, produced_values, std::move(vjp));
  }
  return values;
}

Value Tracer::Apply(const OpDesc& op, const std::vector<const Value*>& inputs, const Out& out,
                    const std::function<Array(const std::vector<const Array*>&)>& fn, Vjp vjp) {
  return std::move(
      ApplyN(
          op, inputs, {out},
          [&](const std::vector<const Array*>& args) { return std::vector<Array>{fn(args)}; },
          std::move(vjp))
          .front());
}

void Tracer::Dump(const std::string& name, const Array& value, const std::string& logical,
                  const PartitionSpec& spec) {
  // MaxText names an entry "<file stem>/<variable>", or just "Unknown" when no local
  // variable of the calling frame holds the array.
  DumpEntry entry{
      name.empty() ? std::string(kUnknownActivation) : fmt::format("{}/{}", dump_file_, name),
      fmt::format("{}{}", ToString(value.dtype), ShapeToString(value.shape)), logical, spec};
  // MaxText logs each distinct (description, type, spec) once.
  for (const DumpEntry& e : trace_.dump)
    if (e.description == entry.description && e.type == entry.type && e.spec == entry.spec) return;
  trace_.dump.push_back(std::move(entry));
}

Value Tracer::Constrain(const Value& x, const std::string& name, const std::string& dims,
                        const std::optional<LogicalAxes>& axes, const PartitionSpec& spec,
                        Constraint constraint) {
  if (spec.rank() != x.shape().size())
    Fail("{} on '{}' in {}: spec {} has rank {} but the tensor {} has rank {}",
         ToString(OpKind::kShardingConstraint), name, CurrentScope(), spec.ToString(), spec.rank(),
         ShapeToString(x.shape()), x.shape().size());
  Value v = x;
  v.tensor = Record({name, dims, trace_.tensors[x.tensor].kind}, v.shards, x.per_device);
  TensorRecord& t = trace_.tensors[v.tensor];
  t.logical_axes = axes;
  t.constraint = constraint;
  t.partition_spec = spec;
  t.warnings = ShardTensor(name, t.shape, t.dtype, spec, mesh_).warnings;
  OpDesc op{OpKind::kShardingConstraint, "", {{"spec", spec.ToString()}}};
  if (axes) op.attrs.insert(op.attrs.begin(), {"logical_axes", LogicalAxesToString(*axes)});
  RecordOp(op, {x.tensor}, {v.tensor});
  RecordVjp(op, {&x}, {&v}, IdentityVjp());
  return v;
}

Value Tracer::ShardWithLogical(const Value& x, const std::string& name, const std::string& dims,
                               const LogicalAxes& axes,
                               const std::optional<std::string>& dump_variable) {
  if (axes.size() != x.shape().size())
    Fail("maybe_shard_with_logical on '{}' in {}: {} logical axes {} for a rank-{} tensor {}", name,
         CurrentScope(), axes.size(), LogicalAxesToString(axes), x.shape().size(),
         ShapeToString(x.shape()));
  const PartitionSpec spec = ResolveSpec(axes, rules_, &mesh_);
  Dump(dump_variable.value_or(name), x.array(), LogicalAxesToString(axes), spec);
  return Constrain(x, name, dims, axes, spec, Constraint::kShardWithLogical);
}

Value Tracer::ShardWithPspec(const Value& x, const std::string& name, const std::string& dims,
                             const PartitionSpec& spec,
                             const std::optional<std::string>& dump_variable) {
  Dump(dump_variable.value_or(name), x.array(), "Unknown", spec);
  return Constrain(x, name, dims, std::nullopt, spec, Constraint::kShardWithPspec);
}

Value Tracer::OptimizationBarrier(const Value& x) {
  const TensorRecord& in = trace_.tensors[x.tensor];
  return Apply(
      {OpKind::kOptimizationBarrier, "", {}}, {&x}, {in.name, in.dims, in.kind},
      [](const std::vector<const Array*>& a) { return *a[0]; }, IdentityVjp());
}

Value Tracer::ShardMapIn(const Value& x, const std::string& name, const std::string& dims,
                         const PartitionSpec& spec) {
  SHARDTRACE_CHECK(!x.per_device);
  if (spec.rank() != x.shape().size())
    Fail("shard_map in_specs for '{}': spec {} has rank {} but the array {} has rank {}", name,
         spec.ToString(), spec.rank(), ShapeToString(x.shape()), x.shape().size());
  // JAX rejects shard_map inputs whose dims the spec does not divide ("argument arrays with
  // axis sizes that are not evenly divisible by the corresponding mesh axis sizes").
  for (size_t d = 0; d < spec.rank(); ++d) {
    const int64_t parts = mesh_.Size(spec[d]);
    if (parts <= 1 || x.shape()[d] % parts == 0) continue;
    const bool batch = d < dims.size() && dims[d] == 'B';
    Fail(
        "sparse_matmul's shard_map in_specs {} for '{}' {}: dim {} of size {} is not divisible "
        "by {} = {} devices; JAX refuses it, as MaxText's forward does{}",
        spec.ToString(), name, ShapeToString(x.shape()), d, x.shape()[d],
        PartitionSpec::EntryToString(spec[d]), parts,
        batch ? "; the batch is per_device_batch_size x devices: set per_device_batch_size so "
                "that it divides"
              : "");
  }
  ShardTensor(name, x.shape(), x.dtype(), spec, mesh_, Divisibility::kRequire);
  Value v;
  v.per_device = true;
  v.shards.resize(static_cast<size_t>(num_shards()));
  ParallelFor(pool_, num_shards(), [&](int64_t d) {
    v.shards[d] = SliceBox(x.array(), BlockBounds(x.shape(), spec, mesh_, d));
  });
  v.tensor = Record({name, dims, trace_.tensors[x.tensor].kind}, v.shards, true);
  TensorRecord& t = trace_.tensors[v.tensor];
  t.constraint = Constraint::kShardMapIn;
  t.partition_spec = spec;
  RecordOp({OpKind::kShardMapIn,
            "",
            {{"spec", spec.ToString()}, {"global_shape", ShapeToString(x.shape())}}},
           {x.tensor}, {v.tensor});
  if (tape_) RecordShardMapInVjp(x, v, spec);
  return v;
}

Array Tracer::Assemble(const Value& x, const PartitionSpec& spec_in) const {
  if (!x.per_device) return x.array();
  // P() on a ranked output means replicated in every dim.
  PartitionSpec spec = spec_in;
  if (spec.rank() < x.shape().size()) {
    std::vector<PartitionSpec::Entry> entries = spec.entries();
    entries.resize(x.shape().size());
    spec = PartitionSpec(entries);
  }
  Shape global = x.shape();
  for (size_t d = 0; d < global.size(); ++d) global[d] *= mesh_.Size(spec[d]);
  if (!numeric_) return Array::Symbolic(global, x.dtype());
  Array out = Array::Filled(global, x.dtype(), 0.0f);
  // The block at each position comes from the first device holding it: the one whose
  // coordinates on axes outside the spec are all zero.
  const std::vector<std::string> used = spec.UsedAxes();
  for (int64_t dev = 0; dev < mesh_.num_devices(); ++dev) {
    const std::vector<int64_t> coords = mesh_.Coords(dev);
    bool representative = true;
    for (size_t i = 0; i < mesh_.axes().size(); ++i)
      if (coords[i] != 0 && std::find(used.begin(), used.end(), mesh_.axes()[i].name) == used.end())
        representative = false;
    if (representative) PasteBox(out, x.shards[dev], BlockBounds(global, spec, mesh_, dev));
  }
  return out;
}

Value Tracer::ShardMapOut(const Value& x, const std::string& name, const std::string& dims,
                          const PartitionSpec& spec) {
  SHARDTRACE_CHECK(x.per_device);
  Value v{-1, {Assemble(x, spec)}, false};
  v.tensor = Record({name, dims, trace_.tensors[x.tensor].kind}, v.shards, false);
  TensorRecord& t = trace_.tensors[v.tensor];
  t.constraint = Constraint::kShardMapOut;
  t.partition_spec = spec;
  RecordOp({OpKind::kShardMapOut, "", {{"spec", spec.ToString()}}}, {x.tensor}, {v.tensor});
  if (tape_) RecordShardMapOutVjp(x, v, spec);
  return v;
}

void Tracer::AddFact(Fact fact) {
  if (fact.scope.empty()) fact.scope = CurrentScope();
  trace_.facts.push_back(std::move(fact));
}

Trace Tracer::Finish() && { return std::move(trace_); }

}  // namespace shardtrace
