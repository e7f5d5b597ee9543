// Arrays made from nothing but a shape: the Python literals, jnp.arange, jnp.zeros_like and
// jnp.ones_like of moe.py. FullLike follows its template's mode (symbolic in, symbolic
// out) so path code can write it once for both modes; Scalar and Arange are always
// numeric because they are small and mixing them with a symbolic array yields a symbolic
// result anyway.
#pragma once

#include <cstdint>

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace {

// A rank-0 numeric array holding `value` converted to `dtype` (int32 truncates).
// Output dtype: `dtype`.
Array Scalar(float value, DType dtype);

// [0, 1, ..., n-1] (jnp.arange(n)); throws Error if n < 0. Output dtype: `dtype`.
Array Arange(int64_t n, DType dtype = DType::kInt32);

// An array of like.shape filled with `value` converted to `dtype`; symbolic if `like` is.
// Output dtype: `dtype`.
Array FullLike(const Array& like, float value, DType dtype);

}  // namespace shardtrace
