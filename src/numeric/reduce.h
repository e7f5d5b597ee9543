// Reductions of the MoE layer: sums for renormalizing top-k weights and counting capacity
// (jnp.sum), means for the load-balance loss (jnp.mean), max, and the inclusive cumsum that
// assigns each token its slot in an expert's capacity. Axes may be negative; a list
// reduces several at once. Accumulation is float32 in row-major order of the reduced dims,
// so results are deterministic; the result is converted once to the output dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace {

// Sums over `axes` (an empty list reduces nothing), or all axes. keepdims leaves size-1
// dims in place of the reduced ones. Output dtype: int32 for bool input, else a.dtype.
Array Sum(const Array& a, const std::vector<int64_t>& axes, bool keepdims = false);
Array Sum(const Array& a, int64_t axis, bool keepdims = false);
Array Sum(const Array& a);

// Arithmetic mean. Output dtype: a.dtype if floating, else float32.
Array Mean(const Array& a, const std::vector<int64_t>& axes, bool keepdims = false);
Array Mean(const Array& a, int64_t axis, bool keepdims = false);
Array Mean(const Array& a);

// Maximum (NaN propagates); throws Error when a reduced dim is empty. Output dtype: a.dtype.
Array Max(const Array& a, const std::vector<int64_t>& axes, bool keepdims = false);
Array Max(const Array& a, int64_t axis, bool keepdims = false);
Array Max(const Array& a);

// Inclusive running sum along `axis`. Output dtype: `dtype` if given, else int32 for bool
// input and a.dtype otherwise (each partial sum is float32, rounded when stored).
Array Cumsum(const Array& a, int64_t axis, std::optional<DType> dtype = std::nullopt);

}  // namespace shardtrace
