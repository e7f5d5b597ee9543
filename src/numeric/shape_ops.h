// Layout ops that move data without arithmetic: the reshapes moe.py applies between
// [batch, seq, ...] and flattened token layouts, transposes, the `[..., 1:]` slice of the
// combine mask, concatenation of offsets, padding, and jnp.broadcast_to for the routing
// group mask. All keep the input dtype; shape errors name the op and the shapes involved.
#pragma once

#include <cstdint>
#include <vector>

#include "numeric/array.h"

namespace shardtrace {

// Same data, new shape; at most one entry may be -1 (inferred). Output dtype: a.dtype.
Array Reshape(const Array& a, const Shape& new_shape);

// Result dim i is input dim perm[i] (perm entries may not be negative). Output dtype:
// a.dtype.
Array Transpose(const Array& a, const std::vector<int64_t>& perm);

// Elements [start, start + size) along `axis`; throws Error if that leaves the dim.
// Output dtype: a.dtype.
Array Slice(const Array& a, int64_t axis, int64_t start, int64_t size);

// Joins arrays along `axis`; all other dims must match. Output dtype: PromoteTypes over
// all inputs.
Array Concat(const std::vector<Array>& arrays, int64_t axis);

// Adds `before` and `after` elements (both >= 0) of `value` along `axis`.
// Output dtype: a.dtype.
Array Pad(const Array& a, int64_t axis, int64_t before, int64_t after, float value);

// numpy broadcast of `a` to `shape` (a's dims right-aligned, each 1 or equal).
// Output dtype: a.dtype.
Array BroadcastTo(const Array& a, const Shape& shape);

}  // namespace shardtrace
