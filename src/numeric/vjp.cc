#include "numeric/vjp.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "numeric/activations.h"
#include "numeric/creation.h"
#include "numeric/elementwise.h"
#include "numeric/op_support.h"
#include "numeric/reduce.h"
#include "numeric/shape_ops.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// float32 positions are exact integers up to 2^24.
constexpr int64_t kMaxIotaElements = int64_t{1} << 24;

Array Float32(const Array& a) { return a.dtype == DType::kFloat32 ? a : Cast(a, DType::kFloat32); }

// Elementwise g * d where d is computed per element of x (float32), rounded to x's dtype.
template <typename Derivative>
Array ScaleByDerivative(const Array& x, const Array& g, Derivative derivative) {
  SHARDTRACE_CHECK(x.shape == g.shape);
  const DType out = IsFloating(x.dtype) ? x.dtype : DType::kFloat32;
  const std::vector<float>& xv = x.values();
  const std::vector<float>& gv = g.values();
  std::vector<float> result(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) result[i] = gv[i] * derivative(xv[i]);
  op_support::ConvertAll(out, result);
  return Array::FromData(x.shape, out, std::move(result));
}

float SigmoidOf(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float SoftplusOf(float x) { return std::fmax(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))); }

// f'(x) of the activations numeric/activations.h applies, as jax differentiates them.
float ActivationDerivative(std::string_view name, float x) {
  if (name == "linear") return 1.0f;
  if (name == "silu" || name == "swish") {
    const float s = SigmoidOf(x);
    return s * (1.0f + x * (1.0f - s));
  }
  if (name == "sigmoid") {
    const float s = SigmoidOf(x);
    return s * (1.0f - s);
  }
  // jax.nn.relu's derivative at 0 is 0 (its custom_jvp).
  if (name == "relu") return x > 0.0f ? 1.0f : 0.0f;
  if (name == "gelu") {
    const float c = 0.7978845608028654f;
    const float inner = c * (x + 0.044715f * x * x * x);
    const float t = std::tanh(inner);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
  }
  if (name == "tanh") {
    const float t = std::tanh(x);
    return 1.0f - t * t;
  }
  if (name == "softplus") return SigmoidOf(x);
  if (name == "sqrtsoftplus") {
    const float sp = SoftplusOf(x);
    return sp > 0.0f ? SigmoidOf(x) / (2.0f * std::sqrt(sp)) : 0.0f;
  }
  if (name == "elu" || name == "celu") return x > 0.0f ? 1.0f : std::exp(x);
  if (name == "leaky_relu") return x >= 0.0f ? 1.0f : 0.01f;
  if (name == "relu6") return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
  if (name == "hard_sigmoid") return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
  if (name == "log_sigmoid") return SigmoidOf(-x);
  if (name == "soft_sign") {
    const float d = std::fabs(x) + 1.0f;
    return 1.0f / (d * d);
  }
  if (name == "selu") {
    const float alpha = 1.6732632423543772f;
    const float scale = 1.0507009873554805f;
    return scale * (x > 0.0f ? 1.0f : alpha * std::exp(x));
  }
  Fail("no derivative for activation '{}'", name);
}

// g (whose letters are `from`) arranged as `to` with `shape`: dims of `to` that `from` lacks
// are broadcast. `from` must be a subset of `to`.
Array ExpandLetters(const Array& g, const std::string& from, const std::string& to,
                    const Shape& shape) {
  std::vector<int64_t> perm;
  Shape with_ones;
  for (size_t i = 0; i < to.size(); ++i) {
    const size_t at = from.find(to[i]);
    if (at != std::string::npos) {
      perm.push_back(static_cast<int64_t>(at));
      with_ones.push_back(shape[i]);
    } else {
      with_ones.push_back(1);
    }
  }
  SHARDTRACE_CHECK(perm.size() == from.size());
  const Array ordered = op_support::IsIdentity(perm) ? g : Transpose(g, perm);
  return BroadcastTo(Reshape(ordered, with_ones), shape);
}

