#include "numeric/array.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace shardtrace {

std::string ShapeToString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

Array Array::Symbolic(Shape shape, DType dtype) {
  return Array{std::move(shape), dtype, std::nullopt};
}

Array Array::Filled(Shape shape, DType dtype, float value) {
  const int64_t n = NumElements(shape);
  return Array{std::move(shape), dtype, std::vector<float>(static_cast<size_t>(n), value)};
}

Array Array::FromData(Shape shape, DType dtype, std::vector<float> data) {
  SHARDTRACE_CHECK(static_cast<int64_t>(data.size()) == NumElements(shape));
  return Array{std::move(shape), dtype, std::move(data)};
}

const std::vector<float>& Array::values() const {
  SHARDTRACE_CHECK(data.has_value());
  return *data;
}

std::vector<float>& Array::mutable_values() {
  SHARDTRACE_CHECK(data.has_value());
  return *data;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

}  // namespace shardtrace
