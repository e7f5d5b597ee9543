// Where the backward computes a cotangent that arrives in another sharding than its value's.
// Inside a training step the block's output cotangent is sharded like the block input (the
// next layer constrains its input so; the oracle's loss cotangent is placed so), and where the
// forward left the output in another sharding (dense dropless under expert parallelism:
// replicated partial sums), XLA computes the output in its cotangent's sharding instead and
// the backward runs from there in shardings the forward never used. XLA's Shardy propagation
// (openxla/shardy, aggressive_factor_propagation.cc) settles each conflict between two
// factors that want the same mesh axis by a fixed order: the factor whose source tensor is
// larger (global elements) first; for an elementwise op the more sharded factor; then the
// source operand that comes first. JAX writes every transposed einsum with the cotangent
// first (d_a = einsum(d_out, b)) and a product's cotangents as ct * b and a * ct, so these
// rules decide, per VJP, which sharding the result is computed in and which operand moves.
// Internal to the spmd room (step_model.cc).
#pragma once

#include <string>
#include <vector>

#include "numeric/array.h"
#include "numeric/einsum.h"
#include "shard/mesh.h"
#include "shard/partition_spec.h"

namespace shardtrace {

// One operand of a transposed einsum: its letters, global shape and current sharding.
struct CotangentOperand {
  std::string letters;
  Shape shape;
  PartitionSpec spec;
};

struct CotangentEinsumPlan {
  PartitionSpec result;              // d_x as the einsum computes it
  PartitionSpec d_out;               // the cotangent operand as the einsum reads it
  PartitionSpec other;               // the residual operand as the einsum reads it
  std::vector<std::string> partial;  // mesh axes over which `result` holds partial sums
};

// d_x = einsum(d_out, other) with d_x's letters `x_letters`. Each of d_x's dims takes the
// axes of the operand that carries its letter (the larger operand's on a disagreement); a
// mesh axis two dims want stays on the dim of the larger source tensor, the cotangent's on a
// tie. Each operand is read sharded like the result on the letters it keeps and keeps its own
// axes on the contracted ones unless the result uses them; an axis left on a contracted
// letter of one operand slices the other (free): partial sums over it.
CotangentEinsumPlan PlanCotangentEinsum(const CotangentOperand& d_out,
                                        const CotangentOperand& other, const std::string& x_letters,
                                        const Mesh& mesh);

// The sharding an elementwise op of two same-shaped operands computes in: per dim the longer
// of the two shardings where one extends the other; a mesh axis two dims want stays on the
// more sharded dim, the first operand's on a tie.
PartitionSpec ElementwiseSharding(const PartitionSpec& first, const PartitionSpec& second,
                                  const Mesh& mesh);

// `spec` without the mesh axes of size 1 (they shard nothing).
PartitionSpec EffectiveSpec(const PartitionSpec& spec, const Mesh& mesh);

// How the step's forward reads operand `k` (computed as `computed` in the forward pass) of the
// einsum producing the block output, whose cotangent arrives as `want`: sharded like the
// output on its batch letters (in both operands and the output: the pass-through factors
// Shardy's first pass propagates), the rest of its sharding kept where it uses none of those
// axes. What remains (partial sums of a contracted letter) is reduced into the output.
PartitionSpec StepOutputRead(const ParsedEinsum& eq, size_t k, const PartitionSpec& computed,
                             const PartitionSpec& want);

}  // namespace shardtrace
