// Array: the value that flows through a traced MoE path. It always carries a shape and a
// dtype; in numeric mode it also carries row-major float32 data (integers and bools are
// stored exactly as floats, which is exact below 2^24). In symbolic mode there is no data
// and nothing is allocated, so the same path code runs a full DeepSeek-V3 trace in
// microseconds.
//
// Storage is copy-on-write: the data lives in one immutable buffer held by shared_ptr, and
// an Array is a (shape, dtype) view of it. Copying an Array, reshaping it, a cast that
// cannot change a value (float32 -> float32, int32 -> float32, bool -> anything) and a
// slice of the whole array all share the buffer; only ops that compute new values
// allocate. mutable_values() detaches (copies) a buffer that is shared, so writing
// through one Array never changes another; Copy() makes an explicit deep copy. The
// numeric engine at real size (GiB of weights, many simulated devices) depends on this:
// recording a tensor, constraining it or passing it through a shard_map costs no bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "numeric/dtype.h"

namespace shardtrace {

using Shape = std::vector<int64_t>;

// "[4,8,16]" (jax's spelling, no spaces).
std::string ShapeToString(const Shape& shape);
int64_t NumElements(const Shape& shape);

// The immutable element storage several Arrays may share.
using Buffer = std::shared_ptr<const std::vector<float>>;

struct Array {
  Shape shape;
  DType dtype = DType::kFloat32;

  bool numeric() const { return buffer_ != nullptr; }
  int64_t size() const { return NumElements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }

  // A symbolic array: shape and dtype only.
  static Array Symbolic(Shape shape, DType dtype);
  // A numeric array filled with `value`.
  static Array Filled(Shape shape, DType dtype, float value);
  // A numeric array from data; REQUIRES data.size() == NumElements(shape).
  static Array FromData(Shape shape, DType dtype, std::vector<float> data);
  // A numeric view of an existing buffer (no copy); REQUIRES buffer->size() == NumElements.
  static Array FromBuffer(Shape shape, DType dtype, Buffer buffer);

  // The same buffer seen with another shape (same element count) or dtype; no copy. The
  // caller guarantees the values are valid for `dtype`.
  Array WithShape(Shape new_shape) const;
  Array WithDType(DType new_dtype) const;
  // A deep copy that shares nothing with this array.
  Array Copy() const;

  const std::vector<float>& values() const;  // REQUIRES numeric()
  // Writable data, detached from every other Array first if the buffer is shared.
  std::vector<float>& mutable_values();  // REQUIRES numeric()
  Buffer buffer() const { return buffer_; }
  bool SharesBufferWith(const Array& other) const {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }

 private:
  // Held as non-const so a sole owner can write in place; every other path treats it as
  // const (it converts to Buffer).
  std::shared_ptr<std::vector<float>> buffer_;
};

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

}  // namespace shardtrace
