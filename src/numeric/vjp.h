// Vector-Jacobian products of the numeric ops: given an op's primal operands and the
// cotangent `g` of its result, the cotangent of each operand, as jax's transpose/JVP rules
// define them (the reverse pass of numeric/tape.h composes these). Each cotangent has its
// operand's shape and dtype: it is computed in float32 and rounded once to that dtype, as
// XLA computes a bfloat16 backward on CPU. Broadcast operands get the cotangent summed back
// to their shape. Ops that only select elements (reshape, transpose, slice, take,
// take_along_axis, repeat, top_k's values, broadcast_to, gathers between devices) share one
// rule: the op is replayed on the operand's flat positions (Iota) and the cotangent is added
// back into the positions each output element came from, so their rule cannot drift from
// the op. Integer and bool results carry no cotangent; callers do not ask.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>

#include "numeric/array.h"
#include "numeric/dtype.h"
#include "numeric/einsum.h"

namespace shardtrace {

// float32 [shape] holding each element's flat row-major position (exact below 2^24
// elements; larger shapes are refused). The operand a selection op is replayed on.
Array Iota(const Shape& shape);

// A zero array of `shape` and `dtype` with g[i] added at flat position positions[i] for
// every positions[i] >= 0 (float32 accumulation, one rounding): the transpose of a gather.
Array ScatterAddByPosition(const Array& positions, const Array& g, const Shape& shape, DType dtype);

// The cotangent of operand x (of `shape` and `dtype`) of an op that only selects elements
// of x: `select` applied to Iota(shape) gives each output's source position.
Array SelectionVjp(const std::function<Array(const Array&)>& select, const Shape& shape,
                   DType dtype, const Array& g);

// g summed over the dims numpy broadcasting added or stretched to reach g's shape from
// `shape`, rounded to `dtype`: the cotangent of a broadcast operand.
Array SumToShape(const Array& g, const Shape& shape, DType dtype);

// Elementwise arithmetic with broadcasting: the cotangents of a and b.
std::pair<Array, Array> AddVjp(const Array& a, const Array& b, const Array& g);
std::pair<Array, Array> SubVjp(const Array& a, const Array& b, const Array& g);
std::pair<Array, Array> MulVjp(const Array& a, const Array& b, const Array& g);
std::pair<Array, Array> DivVjp(const Array& a, const Array& b, const Array& g);
// where(cond, a, b): g where cond to a, elsewhere to b.
std::pair<Array, Array> WhereVjp(const Array& cond, const Array& a, const Array& b, const Array& g);
// clip(x, lo, hi) as jnp.clip writes it (maximum then minimum): g where x is inside the
// bounds, half of it where x equals a bound (lax.max/min split ties evenly), 0 outside.
Array ClipVjp(const Array& x, std::optional<float> lo, std::optional<float> hi, const Array& g);
// astype: g converted to x's dtype (floating x only).
Array CastVjp(const Array& x, const Array& g);

// The activation `name` (numeric/activations.h) at x: g * f'(x).
Array ActivationVjp(std::string_view name, const Array& x, const Array& g);
// softmax along `axis` with result y: y * (g - sum(g * y, axis)).
Array SoftmaxVjp(const Array& y, const Array& g, int64_t axis);

// Sum / Mean of x over `axes` (normalized or negative; keepdims as the op had it): g
// broadcast back (divided by the count for Mean).
Array SumVjp(const Array& x, const std::vector<int64_t>& axes, bool keepdims, const Array& g);
Array MeanVjp(const Array& x, const std::vector<int64_t>& axes, bool keepdims, const Array& g);

// Two-operand einsum: da = einsum(g, b -> a's letters), db likewise; letters an operand sums
// away alone come back broadcast.
std::pair<Array, Array> EinsumVjp(const ParsedEinsum& parsed, const Array& a, const Array& b,
                                  const Array& g);
// One-operand einsum (transpose and/or sum): g transposed and broadcast back.
Array EinsumVjp(const ParsedEinsum& parsed, const Array& a, const Array& g);

// ragged_dot(lhs [N,K], rhs [G,K,O], group_sizes): dlhs = g @ rhs[group]^T per row of a
// group (rows past the groups: 0), drhs[group] = lhs[rows]^T @ g[rows].
std::pair<Array, Array> RaggedDotVjp(const Array& lhs, const Array& rhs, const Array& group_sizes,
                                     const Array& g);

}  // namespace shardtrace
