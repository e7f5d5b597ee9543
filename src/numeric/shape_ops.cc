#include "numeric/shape_ops.h"

#include <utility>

#include "numeric/elementwise.h"
#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

Array Reshape(const Array& a, const Shape& new_shape) {
  Shape shape = new_shape;
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) {
        Fail("reshape: {} to {}: more than one -1", ShapeToString(a.shape),
             ShapeToString(new_shape));
      }
      inferred = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      Fail("reshape: {} to {}: negative dim {}", ShapeToString(a.shape), ShapeToString(new_shape),
           shape[i]);
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || a.size() % known != 0) {
      Fail("reshape: {} ({} elements) to {}: cannot infer the -1 dim", ShapeToString(a.shape),
           a.size(), ShapeToString(new_shape));
    }
    shape[inferred] = a.size() / known;
  }
  if (NumElements(shape) != a.size()) {
    Fail("reshape: {} ({} elements) to {} ({} elements): sizes differ", ShapeToString(a.shape),
         a.size(), ShapeToString(shape), NumElements(shape));
  }
  return a.WithShape(std::move(shape));  // shares the buffer
}

Array Transpose(const Array& a, const std::vector<int64_t>& perm) {
  op_support::CheckPermutation("transpose", perm, a.shape);
  Shape shape = op_support::PermuteShape(a.shape, perm);
  if (!a.numeric()) return Array::Symbolic(std::move(shape), a.dtype);
  if (op_support::IsIdentity(perm)) return a;
  return Array::FromData(std::move(shape), a.dtype,
                         op_support::PermuteData(a.values(), a.shape, perm));
}

Array Slice(const Array& a, int64_t axis, int64_t start, int64_t size) {
  const int64_t ax = op_support::NormalizeAxis("slice", axis, a.shape);
  if (start < 0 || size < 0 || start + size > a.shape[ax]) {
    Fail("slice: [{}, {}) of axis {} is outside shape {} (dim is {})", start, start + size, axis,
         ShapeToString(a.shape), a.shape[ax]);
  }
  Shape shape = a.shape;
  shape[ax] = size;
  if (!a.numeric()) return Array::Symbolic(std::move(shape), a.dtype);
  if (size == a.shape[ax]) return a;  // the whole array: share it
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  const std::vector<float>& x = a.values();
  std::vector<float> out;
  out.reserve(static_cast<size_t>(NumElements(shape)));
  for (int64_t o = 0; o < view.outer; ++o) {
    const auto first = x.begin() + (o * view.n + start) * view.inner;
    out.insert(out.end(), first, first + size * view.inner);
  }
  return Array::FromData(std::move(shape), a.dtype, std::move(out));
}

Array Concat(const std::vector<Array>& arrays, int64_t axis) {
  if (arrays.empty()) Fail("concatenate: no arrays given");
  const Array& first = arrays.front();
  const int64_t ax = op_support::NormalizeAxis("concatenate", axis, first.shape);
  Shape shape = first.shape;
  shape[ax] = 0;
  bool numeric = true;
  DType dtype = first.dtype;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const Array& array = arrays[i];
    bool compatible = array.rank() == first.rank();
    for (int64_t d = 0; compatible && d < first.rank(); ++d) {
      compatible = d == ax || array.shape[d] == first.shape[d];
    }
    if (!compatible) {
      Fail("concatenate: array {} has shape {} but array 0 has {} (axis {})", i,
           ShapeToString(array.shape), ShapeToString(first.shape), axis);
    }
    dtype = PromoteTypes(dtype, array.dtype);
    shape[ax] += array.shape[ax];
    numeric = numeric && array.numeric();
  }
  if (!numeric) return Array::Symbolic(std::move(shape), dtype);
  if (arrays.size() == 1 && dtype == first.dtype) return first;
  const op_support::AxisView view = op_support::ViewAroundAxis(first.shape, ax);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(NumElements(shape)));
  for (int64_t o = 0; o < view.outer; ++o) {
    for (const Array& array : arrays) {
      const int64_t run = array.shape[ax] * view.inner;
      const auto begin = array.values().begin() + o * run;
      out.insert(out.end(), begin, begin + run);
    }
  }
  op_support::ConvertAll(dtype, out);
  return Array::FromData(std::move(shape), dtype, std::move(out));
}

Array Pad(const Array& a, int64_t axis, int64_t before, int64_t after, float value) {
  const int64_t ax = op_support::NormalizeAxis("pad", axis, a.shape);
  if (before < 0 || after < 0) {
    Fail("pad: padding ({}, {}) of axis {} of shape {} must be >= 0", before, after, axis,
         ShapeToString(a.shape));
  }
  Shape shape = a.shape;
  shape[ax] += before + after;
  if (!a.numeric()) return Array::Symbolic(std::move(shape), a.dtype);
  if (before == 0 && after == 0) return a;
  const float fill = op_support::ConvertTo(a.dtype, value);
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(NumElements(shape)));
  for (int64_t o = 0; o < view.outer; ++o) {
    out.insert(out.end(), static_cast<size_t>(before * view.inner), fill);
    const auto begin = a.values().begin() + o * view.n * view.inner;
    out.insert(out.end(), begin, begin + view.n * view.inner);
    out.insert(out.end(), static_cast<size_t>(after * view.inner), fill);
  }
  return Array::FromData(std::move(shape), a.dtype, std::move(out));
}

Array BroadcastTo(const Array& a, const Shape& shape) {
  if (op_support::BroadcastShapes("broadcast_to", a.shape, shape) != shape) {
    Fail("broadcast_to: cannot broadcast shape {} to {}", ShapeToString(a.shape),
         ShapeToString(shape));
  }
  if (!a.numeric()) return Array::Symbolic(shape, a.dtype);
  if (a.shape == shape) return a;
  std::vector<float> out(static_cast<size_t>(NumElements(shape)));
  const std::vector<float>& x = a.values();
  op_support::ForEachBroadcast<1>(
      shape, {op_support::BroadcastStrides(a.shape, shape)},
      [&](int64_t i, const std::array<int64_t, 1>& off) { out[i] = x[off[0]]; });
  return Array::FromData(shape, a.dtype, std::move(out));
}

}  // namespace shardtrace
