// The tracer's side of gradients (Tracer members): how an op recorded through Apply, a
// sharding constraint or a shard_map boundary lands on the tape (numeric/tape.h) with a
// rule over whole per-device values. A per-device VJP runs on every simulated device (in
// parallel, like the forward op); an input the op read as one global array on every device
// (a value closed over by a shard_map body) receives the sum of the devices' cotangents, as
// JAX transposes a replicated closure. The collectives' transposes are in collectives.cc.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "numeric/creation.h"
#include "numeric/elementwise.h"
#include "numeric/op_support.h"
#include "numeric/vjp.h"
#include "paths/tracer.h"
#include "shard/blocks.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace shardtrace {
namespace {

// The element-wise float32 sum of the numeric arrays in `parts` (all of `shape`), rounded
// once to `dtype`; a non-numeric Array when none is numeric.
Array SumParts(const std::vector<Array>& parts, const Shape& shape, DType dtype) {
  std::vector<float> sum;
  for (const Array& part : parts) {
    if (!part.numeric()) continue;
    if (sum.empty()) sum.assign(part.values().size(), 0.0f);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part.values()[i];
  }
  if (sum.empty()) return Array::Symbolic(shape, dtype);
  op_support::ConvertAll(dtype, sum);
  return Array::FromData(shape, dtype, std::move(sum));
}

}  // namespace

Tracer::Vjp Tracer::IdentityVjp() {
  return [](const Args&, const Args&, const Args& g) { return std::vector<Array>{*g[0]}; };
}

void Tracer::RecordVjp(const OpDesc& op, const std::vector<const Value*>& inputs,
                       const std::vector<const Value*>& outputs, Vjp vjp) {
  if (tape_ == nullptr) return;
  std::vector<int> in_ids;
  std::vector<bool> needs;  // a cotangent is worth computing: tracked and floating
  bool any = false;
  for (const Value* in : inputs) {
    in_ids.push_back(in->tensor);
    needs.push_back(tape_->Tracks(in->tensor) && IsFloating(in->dtype()));
    any = any || needs.back();
  }
  std::vector<int> out_ids;
  std::vector<size_t> floating;  // which outputs carry cotangents
  for (size_t i = 0; i < outputs.size(); ++i)
    if (IsFloating(outputs[i]->dtype())) {
      out_ids.push_back(outputs[i]->tensor);
      floating.push_back(i);
    }
  if (!any || out_ids.empty()) return;
  std::vector<std::string> names;
  for (const Value* in : inputs) names.push_back(trace_.tensors[in->tensor].name);
  const std::string what = fmt::format(
      "{} in {} ({} -> {})", op.kind == OpKind::kActivation ? op.function : ToString(op.kind),
      CurrentScope(), fmt::join(names, ", "), trace_.tensors[out_ids.front()].name);
  if (!vjp) {
    tape_->Record(std::move(in_ids), std::move(out_ids), nullptr, what);
    return;
  }
  // The primal values the rule reads, kept alive by the tape (shared buffers: no copy).
  std::vector<Shards> in_values, out_values;
  size_t devices = 1;
  for (const Value* in : inputs) {
    in_values.push_back(in->shards);
    devices = std::max(devices, in->shards.size());
  }
  for (const Value* out : outputs) out_values.push_back(out->shards);
  ThreadPool* pool = pool_;
  Tape::Rule rule = [in_values = std::move(in_values), out_values = std::move(out_values), floating,
                     needs, devices, pool,
                     vjp = std::move(vjp)](const std::vector<Shards>& cotangents) {
    std::vector<std::vector<Array>> per_device(devices);
    ParallelFor(pool, static_cast<int64_t>(devices), [&](int64_t d) {
      Args args, outs, cts;
      for (const Shards& in : in_values) args.push_back(&in[in.size() == 1 ? 0 : d]);
      for (const Shards& out : out_values) outs.push_back(&out[out.size() == 1 ? 0 : d]);
      // Zeros for a floating output no cotangent reached on this device, so a rule always
      // reads numbers; nothing to do when none reached any.
      std::vector<Array> filled(out_values.size());
      bool reached = false;
      for (size_t k = 0; k < floating.size(); ++k) {
        const Shards& ct = cotangents[k];
        const Array& out = *outs[floating[k]];
        const Array* given = ct.empty() ? nullptr : &ct[ct.size() == 1 ? 0 : d];
        if (given != nullptr && given->numeric()) {
          filled[floating[k]] = *given;
          reached = true;
        } else {
          filled[floating[k]] = Array::Filled(out.shape, out.dtype, 0.0f);
        }
      }
      if (!reached) return;
      for (size_t i = 0; i < out_values.size(); ++i) {
        if (!filled[i].numeric()) filled[i] = Array::Symbolic(outs[i]->shape, outs[i]->dtype);
        cts.push_back(&filled[i]);
      }
      per_device[d] = vjp(args, outs, cts);
      SHARDTRACE_CHECK(per_device[d].size() == in_values.size());
    });
    std::vector<Shards> result(in_values.size());
    for (size_t i = 0; i < in_values.size(); ++i) {
      if (!needs[i]) continue;
      const Array& primal = in_values[i].front();
      std::vector<Array> parts;
      for (size_t d = 0; d < devices; ++d)
        // A rule's "none flows" (Array{}) keeps the input's shape, so later rules can fill zeros.
        parts.push_back(per_device[d].empty() || !per_device[d][i].numeric()
                            ? Array::Symbolic(primal.shape, primal.dtype)
                            : per_device[d][i]);
      if (in_values[i].size() == devices) {
        result[i] = std::move(parts);
      } else {
        // One array read by every device: its cotangent is the devices' sum.
        result[i] = {SumParts(parts, primal.shape, primal.dtype)};
      }
    }
    return result;
  };
  tape_->Record(std::move(in_ids), std::move(out_ids), std::move(rule), what);
}

