// Thin wrappers that run one numeric op (numeric/*.h) through the Tracer, so path code
// reads like moe.py: `Value logits = Einsum(t, "BSM,ME -> BSE", x, kernel, dtype, {...})`.
// Each records the op kind, equation/attributes and the output tensor.
#pragma once

#include <string>

#include "numeric/activations.h"
#include "numeric/creation.h"
#include "numeric/einsum.h"
#include "numeric/elementwise.h"
#include "numeric/index_ops.h"
#include "numeric/ragged_dot.h"
#include "numeric/reduce.h"
#include "numeric/shape_ops.h"
#include "numeric/sort_ops.h"
#include "numeric/vjp.h"
#include "paths/tracer.h"

namespace shardtrace::traced {

Value Einsum(Tracer& t, const std::string& equation, const Value& a, const Value& b,
             DType out_dtype, const Out& out);
Value Cast(Tracer& t, const Value& x, DType dtype, const Out& out);
Value Reshape(Tracer& t, const Value& x, const Shape& shape, const Out& out);
// quantizations.dequantize_weight(w, scale, dtype) of an fp8 weight: w and its float32 scale
// cast to `dtype`, then w times the scale: a scalar scale broadcast, a leading [E] scale as
// [E, 1, 1], and a block grid of the kernel's rank by interleaving each dim d with its s
// blocks as (s, d/s), multiplying by the scale reshaped to (s, 1) per dim and reshaping
// back (each dim's major part keeps its sharding, so a scale sharded like its kernel needs
// no communication). A dim its scale does not divide is refused as MaxText refuses it.
Value Dequantize(Tracer& t, const Value& w, const Value& scale, DType dtype, const Out& out);
// The activation `name` (numeric/activations.h), or softmax over the last axis.
Value Activation(Tracer& t, const std::string& name, const Value& x, const Out& out);
Value Softmax(Tracer& t, const Value& x, const Out& out);  // over the last axis
// Elementwise binary op (IsBinary(kind)): add, sub, mul, div, comparisons, floor_divide, mod.
Value Binary(Tracer& t, OpKind kind, const Value& a, const Value& b, const Out& out);
// A constant (scalar or array) that is not a tensor of the model: recorded as an input.
Value Constant(Tracer& t, const Array& value, const Out& out);
// adc.checkpoint_name(x, name): the remat tag MaxText puts on an activation (identity).
// `inner` is the name of a nested checkpoint_name moe.py writes inside it
// (checkpoint_name(checkpoint_name(x, inner), name)): recorded as a Trace::checkpoint_tags
// entry, not a second op, since both calls are the identity.
Value CheckpointName(Tracer& t, const Value& x, const std::string& name,
                     const std::string& inner = "");
// A remat tag on `x` with no op recorded (Trace::checkpoint_tags): a checkpoint_name the
// forward trace leaves out (MlpBlock's, moe_x_sorted, moe_routing_maps).
void Tag(Tracer& t, const Value& x, const std::string& name);
// jnp.zeros: allocated only in numeric mode.
Value Zeros(Tracer& t, const Shape& shape, DType dtype, const Out& out);
// jax.lax.empty (the ragged all-to-all buffers): JAX leaves the rows no exchange writes
// unspecified; the simulator fills zeros, so such rows read as 0 in numeric runs.
Value Empty(Tracer& t, const Shape& shape, DType dtype, const Out& out);
Value Sum(Tracer& t, const Value& x, int64_t axis, bool keepdims, const Out& out);
Value Mean(Tracer& t, const Value& x, int64_t axis, const Out& out);
Value Cumsum(Tracer& t, const Value& x, int64_t axis, const Out& out);
Value OneHot(Tracer& t, const Value& indices, int64_t depth, DType dtype, const Out& out);
std::pair<Value, Value> TopK(Tracer& t, const Value& x, int64_t k, const Out& values,
                             const Out& indices);
Value TakeAlongAxis(Tracer& t, const Value& x, const Value& indices, int64_t axis, const Out& out);
Value Take(Tracer& t, const Value& x, const Value& indices, int64_t axis, const Out& out);
Value Argsort(Tracer& t, const Value& x, const Out& out);
Value Bincount(Tracer& t, const Value& x, int64_t length, const Out& out);
Value Repeat(Tracer& t, const Value& x, int64_t repeats, int64_t axis, const Out& out);
Value RepeatBy(Tracer& t, const Value& x, const Value& repeats, int64_t total, const Out& out);
Value Where(Tracer& t, const Value& cond, const Value& a, const Value& b, const Out& out);
Value Clip(Tracer& t, const Value& x, std::optional<float> lo, std::optional<float> hi,
           const Out& out);
Value Slice(Tracer& t, const Value& x, int64_t axis, int64_t start, int64_t size, const Out& out);
// jnp.concatenate(parts, axis); the cotangent goes back to each part as its slice.
Value Concatenate(Tracer& t, const std::vector<Value>& parts, int64_t axis, const Out& out);

}  // namespace shardtrace::traced
