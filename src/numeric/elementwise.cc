#include "numeric/elementwise.h"

#include <cmath>
#include <string_view>
#include <utility>

#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

namespace {

using op_support::ConvertTo;

// Applies fn elementwise over the broadcast of a and b, converting each result to `out`.
template <typename Fn>
Array Binary(std::string_view op, const Array& a, const Array& b, DType out, Fn fn) {
  Shape shape = op_support::BroadcastShapes(op, a.shape, b.shape);
  if (!op_support::AllNumeric({&a, &b})) return Array::Symbolic(std::move(shape), out);
  const std::vector<float>& va = a.values();
  const std::vector<float>& vb = b.values();
  std::vector<float> result(static_cast<size_t>(NumElements(shape)));
  if (a.shape == b.shape) {
    // Same-shape fast path; same element order as the broadcast walk.
    for (size_t i = 0; i < result.size(); ++i) result[i] = ConvertTo(out, fn(va[i], vb[i]));
  } else {
    op_support::ForEachBroadcast<2>(shape,
                                    {op_support::BroadcastStrides(a.shape, shape),
                                     op_support::BroadcastStrides(b.shape, shape)},
                                    [&](int64_t i, const std::array<int64_t, 2>& off) {
                                      result[i] = ConvertTo(out, fn(va[off[0]], vb[off[1]]));
                                    });
  }
  return Array::FromData(std::move(shape), out, std::move(result));
}

template <typename Fn>
Array Unary(const Array& a, DType out, Fn fn) {
  if (!a.numeric()) return Array::Symbolic(a.shape, out);
  std::vector<float> result(a.values().size());
  for (size_t i = 0; i < result.size(); ++i) result[i] = ConvertTo(out, fn(a.values()[i]));
  return Array::FromData(a.shape, out, std::move(result));
}

DType FloatingOr32(DType dtype) { return IsFloating(dtype) ? dtype : DType::kFloat32; }

float FloorMod(float x, float y) {
  const float r = std::fmod(x, y);
  // fmod keeps the dividend's sign; Python's % takes the divisor's.
  return (r != 0.0f && ((r < 0.0f) != (y < 0.0f))) ? r + y : r;
}

}  // namespace

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  if (a == DType::kInt32) return b;
  if (b == DType::kInt32) return a;
  // Two different floats: bfloat16 and float16 meet at float32, as does anything with it.
  return DType::kFloat32;
}

Array Add(const Array& a, const Array& b) {
  return Binary("add", a, b, PromoteTypes(a.dtype, b.dtype),
                [](float x, float y) { return x + y; });
}

Array Sub(const Array& a, const Array& b) {
  return Binary("subtract", a, b, PromoteTypes(a.dtype, b.dtype),
                [](float x, float y) { return x - y; });
}

Array Mul(const Array& a, const Array& b) {
  return Binary("multiply", a, b, PromoteTypes(a.dtype, b.dtype),
                [](float x, float y) { return x * y; });
}

Array Maximum(const Array& a, const Array& b) {
  return Binary("maximum", a, b, PromoteTypes(a.dtype, b.dtype), [](float x, float y) {
    return std::isnan(x) || std::isnan(y) ? NAN : std::fmax(x, y);
  });
}

Array Minimum(const Array& a, const Array& b) {
  return Binary("minimum", a, b, PromoteTypes(a.dtype, b.dtype), [](float x, float y) {
    return std::isnan(x) || std::isnan(y) ? NAN : std::fmin(x, y);
  });
}

Array FloorDivide(const Array& a, const Array& b) {
  return Binary("floor_divide", a, b, PromoteTypes(a.dtype, b.dtype),
                [](float x, float y) { return std::floor(x / y); });
}

Array Mod(const Array& a, const Array& b) {
  return Binary("mod", a, b, PromoteTypes(a.dtype, b.dtype), FloorMod);
}

Array Div(const Array& a, const Array& b) {
  return Binary("divide", a, b, FloatingOr32(PromoteTypes(a.dtype, b.dtype)),
                [](float x, float y) { return x / y; });
}

Array Greater(const Array& a, const Array& b) {
  return Binary("greater", a, b, DType::kBool, [](float x, float y) { return x > y ? 1.f : 0.f; });
}

