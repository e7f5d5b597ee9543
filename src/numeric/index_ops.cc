#include "numeric/index_ops.h"

#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

namespace {

void RequireInt32(std::string_view op, std::string_view what, const Array& array) {
  if (array.dtype != DType::kInt32) {
    Fail("{}: {} must be int32, got {}{}", op, what, ToString(array.dtype),
         ShapeToString(array.shape));
  }
}

// A stored index as a position in [0, n): negative counts from the end (numpy), and
// anything else out of range is an error that names where it came from.
int64_t ResolveIndex(std::string_view op, float stored, int64_t position, int64_t n,
                     const Shape& shape, int64_t axis) {
  const int64_t raw = static_cast<int64_t>(stored);
  const int64_t index = raw < 0 ? raw + n : raw;
  if (index < 0 || index >= n) {
    Fail("{}: index {} (element {} of the indices) is out of range for axis {} of shape {}", op,
         raw, position, axis, ShapeToString(shape));
  }
  return index;
}

// Shared shape logic of TakeAlongAxis and PutAlongAxis: the index grid, i.e. the
// broadcast of a's and indices' non-axis dims with indices' `axis` dim.
Shape AlongAxisGrid(std::string_view op, const Array& a, const Array& indices, int64_t axis) {
  RequireInt32(op, "indices", indices);
  if (indices.rank() != a.rank()) {
    Fail("{}: indices shape {} must have the rank of array shape {}", op,
         ShapeToString(indices.shape), ShapeToString(a.shape));
  }
  Shape grid = a.shape;
  for (int64_t d = 0; d < a.rank(); ++d) {
    const int64_t da = a.shape[d];
    const int64_t di = indices.shape[d];
    if (d == axis) {
      grid[d] = di;
    } else if (da != di && da != 1 && di != 1) {
      Fail("{}: indices shape {} does not broadcast with array shape {} at dim {} ({} vs {})", op,
           ShapeToString(indices.shape), ShapeToString(a.shape), d, di, da);
    } else {
      grid[d] = da == 1 ? di : da;
    }
  }
  return grid;
}

// Strides of `a` (same rank as `grid`) for walking `grid`: a's own strides, but 0 at
// `axis` (the index supplies that offset) and where a's dim is 1 (broadcast).
std::vector<int64_t> StridesBesideAxis(const Shape& a_shape, int64_t axis) {
  std::vector<int64_t> strides = Strides(a_shape);
  for (size_t d = 0; d < a_shape.size(); ++d) {
    if (static_cast<int64_t>(d) == axis || a_shape[d] == 1) strides[d] = 0;
  }
  return strides;
}

}  // namespace

Array OneHot(const Array& indices, int64_t depth, DType dtype) {
  if (depth < 0) Fail("one_hot: num_classes {} is negative", depth);
  Shape shape = indices.shape;
  shape.push_back(depth);
  if (!indices.numeric()) return Array::Symbolic(std::move(shape), dtype);
  const float one = op_support::ConvertTo(dtype, 1.0f);
  std::vector<float> out(static_cast<size_t>(NumElements(shape)), 0.0f);
  const std::vector<float>& x = indices.values();
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    // jax compares against arange(depth), so only exact in-range integers match.
    if (v >= 0.0f && v < static_cast<float>(depth) && std::floor(v) == v) {
      out[i * depth + static_cast<int64_t>(v)] = one;
    }
  }
  return Array::FromData(std::move(shape), dtype, std::move(out));
}

Array TakeAlongAxis(const Array& a, const Array& indices, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("take_along_axis", axis, a.shape);
  Shape grid = AlongAxisGrid("take_along_axis", a, indices, ax);
  if (!op_support::AllNumeric({&a, &indices})) return Array::Symbolic(std::move(grid), a.dtype);
  const std::vector<float>& x = a.values();
  const std::vector<float>& idx = indices.values();
  const int64_t axis_stride = Strides(a.shape)[ax];
  std::vector<float> out(static_cast<size_t>(NumElements(grid)));
  op_support::ForEachBroadcast<2>(
      grid, {StridesBesideAxis(a.shape, ax), op_support::BroadcastStrides(indices.shape, grid)},
      [&](int64_t i, const std::array<int64_t, 2>& off) {
        const int64_t index =
            ResolveIndex("take_along_axis", idx[off[1]], off[1], a.shape[ax], a.shape, axis);
        out[i] = x[off[0] + index * axis_stride];
      });
  return Array::FromData(std::move(grid), a.dtype, std::move(out));
}

Array Take(const Array& a, const Array& indices, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("take", axis, a.shape);
  RequireInt32("take", "indices", indices);
  Shape shape(a.shape.begin(), a.shape.begin() + ax);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), a.shape.begin() + ax + 1, a.shape.end());
  if (!op_support::AllNumeric({&a, &indices})) return Array::Symbolic(std::move(shape), a.dtype);
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  const std::vector<float>& x = a.values();
  const std::vector<float>& idx = indices.values();
  std::vector<float> out;
  out.reserve(static_cast<size_t>(NumElements(shape)));
  for (int64_t o = 0; o < view.outer; ++o) {
    for (size_t j = 0; j < idx.size(); ++j) {
      const int64_t index =
          ResolveIndex("take", idx[j], static_cast<int64_t>(j), view.n, a.shape, axis);
      const auto begin = x.begin() + (o * view.n + index) * view.inner;
      out.insert(out.end(), begin, begin + view.inner);
    }
  }
  return Array::FromData(std::move(shape), a.dtype, std::move(out));
}

