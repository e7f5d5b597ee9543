// Array: the value that flows through a traced MoE path. It always carries a shape and a
// dtype; in numeric mode it also carries row-major float32 data (integers and bools are
// stored exactly as floats, which is exact below 2^24 and numeric mode is for small
// configs). In symbolic mode `data` is empty (std::nullopt) and nothing is allocated, so
// the same path code runs a full DeepSeek-V3 trace in microseconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "numeric/dtype.h"

namespace shardtrace {

using Shape = std::vector<int64_t>;

// "[4,8,16]" (jax's spelling, no spaces).
std::string ShapeToString(const Shape& shape);
int64_t NumElements(const Shape& shape);

struct Array {
  Shape shape;
  DType dtype = DType::kFloat32;
  std::optional<std::vector<float>> data;  // row-major; nullopt in symbolic mode

  bool numeric() const { return data.has_value(); }
  int64_t size() const { return NumElements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }

  // A symbolic array: shape and dtype only.
  static Array Symbolic(Shape shape, DType dtype);
  // A numeric array filled with `value`.
  static Array Filled(Shape shape, DType dtype, float value);
  // A numeric array from data; REQUIRES data.size() == NumElements(shape).
  static Array FromData(Shape shape, DType dtype, std::vector<float> data);

  const std::vector<float>& values() const;  // REQUIRES numeric()
  std::vector<float>& mutable_values();      // REQUIRES numeric()
};

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

}  // namespace shardtrace
