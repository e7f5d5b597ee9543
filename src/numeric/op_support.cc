#include "numeric/op_support.h"

#include <cmath>
#include <limits>

#include "util/error.h"

namespace shardtrace::op_support {

bool AllNumeric(std::initializer_list<const Array*> arrays) {
  for (const Array* array : arrays) {
    if (!array->numeric()) return false;
  }
  return true;
}

int64_t NormalizeAxis(std::string_view op, int64_t axis, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank) {
    Fail("{}: axis {} is out of range for shape {}", op, axis, ShapeToString(shape));
  }
  return normalized;
}

float ConvertTo(DType dtype, float value) {
  if (dtype != DType::kInt32) return RoundTo(dtype, value);
  // jax's float->int32 conversion truncates and saturates; NaN becomes 0.
  if (std::isnan(value)) return 0.0f;
  constexpr float kMax = 2147483520.0f;  // largest float32 below 2^31
  return std::trunc(std::fmin(std::fmax(value, -2147483648.0f), kMax));
}

void ConvertAll(DType dtype, std::vector<float>& values) {
  if (dtype == DType::kFloat32) return;
  for (float& v : values) v = ConvertTo(dtype, v);
}

Shape BroadcastShapes(std::string_view op, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Right-aligned: position i of the output is a[i - (rank - a.size())] if present.
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      Fail("{}: shapes {} and {} do not broadcast: dim {} is {} vs {}", op, ShapeToString(a),
           ShapeToString(b), static_cast<int64_t>(i) - static_cast<int64_t>(rank), da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  SHARDTRACE_CHECK(in.size() <= out.size());
  const std::vector<int64_t> in_strides = Strides(in);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    strides[lead + i] = in[i] == 1 ? 0 : in_strides[i];
  }
  return strides;
}

void CheckPermutation(std::string_view op, const std::vector<int64_t>& perm, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (static_cast<int64_t>(perm.size()) != rank) {
    Fail("{}: permutation has {} entries but shape {} has rank {}", op, perm.size(),
         ShapeToString(shape), rank);
  }
  std::vector<bool> seen(perm.size(), false);
  for (const int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      Fail("{}: permutation {} of shape {} is not a permutation of 0..{}", op, ShapeToString(perm),
           ShapeToString(shape), rank - 1);
    }
    seen[p] = true;
  }
}

Shape PermuteShape(const Shape& shape, const std::vector<int64_t>& perm) {
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = shape[perm[i]];
  return out;
}

bool IsIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::vector<float> PermuteData(const std::vector<float>& data, const Shape& shape,
                               const std::vector<int64_t>& perm) {
  if (IsIdentity(perm)) return data;
  const Shape out_shape = PermuteShape(shape, perm);
  const std::vector<int64_t> in_strides = Strides(shape);
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
  std::vector<float> out(data.size());
  ForEachBroadcast<1>(out_shape, {strides},
                      [&](int64_t i, const std::array<int64_t, 1>& off) { out[i] = data[off[0]]; });
  return out;
}

GroupedRuns MoveAxesLast(const std::vector<float>& data, const Shape& shape,
                         const std::vector<int64_t>& axes) {
  std::vector<bool> moved(shape.size(), false);
  for (const int64_t axis : axes) moved[axis] = true;
  GroupedRuns result;
  std::vector<int64_t> perm;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!moved[d]) {
      perm.push_back(static_cast<int64_t>(d));
      result.rows *= shape[d];
    }
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (moved[d]) {
      perm.push_back(static_cast<int64_t>(d));
      result.run *= shape[d];
    }
  }
  result.data = PermuteData(data, shape, perm);
  return result;
}

std::vector<float> SumOverAxes(const std::vector<float>& data, const Shape& shape,
                               const std::vector<int64_t>& axes) {
  const GroupedRuns grouped = MoveAxesLast(data, shape, axes);
  std::vector<float> out(static_cast<size_t>(grouped.rows), 0.0f);
  for (int64_t r = 0; r < grouped.rows; ++r) {
    float acc = 0.0f;
    const float* row = grouped.data.data() + r * grouped.run;
    for (int64_t i = 0; i < grouped.run; ++i) acc += row[i];
    out[r] = acc;
  }
  return out;
}

AxisView ViewAroundAxis(const Shape& shape, int64_t axis) {
  AxisView view;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) view.outer *= shape[d];
    if (d == axis) view.n = shape[d];
    if (d > axis) view.inner *= shape[d];
  }
  return view;
}

}  // namespace shardtrace::op_support
