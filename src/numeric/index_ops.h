// Index-driven ops of MoE routing and dispatch: one-hot expert masks (jax.nn.one_hot),
// gathering the chosen experts' weights (jnp.take_along_axis, jnp.take), scattering the
// top-k weights into a dense [B,S,E] array (`zeros.at[b, s, idx].set(w)`), replicating
// tokens per expert (jnp.repeat), and per-expert token counts (jnp.bincount). Index
// operands must be int32; negative indices count from the end as in numpy, and an index
// still out of range after that throws Error naming the op, the index and the shape (jax
// would silently clamp or drop it, which in a reference trace would hide a routing bug).
#pragma once

#include <cstdint>

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace {

// Appends a dim of size `depth`: out[..., j] = (indices[...] == j). Out-of-range (or
// non-integral) indices give an all-zero row, like jax.nn.one_hot. Output dtype: `dtype`.
Array OneHot(const Array& indices, int64_t depth, DType dtype);

// numpy take_along_axis: out[..., j, ...] = a[..., indices[..., j, ...], ...] along `axis`.
// `indices` has a's rank; other dims must match a's or be 1 on either side (broadcast).
// Output shape: the broadcast with indices.shape[axis] at `axis`. Output dtype: a.dtype.
Array TakeAlongAxis(const Array& a, const Array& indices, int64_t axis);

// jnp.take: gathers whole slices. Output shape: a.shape[:axis] + indices.shape +
// a.shape[axis+1:]. Output dtype: a.dtype.
Array Take(const Array& a, const Array& indices, int64_t axis);

// The inverse of TakeAlongAxis, as a copy: a with a[..., indices[..., j, ...], ...] set to
// values[..., j, ...]. `indices` follows TakeAlongAxis's rules; `values` broadcasts to the
// index grid (a's shape with indices.shape[axis] at `axis`). Where indices repeat, the last
// in row-major order wins. Output dtype: a.dtype. This is moe.py's
// `zeros[B,S,E].at[arange(B)[:,None,None], arange(S)[:,None], top_k_indices].set(w)`
// with axis = -1.
Array PutAlongAxis(const Array& a, const Array& indices, const Array& values, int64_t axis);

// np.repeat with one count: each element along `axis` repeated `repeats` times in place.
// Output dtype: a.dtype.
Array Repeat(const Array& a, int64_t repeats, int64_t axis);

// jnp.repeat(a, repeats, axis, total_repeat_length): element i along `axis` repeated
// repeats[i] times (repeats: int32 [a.shape[axis]], each >= 0), truncated or extended to
// `total_repeat_length`; extension repeats the last element, exactly as jax does.
// Output dtype: a.dtype.
Array Repeat(const Array& a, const Array& repeats, int64_t axis, int64_t total_repeat_length);

// Counts of each value in [0, length) over all elements of int32 `x`; values >= length are
// ignored and negative values count as 0 (jax clips them). Output: int32 [length].
Array Bincount(const Array& x, int64_t length);

}  // namespace shardtrace