// The cotangent of operand `x` (letters `lx`) of a two-operand einsum with the other operand
// `y` (letters `ly`) and output letters `lo`.
Array EinsumOperandVjp(const Array& x, const std::string& lx, const Array& y, const std::string& ly,
                       const std::string& lo, const Array& g) {
  std::string reachable;  // x's letters the product of g and y still has
  for (const char c : lx)
    if (lo.find(c) != std::string::npos || ly.find(c) != std::string::npos) reachable += c;
  const Array product =
      Einsum(ParseEinsum(lo + "," + ly + "->" + reachable), g, y, DType::kFloat32);
  Array full = reachable == lx ? product : ExpandLetters(product, reachable, lx, x.shape);
  return Cast(full, x.dtype);
}

}  // namespace

Array Iota(const Shape& shape) {
  const int64_t n = NumElements(shape);
  if (n > kMaxIotaElements)
    Fail("gradients: an operand of {} elements is too large to differentiate (at most 2^24)", n);
  std::vector<float> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<float>(i);
  return Array::FromData(shape, DType::kFloat32, std::move(positions));
}

Array ScatterAddByPosition(const Array& positions, const Array& g, const Shape& shape,
                           DType dtype) {
  SHARDTRACE_CHECK(positions.shape == g.shape);
  std::vector<float> sum(static_cast<size_t>(NumElements(shape)), 0.0f);
  const std::vector<float>& p = positions.values();
  const std::vector<float>& gv = g.values();
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] >= 0.0f) sum[static_cast<size_t>(p[i])] += gv[i];
  op_support::ConvertAll(dtype, sum);
  return Array::FromData(shape, dtype, std::move(sum));
}

Array SelectionVjp(const std::function<Array(const Array&)>& select, const Shape& shape,
                   DType dtype, const Array& g) {
  return ScatterAddByPosition(select(Iota(shape)), g, shape, dtype);
}

Array SumToShape(const Array& g, const Shape& shape, DType dtype) {
  if (g.shape == shape) return g.dtype == dtype ? g : Cast(g, dtype);
  const size_t lead = g.shape.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < g.shape.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape[d] != 1))
      axes.push_back(static_cast<int64_t>(d));
  const Array summed = Sum(Float32(g), axes, false);
  return Cast(Reshape(summed, shape), dtype);
}

std::pair<Array, Array> AddVjp(const Array& a, const Array& b, const Array& g) {
  return {SumToShape(g, a.shape, a.dtype), SumToShape(g, b.shape, b.dtype)};
}

std::pair<Array, Array> SubVjp(const Array& a, const Array& b, const Array& g) {
  return {SumToShape(g, a.shape, a.dtype), SumToShape(Neg(Float32(g)), b.shape, b.dtype)};
}

std::pair<Array, Array> MulVjp(const Array& a, const Array& b, const Array& g) {
  const Array g32 = Float32(g);
  return {SumToShape(Mul(g32, Float32(b)), a.shape, a.dtype),
          SumToShape(Mul(g32, Float32(a)), b.shape, b.dtype)};
}

std::pair<Array, Array> DivVjp(const Array& a, const Array& b, const Array& g) {
  const Array g32 = Float32(g), b32 = Float32(b);
  const Array ga = Div(g32, b32);
  // d(a/b)/db = -a/b^2 = -(a/b)/b.
  const Array gb = Neg(Div(Mul(ga, Float32(a)), b32));
  return {SumToShape(ga, a.shape, a.dtype), SumToShape(gb, b.shape, b.dtype)};
}

std::pair<Array, Array> WhereVjp(const Array& cond, const Array& a, const Array& b,
                                 const Array& g) {
  const Array zero = Scalar(0.0f, DType::kFloat32);
  const Array g32 = Float32(g);
  return {SumToShape(Where(cond, g32, zero), a.shape, a.dtype),
          SumToShape(Where(cond, zero, g32), b.shape, b.dtype)};
}

Array ClipVjp(const Array& x, std::optional<float> lo, std::optional<float> hi, const Array& g) {
  const float low = lo ? RoundTo(x.dtype, *lo) : -INFINITY;
  const float high = hi ? RoundTo(x.dtype, *hi) : INFINITY;
  return ScaleByDerivative(x, g, [&](float v) {
    // maximum(lo, x) then minimum(hi, .): each passes g where x wins, half at a tie.
    const float through_max = !lo ? 1.0f : v > low ? 1.0f : v == low ? 0.5f : 0.0f;
    const float after_max = std::fmax(v, low);
    const float through_min = !hi                 ? 1.0f
                              : after_max < high  ? 1.0f
                              : after_max == high ? 0.5f
                                                  : 0.0f;
    return through_max * through_min;
  });
}

