// Ordering ops of MoE routing: jax.lax.top_k picks each token's experts, and jnp.argsort
// groups the routed copies of tokens by expert (and inverts that grouping afterwards).
// Ties must break exactly as jax's do, or a numeric trace routes a token to a different
// expert than MaxText: top_k prefers the lower index among equal values, and argsort is
// stable. NaN sorts after every number, as in numpy/jax.
#pragma once

#include <cstdint>

#include "numeric/array.h"

namespace shardtrace {

struct TopKResult {
  Array values;   // dtype: input dtype; shape [..., k]
  Array indices;  // dtype: int32; shape [..., k]
};

// The k largest entries along the last axis, in descending order; equal values keep
// ascending index order. Throws Error if rank is 0 or k is outside [0, last dim].
TopKResult TopK(const Array& a, int64_t k);

// Indices that sort `a` ascending along `axis` (stable). Output dtype: int32.
Array ArgsortStable(const Array& a, int64_t axis = -1);

// `a` sorted ascending along `axis` (stable). Output dtype: a.dtype.
Array SortStable(const Array& a, int64_t axis = -1);

}  // namespace shardtrace