Array GreaterEqual(const Array& a, const Array& b) {
  return Binary("greater_equal", a, b, DType::kBool,
                [](float x, float y) { return x >= y ? 1.f : 0.f; });
}

Array Less(const Array& a, const Array& b) {
  return Binary("less", a, b, DType::kBool, [](float x, float y) { return x < y ? 1.f : 0.f; });
}

Array LessEqual(const Array& a, const Array& b) {
  return Binary("less_equal", a, b, DType::kBool,
                [](float x, float y) { return x <= y ? 1.f : 0.f; });
}

Array Equal(const Array& a, const Array& b) {
  return Binary("equal", a, b, DType::kBool, [](float x, float y) { return x == y ? 1.f : 0.f; });
}

Array NotEqual(const Array& a, const Array& b) {
  return Binary("not_equal", a, b, DType::kBool,
                [](float x, float y) { return x != y ? 1.f : 0.f; });
}

Array LogicalAnd(const Array& a, const Array& b) {
  return Binary("logical_and", a, b, DType::kBool,
                [](float x, float y) { return x != 0.f && y != 0.f ? 1.f : 0.f; });
}

Array Where(const Array& cond, const Array& a, const Array& b) {
  const DType out = PromoteTypes(a.dtype, b.dtype);
  Shape shape = op_support::BroadcastShapes("where", cond.shape,
                                            op_support::BroadcastShapes("where", a.shape, b.shape));
  if (!op_support::AllNumeric({&cond, &a, &b})) return Array::Symbolic(std::move(shape), out);
  const std::vector<float>& vc = cond.values();
  const std::vector<float>& va = a.values();
  const std::vector<float>& vb = b.values();
  std::vector<float> result(static_cast<size_t>(NumElements(shape)));
  op_support::ForEachBroadcast<3>(
      shape,
      {op_support::BroadcastStrides(cond.shape, shape),
       op_support::BroadcastStrides(a.shape, shape), op_support::BroadcastStrides(b.shape, shape)},
      [&](int64_t i, const std::array<int64_t, 3>& off) {
        result[i] = ConvertTo(out, vc[off[0]] != 0.f ? va[off[1]] : vb[off[2]]);
      });
  return Array::FromData(std::move(shape), out, std::move(result));
}

Array Neg(const Array& a) {
  return Unary(a, a.dtype, [](float x) { return -x; });
}

Array Abs(const Array& a) {
  return Unary(a, a.dtype, [](float x) { return std::fabs(x); });
}

Array Sign(const Array& a) {
  return Unary(a, a.dtype, [](float x) {
    if (std::isnan(x)) return x;
    return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f);
  });
}

Array Exp(const Array& a) {
  return Unary(a, FloatingOr32(a.dtype), [](float x) { return std::exp(x); });
}

Array Log(const Array& a) {
  return Unary(a, FloatingOr32(a.dtype), [](float x) { return std::log(x); });
}

Array Sqrt(const Array& a) {
  return Unary(a, FloatingOr32(a.dtype), [](float x) { return std::sqrt(x); });
}

Array Cast(const Array& a, DType dtype) {
  // Casts that cannot change a stored value share the buffer: to float32 (every stored
  // value already is one), from bool (0 and 1 are exact in every dtype) and int32 to
  // int32. A bfloat16/float16 array may hold values that were never rounded (npz weights
  // are loaded as stored), so a cast to its own narrow dtype still rounds, as jnp's does.
  if (dtype == DType::kFloat32 || a.dtype == DType::kBool ||
      (dtype == DType::kInt32 && a.dtype == DType::kInt32))
    return a.WithDType(dtype);
  return Unary(a, dtype, [](float x) { return x; });
}

Array Clip(const Array& a, std::optional<float> lo, std::optional<float> hi) {
  const std::optional<float> low = lo ? std::optional(ConvertTo(a.dtype, *lo)) : std::nullopt;
  const std::optional<float> high = hi ? std::optional(ConvertTo(a.dtype, *hi)) : std::nullopt;
  // jnp.clip is minimum(maximum(x, lo), hi): with lo > hi the result is hi.
  return Unary(a, a.dtype, [low, high](float x) {
    if (std::isnan(x)) return x;
    if (low && x < *low) x = *low;
    if (high && x > *high) x = *high;
    return x;
  });
}

}  // namespace shardtrace
