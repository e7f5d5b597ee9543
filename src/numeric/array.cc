#include "numeric/array.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace shardtrace {

std::string ShapeToString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0) Fail("shape {}: dimension {} is negative", ShapeToString(shape), d);
    if (__builtin_mul_overflow(n, d, &n))
      Fail("shape {}: the element count does not fit a 64-bit integer", ShapeToString(shape));
  }
  return n;
}

Array Array::Symbolic(Shape shape, DType dtype) {
  Array a;
  a.shape = std::move(shape);
  a.dtype = dtype;
  return a;
}

Array Array::Filled(Shape shape, DType dtype, float value) {
  const int64_t n = NumElements(shape);
  return FromData(std::move(shape), dtype, std::vector<float>(static_cast<size_t>(n), value));
}

Array Array::FromData(Shape shape, DType dtype, std::vector<float> data) {
  SHARDTRACE_CHECK(static_cast<int64_t>(data.size()) == NumElements(shape));
  Array a = Symbolic(std::move(shape), dtype);
  a.buffer_ = std::make_shared<std::vector<float>>(std::move(data));
  return a;
}

Array Array::FromBuffer(Shape shape, DType dtype, Buffer buffer) {
  SHARDTRACE_CHECK(buffer != nullptr && static_cast<int64_t>(buffer->size()) == NumElements(shape));
  Array a = Symbolic(std::move(shape), dtype);
  // Shared buffers are never written through: mutable_values() copies when use_count > 1,
  // and the caller's Buffer keeps the count above 1 for as long as it is held.
  a.buffer_ = std::const_pointer_cast<std::vector<float>>(std::move(buffer));
  return a;
}

Array Array::WithShape(Shape new_shape) const {
  SHARDTRACE_CHECK(NumElements(new_shape) == size());
  Array a = *this;
  a.shape = std::move(new_shape);
  return a;
}

Array Array::WithDType(DType new_dtype) const {
  Array a = *this;
  a.dtype = new_dtype;
  return a;
}

Array Array::Copy() const {
  if (!numeric()) return *this;
  return FromData(shape, dtype, *buffer_);
}

const std::vector<float>& Array::values() const {
  SHARDTRACE_CHECK(buffer_ != nullptr);
  return *buffer_;
}

std::vector<float>& Array::mutable_values() {
  SHARDTRACE_CHECK(buffer_ != nullptr);
  if (buffer_.use_count() > 1) buffer_ = std::make_shared<std::vector<float>>(*buffer_);
  return *buffer_;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

}  // namespace shardtrace