void Tracer::RecordRule(const std::vector<const Value*>& inputs, const Value& output,
                        Tape::Rule rule, const std::string& what) {
  if (tape_ == nullptr || !IsFloating(output.dtype())) return;
  std::vector<int> in_ids;
  bool any = false;
  for (const Value* in : inputs) {
    in_ids.push_back(in->tensor);
    any = any || (tape_->Tracks(in->tensor) && IsFloating(in->dtype()));
  }
  if (!any) return;
  tape_->Record(std::move(in_ids), {output.tensor}, std::move(rule),
                fmt::format("{} in {}", what, CurrentScope()));
}

void Tracer::RecordShardMapInVjp(const Value& x, const Value& v, const PartitionSpec& spec) {
  const Shape global = x.shape();
  const DType dtype = x.dtype();
  const Mesh& mesh = mesh_;
  RecordRule(
      {&x}, v,
      [global, dtype, spec, &mesh](const std::vector<Shards>& g) {
        // Every device's cotangent added into the block it was handed: devices holding the
        // same block (axes the spec leaves out) add up, JAX's psum over unmentioned axes.
        const Array positions = Iota(global);
        std::vector<float> sum(static_cast<size_t>(NumElements(global)), 0.0f);
        for (size_t d = 0; d < g[0].size(); ++d) {
          if (!g[0][d].numeric()) continue;
          const Array block =
              SliceBox(positions, BlockBounds(global, spec, mesh, static_cast<int64_t>(d)));
          const std::vector<float>& ct = g[0][d].values();
          for (size_t i = 0; i < ct.size(); ++i)
            sum[static_cast<size_t>(block.values()[i])] += ct[i];
        }
        op_support::ConvertAll(dtype, sum);
        return std::vector<Shards>{{Array::FromData(global, dtype, std::move(sum))}};
      },
      "shard_map in_specs " + spec.ToString());
}

void Tracer::RecordShardMapOutVjp(const Value& x, const Value& v, const PartitionSpec& spec_in) {
  PartitionSpec spec = spec_in;
  if (spec.rank() < x.shape().size()) {
    std::vector<PartitionSpec::Entry> entries = spec.entries();
    entries.resize(x.shape().size());
    spec = PartitionSpec(entries);
  }
  int64_t replicas = mesh_.num_devices();
  for (const std::string& axis : spec.UsedAxes()) replicas /= mesh_.Size(axis);
  const Shape global = v.shape();
  const DType dtype = x.dtype();
  const int64_t devices = static_cast<int64_t>(x.shards.size());
  const Mesh& mesh = mesh_;
  RecordRule(
      {&x}, v,
      [global, dtype, spec, replicas, devices, &mesh](const std::vector<Shards>& g) {
        // Each device's block of the cotangent, divided by the devices that replicate it
        // (JAX's shard_map transpose without check_vma).
        const Array& ct = g[0][0];
        Shards blocks;
        for (int64_t d = 0; d < devices; ++d) {
          Array block = SliceBox(ct, BlockBounds(global, spec, mesh, d));
          if (replicas != 1)
            block = Cast(Div(Cast(block, DType::kFloat32),
                             Scalar(static_cast<float>(replicas), DType::kFloat32)),
                         dtype);
          blocks.push_back(std::move(block));
        }
        return std::vector<Shards>{std::move(blocks)};
      },
      "shard_map out_specs " + spec.ToString());
}

}  // namespace shardtrace
