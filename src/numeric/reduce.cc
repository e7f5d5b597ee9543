#include "numeric/reduce.h"

#include <cmath>
#include <numeric>
#include <string_view>
#include <utility>

#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

namespace {

// Normalized, duplicate-free axes and the output shape of reducing them.
struct Reduction {
  std::vector<int64_t> axes;
  Shape shape;
  int64_t count = 1;  // elements reduced into each output
};

Reduction PlanReduction(std::string_view op, const Shape& shape, const std::vector<int64_t>& axes,
                        bool keepdims) {
  Reduction plan;
  std::vector<bool> reduced(shape.size(), false);
  for (const int64_t axis : axes) {
    const int64_t ax = op_support::NormalizeAxis(op, axis, shape);
    if (reduced[ax]) {
      Fail("{}: axis {} is repeated in axes {} for shape {}", op, axis, ShapeToString(axes),
           ShapeToString(shape));
    }
    reduced[ax] = true;
    plan.axes.push_back(ax);
    plan.count *= shape[ax];
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      plan.shape.push_back(shape[d]);
    } else if (keepdims) {
      plan.shape.push_back(1);
    }
  }
  return plan;
}

std::vector<int64_t> AllAxes(const Array& a) {
  std::vector<int64_t> axes(a.shape.size());
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

DType SumType(DType dtype) { return dtype == DType::kBool ? DType::kInt32 : dtype; }

}  // namespace

Array Sum(const Array& a, const std::vector<int64_t>& axes, bool keepdims) {
  Reduction plan = PlanReduction("sum", a.shape, axes, keepdims);
  const DType out = SumType(a.dtype);
  if (!a.numeric()) return Array::Symbolic(std::move(plan.shape), out);
  std::vector<float> result = op_support::SumOverAxes(a.values(), a.shape, plan.axes);
  op_support::ConvertAll(out, result);
  return Array::FromData(std::move(plan.shape), out, std::move(result));
}

Array Sum(const Array& a, int64_t axis, bool keepdims) {
  return Sum(a, std::vector<int64_t>{axis}, keepdims);
}

Array Sum(const Array& a) { return Sum(a, AllAxes(a), false); }

Array Mean(const Array& a, const std::vector<int64_t>& axes, bool keepdims) {
  Reduction plan = PlanReduction("mean", a.shape, axes, keepdims);
  const DType out = IsFloating(a.dtype) ? a.dtype : DType::kFloat32;
  if (!a.numeric()) return Array::Symbolic(std::move(plan.shape), out);
  std::vector<float> result = op_support::SumOverAxes(a.values(), a.shape, plan.axes);
  const float count = static_cast<float>(plan.count);
  for (float& v : result) v = op_support::ConvertTo(out, v / count);
  return Array::FromData(std::move(plan.shape), out, std::move(result));
}

Array Mean(const Array& a, int64_t axis, bool keepdims) {
  return Mean(a, std::vector<int64_t>{axis}, keepdims);
}

Array Mean(const Array& a) { return Mean(a, AllAxes(a), false); }

Array Max(const Array& a, const std::vector<int64_t>& axes, bool keepdims) {
  Reduction plan = PlanReduction("max", a.shape, axes, keepdims);
  if (plan.count == 0 && NumElements(plan.shape) > 0) {
    Fail("max: reducing axes {} of shape {} reduces an empty dim and max has no identity",
         ShapeToString(axes), ShapeToString(a.shape));
  }
  if (!a.numeric()) return Array::Symbolic(std::move(plan.shape), a.dtype);
  const op_support::GroupedRuns grouped = op_support::MoveAxesLast(a.values(), a.shape, plan.axes);
  std::vector<float> result(static_cast<size_t>(grouped.rows));
  for (int64_t r = 0; r < grouped.rows; ++r) {
    const float* row = grouped.data.data() + r * grouped.run;
    float best = row[0];
    for (int64_t i = 1; i < grouped.run; ++i) {
      if (std::isnan(row[i]) || row[i] > best) best = row[i];
      if (std::isnan(best)) break;
    }
    result[r] = best;
  }
  return Array::FromData(std::move(plan.shape), a.dtype, std::move(result));
}

Array Max(const Array& a, int64_t axis, bool keepdims) {
  return Max(a, std::vector<int64_t>{axis}, keepdims);
}

Array Max(const Array& a) { return Max(a, AllAxes(a), false); }

Array Cumsum(const Array& a, int64_t axis, std::optional<DType> dtype) {
  const int64_t ax = op_support::NormalizeAxis("cumsum", axis, a.shape);
  const DType out = dtype.value_or(SumType(a.dtype));
  if (!a.numeric()) return Array::Symbolic(a.shape, out);
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  const std::vector<float>& x = a.values();
  std::vector<float> result(x.size());
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t in = 0; in < view.inner; ++in) {
      const int64_t base = o * view.n * view.inner + in;
      float acc = 0.0f;
      for (int64_t i = 0; i < view.n; ++i) {
        acc += x[base + i * view.inner];
        result[base + i * view.inner] = op_support::ConvertTo(out, acc);
      }
    }
  }
  return Array::FromData(a.shape, out, std::move(result));
}

}  // namespace shardtrace