Array PutAlongAxis(const Array& a, const Array& indices, const Array& values, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("put_along_axis", axis, a.shape);
  const Shape grid = AlongAxisGrid("put_along_axis", a, indices, ax);
  for (int64_t d = 0; d < a.rank(); ++d) {
    if (d != ax && grid[d] != a.shape[d]) {
      Fail("put_along_axis: indices shape {} would write dim {} of size {} into array shape {}",
           ShapeToString(indices.shape), d, grid[d], ShapeToString(a.shape));
    }
  }
  if (op_support::BroadcastShapes("put_along_axis", values.shape, grid) != grid) {
    Fail("put_along_axis: values shape {} does not broadcast to the index grid {}",
         ShapeToString(values.shape), ShapeToString(grid));
  }
  if (!op_support::AllNumeric({&a, &indices, &values})) return Array::Symbolic(a.shape, a.dtype);
  std::vector<float> out = a.values();
  const std::vector<float>& idx = indices.values();
  const std::vector<float>& v = values.values();
  const int64_t axis_stride = Strides(a.shape)[ax];
  // Row-major over the grid, so with repeated indices the last write wins, deterministically.
  op_support::ForEachBroadcast<3>(
      grid,
      {StridesBesideAxis(a.shape, ax), op_support::BroadcastStrides(indices.shape, grid),
       op_support::BroadcastStrides(values.shape, grid)},
      [&](int64_t, const std::array<int64_t, 3>& off) {
        const int64_t index =
            ResolveIndex("put_along_axis", idx[off[1]], off[1], a.shape[ax], a.shape, axis);
        out[off[0] + index * axis_stride] = op_support::ConvertTo(a.dtype, v[off[2]]);
      });
  return Array::FromData(a.shape, a.dtype, std::move(out));
}

Array Repeat(const Array& a, int64_t repeats, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("repeat", axis, a.shape);
  if (repeats < 0)
    Fail("repeat: repeats {} is negative (shape {})", repeats, ShapeToString(a.shape));
  Shape shape = a.shape;
  shape[ax] *= repeats;
  if (!a.numeric()) return Array::Symbolic(std::move(shape), a.dtype);
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  const std::vector<float>& x = a.values();
  std::vector<float> out;
  out.reserve(static_cast<size_t>(NumElements(shape)));
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t i = 0; i < view.n; ++i) {
      const auto begin = x.begin() + (o * view.n + i) * view.inner;
      for (int64_t r = 0; r < repeats; ++r) out.insert(out.end(), begin, begin + view.inner);
    }
  }
  return Array::FromData(std::move(shape), a.dtype, std::move(out));
}

Array Repeat(const Array& a, const Array& repeats, int64_t axis, int64_t total_repeat_length) {
  const int64_t ax = op_support::NormalizeAxis("repeat", axis, a.shape);
  RequireInt32("repeat", "repeats", repeats);
  if (repeats.shape != Shape{a.shape[ax]}) {
    Fail("repeat: repeats shape {} must be [{}] for axis {} of shape {}",
         ShapeToString(repeats.shape), a.shape[ax], axis, ShapeToString(a.shape));
  }
  if (total_repeat_length < 0) {
    Fail("repeat: total_repeat_length {} is negative", total_repeat_length);
  }
  Shape shape = a.shape;
  shape[ax] = total_repeat_length;
  if (!op_support::AllNumeric({&a, &repeats})) return Array::Symbolic(std::move(shape), a.dtype);
  if (a.shape[ax] == 0) {
    Fail("repeat: axis {} of shape {} is empty; nothing to repeat to length {}", axis,
         ShapeToString(a.shape), total_repeat_length);
  }
  // jax's algorithm, reproduced so truncation and padding match it exactly: mark where each
  // element's run starts (runs starting past the end are dropped), then the running count
  // of starts minus one names the source element of each output position.
  std::vector<int64_t> starts(static_cast<size_t>(total_repeat_length), 0);
  int64_t start = 0;
  for (int64_t i = 0; i < a.shape[ax]; ++i) {
    const float count = repeats.values()[i];
    if (count < 0) Fail("repeat: repeats[{}] is {}, must be >= 0", i, count);
    if (start < total_repeat_length) ++starts[start];
    start += static_cast<int64_t>(count);
  }
  std::vector<float> gather(static_cast<size_t>(total_repeat_length));
  int64_t running = 0;
  for (int64_t j = 0; j < total_repeat_length; ++j) {
    running += starts[j];
    gather[j] = static_cast<float>(running - 1);
  }
  return Take(a, Array::FromData({total_repeat_length}, DType::kInt32, std::move(gather)), ax);
}

Array Bincount(const Array& x, int64_t length) {
  RequireInt32("bincount", "input", x);
  if (length < 0) Fail("bincount: length {} is negative", length);
  if (!x.numeric()) return Array::Symbolic({length}, DType::kInt32);
  std::vector<float> counts(static_cast<size_t>(length), 0.0f);
  for (const float v : x.values()) {
    const int64_t bin = v < 0.0f ? 0 : static_cast<int64_t>(v);
    if (bin < length) counts[bin] += 1.0f;
  }
  return Array::FromData({length}, DType::kInt32, std::move(counts));
}

}  // namespace shardtrace
