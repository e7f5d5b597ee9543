// RaggedDot: jax.lax.ragged_dot, the grouped matmul of MaxText's dropless ("megablox"/gmm)
// MoE path. After tokens are sorted by expert, lhs rows come in contiguous groups, one per
// expert, and group g is multiplied by that expert's kernel rhs[g]. This is the reference
// CPU semantics of that kernel: groups consume rows in order, rows beyond the sum of the
// group sizes come out as zeros, and rows past N are never read. Symbolic operands give
// the [N,O] shape only.
#pragma once

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace {

class ThreadPool;

// lhs [N,K] x rhs [G,K,O] with int32 group_sizes [G] -> [N,O]: rows
// [sum(group_sizes[:g]), +group_sizes[g]) use rhs[g]. Throws Error on rank or size
// mismatches, non-int32 group_sizes, or (numeric) a negative group size; groups that run
// past N are cut at N. Accumulation is float32. Output dtype: `out_dtype`.
Array RaggedDot(const Array& lhs, const Array& rhs, const Array& group_sizes, DType out_dtype,
                ThreadPool* pool = nullptr);

}  // namespace shardtrace
