// Elementwise ops with numpy broadcasting: the arithmetic, comparisons and selects that
// moe.py applies between einsums (jnp.multiply for the GLU, jnp.where for masking,
// jnp.less_equal for capacity, jnp.clip for GPT-OSS limits, `.astype` casts). Shapes
// broadcast right-aligned as in numpy; a mismatch names the op and both shapes. Results
// are computed in float32 and converted once to the output dtype, so bfloat16 math matches
// XLA's upcast-compute-round on CPU. Output dtypes follow jax's promotion without weak
// types: pass Scalar(value, x.dtype) where moe.py writes a Python literal (`x * 1.702`) so
// that the literal does not widen x (Scalar is in numeric/creation.h).
#pragma once

#include <optional>

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace {

// jax's promotion of two dtypes: equal -> same; bool with X -> X; int32 with a float ->
// that float; bfloat16 with float16 -> float32; float32 with any float -> float32.
DType PromoteTypes(DType a, DType b);

// Arithmetic. Output dtype: PromoteTypes(a, b).
Array Add(const Array& a, const Array& b);
Array Sub(const Array& a, const Array& b);
Array Mul(const Array& a, const Array& b);
Array Maximum(const Array& a, const Array& b);  // NaN propagates
Array Minimum(const Array& a, const Array& b);  // NaN propagates
// Python/numpy floor division and modulo (result takes the divisor's sign).
// Output dtype: PromoteTypes(a, b).
Array FloorDivide(const Array& a, const Array& b);
Array Mod(const Array& a, const Array& b);
// True division. Output dtype: PromoteTypes(a, b), or float32 if that is int32/bool.
Array Div(const Array& a, const Array& b);

// Comparisons and logic. Output dtype: bool.
Array Greater(const Array& a, const Array& b);
Array GreaterEqual(const Array& a, const Array& b);
Array Less(const Array& a, const Array& b);
Array LessEqual(const Array& a, const Array& b);
Array Equal(const Array& a, const Array& b);
Array NotEqual(const Array& a, const Array& b);
Array LogicalAnd(const Array& a, const Array& b);  // nonzero is true

// Selects a where cond is nonzero, else b; all three broadcast together.
// Output dtype: PromoteTypes(a, b).
Array Where(const Array& cond, const Array& a, const Array& b);

// Unary ops. Output dtype: a.dtype.
Array Neg(const Array& a);
Array Abs(const Array& a);
Array Sign(const Array& a);  // -1, 0 or 1 (NaN stays NaN)
// Transcendental unary ops. Output dtype: a.dtype if floating, else float32.
Array Exp(const Array& a);
Array Log(const Array& a);
Array Sqrt(const Array& a);

// Converts to `dtype`: RoundTo for floats (round to nearest even), truncation toward zero
// (saturating, NaN -> 0) for int32, nonzero -> true for bool. Output dtype: `dtype`.
Array Cast(const Array& a, DType dtype);

// Clamps to [lo, hi]; a missing bound is open (jnp.clip(x, min=None, max=...)).
// Output dtype: a.dtype (the bounds are rounded to it first).
Array Clip(const Array& a, std::optional<float> lo, std::optional<float> hi);

}  // namespace shardtrace
