#include "numeric/activations.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <utility>

#include "numeric/dtype.h"
#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

namespace {

using ActivationFn = float (*)(float);

float Identity(float x) { return x; }
float SigmoidOf(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float Silu(float x) { return x * SigmoidOf(x); }
float Relu(float x) { return x > 0.0f ? x : 0.0f; }
float GeluTanh(float x) {
  // flax.linen.gelu(approximate=True): 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
  const float sqrt_2_over_pi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}
float Tanh(float x) { return std::tanh(x); }
float Softplus(float x) {
  // jax: logaddexp(x, 0), written to stay finite for large |x|.
  return std::fmax(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));
}
float Elu(float x) { return x > 0.0f ? x : std::expm1(x); }
float LeakyRelu(float x) { return x >= 0.0f ? x : 0.01f * x; }
float Relu6(float x) { return std::fmin(std::fmax(x, 0.0f), 6.0f); }
float HardSigmoid(float x) { return Relu6(x + 3.0f) / 6.0f; }
float LogSigmoid(float x) { return -Softplus(-x); }
float SoftSign(float x) { return x / (std::fabs(x) + 1.0f); }
float Selu(float x) {
  const float alpha = 1.6732632423543772f;
  const float scale = 1.0507009873554805f;
  return scale * (x > 0.0f ? x : alpha * std::expm1(x));
}
float Celu(float x) { return x > 0.0f ? x : std::expm1(x); }  // alpha = 1
// DeepSeek-V4's router score (linears._convert_to_activation_function): sqrt(softplus(x)).
float SqrtSoftplus(float x) { return std::sqrt(Softplus(x)); }

struct NamedActivation {
  std::string_view name;
  ActivationFn fn;
};

// Name -> function; also the order ActivationNames() and error messages list them in.
constexpr std::array<NamedActivation, 17> kActivations = {{
    {"linear", Identity},
    {"silu", Silu},
    {"swish", Silu},
    {"sigmoid", SigmoidOf},
    {"relu", Relu},
    {"gelu", GeluTanh},
    {"tanh", Tanh},
    {"softplus", Softplus},
    {"elu", Elu},
    {"leaky_relu", LeakyRelu},
    {"relu6", Relu6},
    {"hard_sigmoid", HardSigmoid},
    {"log_sigmoid", LogSigmoid},
    {"soft_sign", SoftSign},
    {"selu", Selu},
    {"celu", Celu},
    {"sqrtsoftplus", SqrtSoftplus},
}};

DType FloatingOr32(DType dtype) { return IsFloating(dtype) ? dtype : DType::kFloat32; }

Array ApplyElementwise(const Array& a, ActivationFn fn) {
  const DType out = FloatingOr32(a.dtype);
  if (!a.numeric()) return Array::Symbolic(a.shape, out);
  std::vector<float> result(a.values().size());
  for (size_t i = 0; i < result.size(); ++i) result[i] = RoundTo(out, fn(a.values()[i]));
  return Array::FromData(a.shape, out, std::move(result));
}

}  // namespace

std::vector<std::string> ActivationNames() {
  std::vector<std::string> names;
  for (const NamedActivation& entry : kActivations) names.emplace_back(entry.name);
  return names;
}

Array Activation(std::string_view name, const Array& a) {
  for (const NamedActivation& entry : kActivations) {
    if (entry.name == name) return ApplyElementwise(a, entry.fn);
  }
  Fail("activation '{}' on {}{} is unknown; valid names: {}", name, ToString(a.dtype),
       ShapeToString(a.shape), fmt::join(ActivationNames(), ", "));
}

Array Sigmoid(const Array& a) { return ApplyElementwise(a, SigmoidOf); }

Array Softmax(const Array& a, int64_t axis) {
  const int64_t ax = op_support::NormalizeAxis("softmax", axis, a.shape);
  const DType out = FloatingOr32(a.dtype);
  if (!a.numeric()) return Array::Symbolic(a.shape, out);
  const op_support::AxisView view = op_support::ViewAroundAxis(a.shape, ax);
  const std::vector<float>& x = a.values();
  std::vector<float> result(x.size());
  for (int64_t o = 0; o < view.outer; ++o) {
    for (int64_t in = 0; in < view.inner; ++in) {
      const int64_t base = o * view.n * view.inner + in;
      float max = -INFINITY;
      for (int64_t i = 0; i < view.n; ++i) max = std::fmax(max, x[base + i * view.inner]);
      float sum = 0.0f;
      for (int64_t i = 0; i < view.n; ++i) {
        const float e = std::exp(x[base + i * view.inner] - max);
        result[base + i * view.inner] = e;
        sum += e;
      }
      for (int64_t i = 0; i < view.n; ++i) {
        result[base + i * view.inner] = RoundTo(out, result[base + i * view.inner] / sum);
      }
    }
  }
  return Array::FromData(a.shape, out, std::move(result));
}

}  // namespace shardtrace
