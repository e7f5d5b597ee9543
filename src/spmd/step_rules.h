// The training step's per-op rules, apart from the analysis that walks the trace with them
// (step_model.cc): which ops and operands carry a cotangent, which collective transposes
// which, and what XLA:CPU compiles a backward collective to. Internal to the spmd room.
#pragma once

#include <cstdint>

#include "ir/collective_kind.h"
#include "ir/op_kind.h"
#include "ir/trace.h"
#include "spmd/step_model.h"

namespace shardtrace {

// Ops whose output is no value the loss can be differentiated through (comparisons, index
// maps, constants): their outputs carry no cotangent.
bool NonDifferentiable(OpKind k);

// The operand positions a cotangent flows into (a gather's indices and a ragged all-to-all's
// sizes take none; a where's condition is boolean, so no cotangent reaches it anyway).
bool DifferentiableOperand(const OpRecord& op, size_t k);

// What XLA:CPU compiles a collective of `c.kind` to, with the bytes each device sends and the
// result's bytes, from the per-device block before (`in`) and after (`out`) it.
void SetXlaCpu(StepCollective& c, const Shape& in, const Shape& out);

int64_t Elements(const Shape& s);

// The kind of the transposed collective (all-gather <-> psum-scatter; others are their own).
CollectiveKind Transposed(CollectiveKind k);

}  // namespace shardtrace
