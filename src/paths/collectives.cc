// The collectives of the SPMD simulator (Tracer members). Each moves real data between the
// virtual devices in numeric mode and records the bytes every device sends and receives,
// counted as the ring algorithms XLA uses move them: all_gather (n-1) blocks each way,
// psum_scatter (n-1)/n of the input, psum twice that; ragged_all_to_all the rows actually
// sent to other devices (symbolic: a balanced-routing estimate).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "paths/tracer.h"
#include "shard/sharding.h"
#include "util/error.h"

namespace shardtrace {
namespace {

std::string AxesToString(const std::vector<std::string>& axes) {
  if (axes.size() == 1) return fmt::format("'{}'", axes[0]);
  std::vector<std::string> quoted;
  for (const std::string& a : axes) quoted.push_back(fmt::format("'{}'", a));
  return fmt::format("({})", fmt::join(quoted, ", "));
}

Array Concat(const std::vector<const Array*>& parts, int axis) {
  Shape shape = parts[0]->shape;
  shape[axis] = 0;
  for (const Array* p : parts) shape[axis] += p->shape[axis];
  if (!parts[0]->numeric()) return Array::Symbolic(shape, parts[0]->dtype);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<float> data;
  data.reserve(NumElements(shape));
  for (int64_t o = 0; o < outer; ++o)
    for (const Array* p : parts) {
      const int64_t run = p->shape[axis] * inner;
      data.insert(data.end(), p->values().begin() + o * run, p->values().begin() + (o + 1) * run);
    }
  return Array::FromData(shape, parts[0]->dtype, std::move(data));
}

Array SliceAxis(const Array& a, int axis, int64_t start, int64_t size) {
  Shape shape = a.shape;
  shape[axis] = size;
  if (!a.numeric()) return Array::Symbolic(shape, a.dtype);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= a.shape[i];
  for (size_t i = axis + 1; i < a.shape.size(); ++i) inner *= a.shape[i];
  std::vector<float> data;
  data.reserve(NumElements(shape));
  for (int64_t o = 0; o < outer; ++o) {
    const auto base = a.values().begin() + (o * a.shape[axis] + start) * inner;
    data.insert(data.end(), base, base + size * inner);
  }
  return Array::FromData(shape, a.dtype, std::move(data));
}

// The cotangent device `d` holds, zeros where none reached it.
Array CotangentOf(const Shards& g, int64_t d, const Shape& shape, DType dtype) {
  const Array& ct = g[static_cast<size_t>(d)];
  return ct.numeric() ? ct : Array::Filled(shape, dtype, 0.0f);
}

// The element-wise sum of `parts` (float32, in group order), rounded once to `dtype`.
Array SumOf(const std::vector<Array>& parts, const Shape& shape, DType dtype) {
  std::vector<float> sum(static_cast<size_t>(NumElements(shape)), 0.0f);
  for (const Array& part : parts) {
    SHARDTRACE_CHECK(part.shape == shape && part.numeric());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part.values()[i];
  }
  for (float& value : sum) value = RoundTo(dtype, value);
  return Array::FromData(shape, dtype, std::move(sum));
}

// The element-wise sum of `x` over the devices of `device`'s group along `axes`, rounded
// to x's dtype once (XLA reduces in the wider type and rounds the result).
Array GroupSum(const Value& x, const Mesh& mesh, int64_t device,
               const std::vector<std::string>& axes) {
  std::vector<double> sum(static_cast<size_t>(x.array().size()), 0.0);
  for (const int64_t peer : mesh.Group(device, axes)) {
    const std::vector<float>& src = x.shards[peer].values();
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += src[i];
  }
  std::vector<float> out(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) out[i] = RoundTo(x.dtype(), static_cast<float>(sum[i]));
  return Array::FromData(x.shape(), x.dtype(), std::move(out));
}

}  // namespace

int Tracer::RecordCollective(CollectiveKind kind,
                             std::vector<std::pair<std::string, std::string>> attrs,
                             const std::vector<int>& inputs, int output,
                             const std::vector<std::string>& axes, std::vector<int64_t> sent,
                             std::vector<int64_t> received) {
  const int64_t n = mesh_.Size(axes);
  attrs.insert(attrs.begin(), {"axis_name", AxesToString(axes)});
  const int id = RecordOp({ToOpKind(kind), "", std::move(attrs)}, inputs, {output});
  trace_.ops[id].collective = CollectiveRecord{kind,
                                               CollectiveOrigin::kWritten,
                                               axes,
                                               n,
                                               mesh_.num_devices() / n,
                                               std::move(sent),
                                               std::move(received)};
  return id;
}

Value Tracer::AxisIndex(const std::vector<std::string>& axes, const Out& out) {
  Value v;
  v.per_device = true;
  for (int64_t d = 0; d < num_shards(); ++d)
    v.shards.push_back(numeric_ ? Array::FromData({}, DType::kInt32,
                                                  {static_cast<float>(mesh_.AxisIndex(d, axes))})
                                : Array::Symbolic({}, DType::kInt32));
  v.tensor = Record(out, v.shards, true);
  RecordOp({OpKind::kAxisIndex, "", {{"axis_name", AxesToString(axes)}}}, {}, {v.tensor});
  return v;
}

Value Tracer::AllGather(const Value& x, const std::vector<std::string>& axes, int axis, bool tiled,
                        const Out& out) {
  SHARDTRACE_CHECK(x.per_device);
  const int64_t n = mesh_.Size(axes);
  if (axis < 0) axis += static_cast<int>(x.shape().size());
  Value v;
  v.per_device = true;
  for (size_t d = 0; d < x.shards.size(); ++d) {
    std::vector<const Array*> parts;
    if (numeric_) {
      for (const int64_t peer : mesh_.Group(static_cast<int64_t>(d), axes))
        parts.push_back(&x.shards[peer]);
    } else {
      parts.assign(static_cast<size_t>(n), &x.shards[0]);
    }
    Array gathered = Concat(parts, axis);
    if (!tiled) {
      Shape shape = x.shape();
      shape.insert(shape.begin() + axis, n);
      gathered.shape = shape;  // same row-major data, a new leading group dim at `axis`
    }
    v.shards.push_back(std::move(gathered));
  }
  v.tensor = Record(out, v.shards, true);
  const std::vector<int64_t> moved(mesh_.num_devices(),
                                   (n - 1) * TensorBytes(x.shape(), x.dtype()));
  RecordCollective(CollectiveKind::kAllGather,
                   {{"axis", std::to_string(axis)}, {"tiled", tiled ? "True" : "False"}},
                   {x.tensor}, v.tensor, axes, moved, moved);
  if (tape_) {
    // Transpose: psum_scatter. Device d's block of every group member's cotangent, summed.
    const Shape block = x.shape(), gathered = v.shape();
    const DType dtype = x.dtype();
    const Mesh& mesh = mesh_;
    RecordRule(
        {&x}, v,
        [block, gathered, dtype, axes, axis, tiled, &mesh](const std::vector<Shards>& g) {
          Shards cts;
          for (size_t d = 0; d < g[0].size(); ++d) {
            const int64_t index = mesh.AxisIndex(static_cast<int64_t>(d), axes);
            std::vector<Array> parts;
            for (const int64_t peer : mesh.Group(static_cast<int64_t>(d), axes)) {
              const Array ct = CotangentOf(g[0], peer, gathered, dtype);
              parts.push_back(tiled ? SliceAxis(ct, axis, index * block[axis], block[axis])
                                    : SliceAxis(ct, axis, index, 1).WithShape(block));
            }
            cts.push_back(SumOf(parts, block, dtype));
          }
          return std::vector<Shards>{std::move(cts)};
        },
        "all_gather");
  }
  return v;
}

Value Tracer::Psum(const Value& x, const std::vector<std::string>& axes, const Out& out) {
  SHARDTRACE_CHECK(x.per_device);
  const int64_t n = mesh_.Size(axes);
  Value v;
  v.per_device = true;
  for (size_t d = 0; d < x.shards.size(); ++d)
    v.shards.push_back(numeric_ ? GroupSum(x, mesh_, static_cast<int64_t>(d), axes) : x.shards[d]);
  v.tensor = Record(out, v.shards, true);
  const int64_t bytes = TensorBytes(x.shape(), x.dtype());
  const std::vector<int64_t> moved(mesh_.num_devices(), n > 1 ? 2 * (n - 1) * bytes / n : 0);
  RecordCollective(CollectiveKind::kPsum, {}, {x.tensor}, v.tensor, axes, moved, moved);
  if (tape_) {
    // Transpose: psum again (JAX treats psum as psum + pbroadcast).
    const Shape shape = x.shape();
    const DType dtype = x.dtype();
    const Mesh& mesh = mesh_;
    RecordRule(
        {&x}, v,
        [shape, dtype, axes, &mesh](const std::vector<Shards>& g) {
          Shards cts;
          for (size_t d = 0; d < g[0].size(); ++d) {
            std::vector<Array> parts;
            for (const int64_t peer : mesh.Group(static_cast<int64_t>(d), axes))
              parts.push_back(CotangentOf(g[0], peer, shape, dtype));
            cts.push_back(SumOf(parts, shape, dtype));
          }
          return std::vector<Shards>{std::move(cts)};
        },
        "psum");
  }
  return v;
}

Value Tracer::PsumScatter(const Value& x, const std::vector<std::string>& axes,
                          int scatter_dimension, bool tiled, const Out& out) {
  SHARDTRACE_CHECK(x.per_device);
  const int64_t n = mesh_.Size(axes);
  if (scatter_dimension < 0) scatter_dimension += static_cast<int>(x.shape().size());
  const int64_t size = x.shape()[scatter_dimension];
  if (size % n != 0)
    Fail("psum_scatter of '{}' over {}: dim {} of size {} is not divisible by {} devices",
         trace_.tensors[x.tensor].name, AxesToString(axes), scatter_dimension, size, n);
  if (!tiled && size != n)
    Fail("psum_scatter of '{}' (tiled=False): dim {} must equal the group size {}",
         trace_.tensors[x.tensor].name, scatter_dimension, n);
  Value v;
  v.per_device = true;
  for (size_t d = 0; d < x.shards.size(); ++d) {
    const int64_t index = numeric_ ? mesh_.AxisIndex(static_cast<int64_t>(d), axes) : 0;
    const Array sum = numeric_ ? GroupSum(x, mesh_, static_cast<int64_t>(d), axes) : x.shards[d];
    Array block = SliceAxis(sum, scatter_dimension, index * (size / n), size / n);
    if (!tiled) block.shape.erase(block.shape.begin() + scatter_dimension);
    v.shards.push_back(std::move(block));
  }
  v.tensor = Record(out, v.shards, true);
  const std::vector<int64_t> moved(mesh_.num_devices(),
                                   (n - 1) * TensorBytes(x.shape(), x.dtype()) / n);
  RecordCollective(CollectiveKind::kPsumScatter,
                   {{"scatter_dimension", std::to_string(scatter_dimension)},
                    {"tiled", tiled ? "True" : "False"}},
                   {x.tensor}, v.tensor, axes, moved, moved);
  if (tape_) {
    // Transpose: all_gather of the cotangent blocks along the scattered dim.
    const Shape scattered = v.shape();
    const DType dtype = x.dtype();
    const Mesh& mesh = mesh_;
    RecordRule(
        {&x}, v,
        [scattered, dtype, axes, scatter_dimension, tiled, &mesh](const std::vector<Shards>& g) {
          Shards cts;
          for (size_t d = 0; d < g[0].size(); ++d) {
            std::vector<Array> parts;
            for (const int64_t peer : mesh.Group(static_cast<int64_t>(d), axes)) {
              Array part = CotangentOf(g[0], peer, scattered, dtype);
              if (!tiled) {
                Shape shape = part.shape;
                shape.insert(shape.begin() + scatter_dimension, 1);
                part = part.WithShape(shape);
              }
              parts.push_back(std::move(part));
            }
            std::vector<const Array*> pointers;
            for (const Array& p : parts) pointers.push_back(&p);
            cts.push_back(Concat(pointers, scatter_dimension));
          }
          return std::vector<Shards>{std::move(cts)};
        },
        "psum_scatter");
  }
  return v;
}

}  // namespace shardtrace
