#include "numeric/creation.h"

#include <utility>
#include <vector>

#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

Array Scalar(float value, DType dtype) {
  return Array::FromData({}, dtype, {op_support::ConvertTo(dtype, value)});
}

Array Arange(int64_t n, DType dtype) {
  if (n < 0) Fail("arange: length {} is negative", n);
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = op_support::ConvertTo(dtype, static_cast<float>(i));
  return Array::FromData({n}, dtype, std::move(values));
}

Array FullLike(const Array& like, float value, DType dtype) {
  if (!like.numeric()) return Array::Symbolic(like.shape, dtype);
  return Array::Filled(like.shape, dtype, op_support::ConvertTo(dtype, value));
}

}  // namespace shardtrace
