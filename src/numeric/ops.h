// The numeric op set of shardtrace in one include: everything the MoE reference path
// calls between parameters and outputs, each a function from Arrays to Arrays that runs
// in both modes. With every input numeric it computes float32 results deterministically
// and rounds them to the documented output dtype; with any input symbolic it only checks
// shapes and returns a symbolic Array without allocating. Errors are one-line
// shardtrace::Error messages naming the op (in jnp's spelling), the operand shapes and the
// offending dims. The ops live one concept per header:
//   creation.h     Scalar, Arange, FullLike
//   elementwise.h  broadcasting arithmetic, comparisons, Where, unary math, Cast, Clip
//   activations.h  Activation (by MaxText/flax name), Sigmoid, Softmax
//   reduce.h       Sum, Mean, Max, Cumsum
//   sort_ops.h     TopK, ArgsortStable, SortStable
//   shape_ops.h    Reshape, Transpose, Slice, Concat, Pad, BroadcastTo
//   index_ops.h    OneHot, TakeAlongAxis, Take, PutAlongAxis, Repeat, Bincount
//   einsum.h       ParseEinsum, Einsum
//   ragged_dot.h   RaggedDot
#pragma once

#include "numeric/activations.h"
#include "numeric/creation.h"
#include "numeric/einsum.h"
#include "numeric/elementwise.h"
#include "numeric/index_ops.h"
#include "numeric/ragged_dot.h"
#include "numeric/reduce.h"
#include "numeric/shape_ops.h"
#include "numeric/sort_ops.h"
