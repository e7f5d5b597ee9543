// Einsum: the contraction behind every matmul of moe.py ("BSM,ME->BSE" for the gate,
// "BSM,EMH->BSEH" for the dense expert MLP, "BSM,BSEC->EBCM" for capacity dispatch, ...).
// An equation is parsed once into a ParsedEinsum, whose letter classes (batch, contracted,
// free) the tracer records to report FLOPs and sharding. Shapes are always checked: every
// letter must have one size across operands, and errors name the equation, operand and
// dim. With any symbolic operand only the output shape is computed (nothing allocated),
// so DeepSeek-V3's [256,7168,2048] kernels trace instantly. Numeric evaluation permutes
// the operands into per-batch matrices, multiplies them with Eigen in float32 in a fixed
// order, and rounds once to the requested dtype.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "numeric/array.h"
#include "numeric/dtype.h"

namespace shardtrace {

struct ParsedEinsum {
  // The equation with whitespace removed, e.g. "EBCM,EMH->EBCH"; errors quote this form.
  std::string equation;
  // Letters naming each operand's dims, in order (one entry per operand).
  std::vector<std::string> operands;
  // Letters naming the output dims, in order.
  std::string output;
  // Letters in every operand and in the output (for one operand: none), by first use.
  std::string batch;
  // Letters in some operand but not in the output: summed away, by first use.
  std::string contracted;
  // Per operand: its letters that reach the output and are not batch letters.
  std::vector<std::string> free;
};

// Parses "lhs,rhs->out" (or "in->out"); letters are [A-Za-z], whitespace is ignored.
// Throws Error on: missing "->", an operand count other than 1 or 2, a non-letter, a
// letter repeated within one operand or in the output, an output letter absent from every
// operand.
ParsedEinsum ParseEinsum(std::string_view equation);

// The size of every letter of `parsed` given the operand shapes; throws Error when an
// operand's rank differs from its letter count, or a letter's sizes disagree, e.g.
// "einsum 'BSM,EMH->BSEH': operand 1 dim 'M' is 16 but operand 0 has 8".
std::map<char, int64_t> EinsumDimSizes(const ParsedEinsum& parsed,
                                       const std::vector<Shape>& shapes);

// The output shape of `parsed` applied to `shapes` (same checks as EinsumDimSizes).
Shape EinsumOutputShape(const ParsedEinsum& parsed, const std::vector<Shape>& shapes);

// Two-operand einsum. Output dtype: `out_dtype` (accumulation is float32, then RoundTo).
// Symbolic if either operand is.
Array Einsum(std::string_view equation, const Array& a, const Array& b, DType out_dtype);
Array Einsum(const ParsedEinsum& parsed, const Array& a, const Array& b, DType out_dtype);

// One-operand einsum (transpose and/or sum, e.g. "BSE->EB"). Output dtype: `out_dtype`.
Array Einsum(std::string_view equation, const Array& a, DType out_dtype);
Array Einsum(const ParsedEinsum& parsed, const Array& a, DType out_dtype);

}  // namespace shardtrace
