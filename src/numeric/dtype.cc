#include "numeric/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "util/error.h"

namespace shardtrace {

std::string ToString(DType dtype) {
  switch (dtype) {
    case DType::kBfloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kInt32:
      return "int32";
    case DType::kBool:
      return "bool";
    case DType::kFloat8E4M3Fn:
      return "float8_e4m3fn";
  }
  return "?";
}

DType ParseDType(std::string_view text, std::string_view key) {
  // Only the names MaxText takes: the release's config validation (types.py DType) refuses
  // 'bf16', 'fp32', ... and the seed's jnp.dtype() does not know them either.
  if (text == "bfloat16") return DType::kBfloat16;
  if (text == "float16") return DType::kFloat16;
  if (text == "float32") return DType::kFloat32;
  if (text == "int32") return DType::kInt32;
  if (text == "bool") return DType::kBool;
  if (text == "float8_e4m3fn") return DType::kFloat8E4M3Fn;
  Fail("{}: unknown dtype '{}' (expected bfloat16, float16, float32 or float8_e4m3fn)", key, text);
}

int64_t ByteSize(DType dtype) {
  switch (dtype) {
    case DType::kBfloat16:
      return 2;
    case DType::kFloat16:
      return 2;
    case DType::kFloat32:
      return 4;
    case DType::kInt32:
      return 4;
    case DType::kBool:
      return 1;
    case DType::kFloat8E4M3Fn:
      return 1;
  }
  return 4;
}

bool IsFloating(DType dtype) {
  return dtype == DType::kBfloat16 || dtype == DType::kFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat8E4M3Fn;
}

namespace {

float RoundToBfloat16(float value) {
  if (std::isnan(value)) return value;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7FFFu + lsb;  // round to nearest, ties to even
  bits &= 0xFFFF0000u;
  return std::bit_cast<float>(bits);
}

float RoundToFloat16(float value) {
  if (!std::isfinite(value) || value == 0.0f) return value;
  const float max_half = 65504.0f;
  if (std::fabs(value) > max_half) return std::copysign(INFINITY, value);
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent, 0.5 <= |m| < 1
  // float16 has 11 significant bits for normals; subnormals share the 2^-24 quantum.
  const int quantum_exp = std::max(exponent - 11, -24);
  const float quantum = std::ldexp(1.0f, quantum_exp);
  return std::nearbyint(value / quantum) * quantum;
}

// 4 significant bits for normals (exponent bias 7, smallest normal 2^-6), subnormals share
// the 2^-9 quantum; the all-ones pattern above 448 is NaN, so anything rounding past 448 is.
float RoundToFloat8E4M3Fn(float value) {
  if (!std::isfinite(value)) return std::isnan(value) ? value : NAN;
  if (value == 0.0f) return value;
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent, 0.5 <= |m| < 1
  const float quantum = std::ldexp(1.0f, std::max(exponent - 4, -9));
  const float rounded = std::nearbyint(value / quantum) * quantum;
  return std::fabs(rounded) > 448.0f ? NAN : rounded;
}

}  // namespace

float RoundTo(DType dtype, float value) {
  switch (dtype) {
    case DType::kBfloat16:
      return RoundToBfloat16(value);
    case DType::kFloat16:
      return RoundToFloat16(value);
    case DType::kFloat32:
      return value;
    case DType::kInt32:
      return value;
    case DType::kBool:
      return value != 0.0f ? 1.0f : 0.0f;
    case DType::kFloat8E4M3Fn:
      return RoundToFloat8E4M3Fn(value);
  }
  return value;
}

}  // namespace shardtrace