Array CastVjp(const Array& x, const Array& g) {
  SHARDTRACE_CHECK(IsFloating(x.dtype));
  return g.dtype == x.dtype ? g : Cast(g, x.dtype);
}

Array ActivationVjp(std::string_view name, const Array& x, const Array& g) {
  const std::string fn(name);
  return ScaleByDerivative(x, g, [&](float v) { return ActivationDerivative(fn, v); });
}

Array SoftmaxVjp(const Array& y, const Array& g, int64_t axis) {
  const Array y32 = Float32(y), g32 = Float32(g);
  const Array dot = Sum(Mul(g32, y32), axis, true);
  return Cast(Mul(y32, Sub(g32, dot)), y.dtype);
}

Array SumVjp(const Array& x, const std::vector<int64_t>& axes, bool keepdims, const Array& g) {
  Shape kept = x.shape;
  for (const int64_t axis : axes) kept[op_support::NormalizeAxis("sum", axis, x.shape)] = 1;
  const Array expanded = keepdims ? g : Reshape(g, kept);
  return Cast(BroadcastTo(expanded, x.shape), IsFloating(x.dtype) ? x.dtype : DType::kFloat32);
}

Array MeanVjp(const Array& x, const std::vector<int64_t>& axes, bool keepdims, const Array& g) {
  int64_t count = 1;
  for (const int64_t axis : axes)
    count *= x.shape[op_support::NormalizeAxis("mean", axis, x.shape)];
  const Array scaled = Div(Float32(g), Scalar(static_cast<float>(count), DType::kFloat32));
  return SumVjp(x, axes, keepdims, scaled);
}

std::pair<Array, Array> EinsumVjp(const ParsedEinsum& parsed, const Array& a, const Array& b,
                                  const Array& g) {
  const std::string& la = parsed.operands[0];
  const std::string& lb = parsed.operands[1];
  return {EinsumOperandVjp(a, la, b, lb, parsed.output, g),
          EinsumOperandVjp(b, lb, a, la, parsed.output, g)};
}

Array EinsumVjp(const ParsedEinsum& parsed, const Array& a, const Array& g) {
  return Cast(ExpandLetters(g, parsed.output, parsed.operands[0], a.shape), a.dtype);
}

std::pair<Array, Array> RaggedDotVjp(const Array& lhs, const Array& rhs, const Array& group_sizes,
                                     const Array& g) {
  const int64_t n = lhs.shape[0], k = lhs.shape[1], groups = rhs.shape[0], o = rhs.shape[2];
  std::vector<float> dlhs(static_cast<size_t>(n * k), 0.0f);
  std::vector<float> drhs(static_cast<size_t>(groups * k * o), 0.0f);
  const Array g32 = Float32(g), lhs32 = Float32(lhs), rhs32 = Float32(rhs);
  int64_t row = 0;
  for (int64_t e = 0; e < groups; ++e) {
    const int64_t rows =
        std::max<int64_t>(std::min(static_cast<int64_t>(group_sizes.values()[e]), n - row), 0);
    if (rows > 0) {
      const Array g_rows = Slice(g32, 0, row, rows);
      const Array x_rows = Slice(lhs32, 0, row, rows);
      const Array w = Reshape(Slice(rhs32, 0, e, 1), {k, o});
      const Array dx = Einsum("NO,KO->NK", g_rows, w, DType::kFloat32);
      const Array dw = Einsum("NK,NO->KO", x_rows, g_rows, DType::kFloat32);
      std::copy(dx.values().begin(), dx.values().end(), dlhs.begin() + row * k);
      std::copy(dw.values().begin(), dw.values().end(), drhs.begin() + e * k * o);
    }
    row += rows;
  }
  op_support::ConvertAll(lhs.dtype, dlhs);
  op_support::ConvertAll(rhs.dtype, drhs);
  return {Array::FromData(lhs.shape, lhs.dtype, std::move(dlhs)),
          Array::FromData(rhs.shape, rhs.dtype, std::move(drhs))};
}

}  // namespace shardtrace
