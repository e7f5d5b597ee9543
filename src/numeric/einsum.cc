#include "numeric/einsum.h"

#include <cctype>
#include <utility>

#include "numeric/gemm.h"
#include "numeric/op_support.h"
#include "util/error.h"

namespace shardtrace {

namespace {

bool Contains(std::string_view letters, char c) {
  return letters.find(c) != std::string_view::npos;
}

// Appends the letters of `source` that satisfy `keep`, skipping ones already in `out`.
template <typename Pred>
void AppendLetters(std::string_view source, Pred keep, std::string& out) {
  for (const char c : source) {
    if (keep(c) && !Contains(out, c)) out.push_back(c);
  }
}

void CheckSubscripts(std::string_view equation, std::string_view letters, std::string_view what) {
  if (letters.empty() && what != "output") {
    // A scalar operand is legal einsum but nothing in moe.py needs it; reject loudly.
    Fail("einsum '{}': {} has no subscripts", equation, what);
  }
  for (size_t i = 0; i < letters.size(); ++i) {
    const char c = letters[i];
    if (!std::isalpha(static_cast<unsigned char>(c))) {
      Fail("einsum '{}': {} subscripts '{}' contain '{}'; only letters are supported", equation,
           what, letters, c);
    }
    if (letters.find(c, i + 1) != std::string_view::npos) {
      Fail("einsum '{}': {} subscripts '{}' repeat '{}'", equation, what, letters, c);
    }
  }
}

// Positions of `letters` within `subscripts` (every letter must be present).
std::vector<int64_t> PositionsOf(std::string_view letters, std::string_view subscripts) {
  std::vector<int64_t> positions;
  for (const char c : letters) positions.push_back(static_cast<int64_t>(subscripts.find(c)));
  return positions;
}

int64_t ProductOf(std::string_view letters, const std::map<char, int64_t>& sizes) {
  int64_t n = 1;
  for (const char c : letters) n *= sizes.at(c);
  return n;
}

Shape ShapeOf(std::string_view letters, const std::map<char, int64_t>& sizes) {
  Shape shape;
  for (const char c : letters) shape.push_back(sizes.at(c));
  return shape;
}

// Data and letters of one operand after summing away the letters `drop` (dims that appear
// in no other operand and not in the output), in float32. Without letters to drop the
// operand shares the array's buffer: einsum reads its operands, it never copies them.
struct Operand {
  Buffer data;
  std::string letters;
};

Operand SumAway(const Array& array, std::string_view letters, std::string_view drop) {
  Operand result;
  std::vector<int64_t> axes;
  for (size_t i = 0; i < letters.size(); ++i) {
    if (Contains(drop, letters[i])) {
      axes.push_back(static_cast<int64_t>(i));
    } else {
      result.letters.push_back(letters[i]);
    }
  }
  result.data = axes.empty() ? array.buffer()
                             : std::make_shared<const std::vector<float>>(
                                   op_support::SumOverAxes(array.values(), array.shape, axes));
  return result;
}

// `data` (of `shape`) permuted by `perm`, sharing it when the permutation is the identity.
Buffer Permuted(const Buffer& data, const Shape& shape, const std::vector<int64_t>& perm) {
  if (op_support::IsIdentity(perm)) return data;
  return std::make_shared<const std::vector<float>>(op_support::PermuteData(*data, shape, perm));
}

// Like Permuted for data the caller owns: moved through untouched by the identity.
std::vector<float> PermutedOwned(std::vector<float> data, const Shape& shape,
                                 const std::vector<int64_t>& perm) {
  if (op_support::IsIdentity(perm)) return data;
  return op_support::PermuteData(data, shape, perm);
}

void CheckOperandCount(const ParsedEinsum& parsed, size_t given) {
  if (parsed.operands.size() != given) {
    Fail("einsum '{}': equation has {} operand(s) but {} array(s) were given", parsed.equation,
         parsed.operands.size(), given);
  }
}

}  // namespace

ParsedEinsum ParseEinsum(std::string_view equation) {
  ParsedEinsum parsed;
  for (const char c : equation) {
    if (!std::isspace(static_cast<unsigned char>(c))) parsed.equation.push_back(c);
  }
  const std::string_view eq = parsed.equation;
  const size_t arrow = eq.find("->");
  if (arrow == std::string_view::npos) {
    Fail("einsum '{}': missing '->' (implicit output is not supported)", eq);
  }
  parsed.output = std::string(eq.substr(arrow + 2));
  const std::string_view inputs = eq.substr(0, arrow);
  size_t start = 0;
  while (true) {
    const size_t comma = inputs.find(',', start);
    parsed.operands.emplace_back(inputs.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (parsed.operands.size() > 2) {
    Fail("einsum '{}': {} operands; only 1 or 2 are supported", eq, parsed.operands.size());
  }
  for (size_t i = 0; i < parsed.operands.size(); ++i) {
    CheckSubscripts(eq, parsed.operands[i], fmt::format("operand {}", i));
  }
  CheckSubscripts(eq, parsed.output, "output");
  for (const char c : parsed.output) {
    bool found = false;
    for (const std::string& op : parsed.operands) found = found || Contains(op, c);
    if (!found) Fail("einsum '{}': output letter '{}' appears in no operand", eq, c);
  }

  const auto in_all = [&](char c) {
    for (const std::string& op : parsed.operands) {
      if (!Contains(op, c)) return false;
    }
    return true;
  };
  for (const std::string& op : parsed.operands) {
    if (parsed.operands.size() > 1) {
      AppendLetters(
          op, [&](char c) { return in_all(c) && Contains(parsed.output, c); }, parsed.batch);
    }
    AppendLetters(
        op, [&](char c) { return !Contains(parsed.output, c); }, parsed.contracted);
  }
  for (const std::string& op : parsed.operands) {
    std::string free;
    AppendLetters(
        op, [&](char c) { return Contains(parsed.output, c) && !Contains(parsed.batch, c); }, free);
    parsed.free.push_back(std::move(free));
  }
  return parsed;
}

std::map<char, int64_t> EinsumDimSizes(const ParsedEinsum& parsed,
                                       const std::vector<Shape>& shapes) {
  CheckOperandCount(parsed, shapes.size());
  std::map<char, int64_t> sizes;
  std::map<char, size_t> first_operand;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& letters = parsed.operands[i];
    if (shapes[i].size() != letters.size()) {
      Fail("einsum '{}': operand {} has shape {} (rank {}) but subscripts '{}' name {} dims",
           parsed.equation, i, ShapeToString(shapes[i]), shapes[i].size(), letters, letters.size());
    }
    for (size_t d = 0; d < letters.size(); ++d) {
      const char c = letters[d];
      const auto [it, inserted] = sizes.emplace(c, shapes[i][d]);
      if (inserted) {
        first_operand[c] = i;
      } else if (it->second != shapes[i][d]) {
        const size_t j = first_operand[c];
        Fail("einsum '{}': operand {} dim '{}' is {} but operand {} has {} (shapes {} and {})",
             parsed.equation, i, c, shapes[i][d], j, it->second, ShapeToString(shapes[j]),
             ShapeToString(shapes[i]));
      }
    }
  }
  return sizes;
}

Shape EinsumOutputShape(const ParsedEinsum& parsed, const std::vector<Shape>& shapes) {
  return ShapeOf(parsed.output, EinsumDimSizes(parsed, shapes));
}

Array Einsum(std::string_view equation, const Array& a, const Array& b, DType out_dtype) {
  return Einsum(ParseEinsum(equation), a, b, out_dtype);
}

Array Einsum(std::string_view equation, const Array& a, DType out_dtype) {
  return Einsum(ParseEinsum(equation), a, out_dtype);
}

Array Einsum(const ParsedEinsum& parsed, const Array& a, DType out_dtype) {
  CheckOperandCount(parsed, 1);
  const std::map<char, int64_t> sizes = EinsumDimSizes(parsed, {a.shape});
  Shape out_shape = ShapeOf(parsed.output, sizes);
  if (!a.numeric()) return Array::Symbolic(std::move(out_shape), out_dtype);

  const Operand reduced = SumAway(a, parsed.operands[0], parsed.contracted);
  std::vector<float> out = op_support::PermuteData(*reduced.data, ShapeOf(reduced.letters, sizes),
                                                   PositionsOf(parsed.output, reduced.letters));
  op_support::ConvertAll(out_dtype, out);
  return Array::FromData(std::move(out_shape), out_dtype, std::move(out));
}

Array Einsum(const ParsedEinsum& parsed, const Array& a, const Array& b, DType out_dtype) {
  CheckOperandCount(parsed, 2);
  const std::map<char, int64_t> sizes = EinsumDimSizes(parsed, {a.shape, b.shape});
  Shape out_shape = ShapeOf(parsed.output, sizes);
  if (!a.numeric() || !b.numeric()) return Array::Symbolic(std::move(out_shape), out_dtype);

  const std::string& la = parsed.operands[0];
  const std::string& lb = parsed.operands[1];
  const std::string& lo = parsed.output;
  // Letters only one operand has and the output lacks are summed before the matmul, so
  // the matmul sees just batch, free and shared-contracted letters.
  std::string drop_a;
  std::string drop_b;
  AppendLetters(
      la, [&](char c) { return !Contains(lb, c) && !Contains(lo, c); }, drop_a);
  AppendLetters(
      lb, [&](char c) { return !Contains(la, c) && !Contains(lo, c); }, drop_b);
  const Operand ra = SumAway(a, la, drop_a);
  const Operand rb = SumAway(b, lb, drop_b);

  std::string batch;
  std::string free_a;
  std::string free_b;
  std::string contract;
  AppendLetters(
      ra.letters, [&](char c) { return Contains(rb.letters, c) && Contains(lo, c); }, batch);
  AppendLetters(
      ra.letters, [&](char c) { return !Contains(rb.letters, c); }, free_a);
  AppendLetters(
      rb.letters, [&](char c) { return !Contains(ra.letters, c); }, free_b);
  AppendLetters(
      ra.letters, [&](char c) { return Contains(rb.letters, c) && !Contains(lo, c); }, contract);

  // a -> [batch, free_a, contract] and b -> [batch, contract, free_b]: one row-major
  // matrix pair per batch index.
  const Buffer pa = Permuted(ra.data, ShapeOf(ra.letters, sizes),
                             PositionsOf(batch + free_a + contract, ra.letters));
  const Buffer pb = Permuted(rb.data, ShapeOf(rb.letters, sizes),
                             PositionsOf(batch + contract + free_b, rb.letters));
  const int64_t nb = ProductOf(batch, sizes);
  const int64_t m = ProductOf(free_a, sizes);
  const int64_t k = ProductOf(contract, sizes);
  const int64_t n = ProductOf(free_b, sizes);
  std::vector<float> product(static_cast<size_t>(nb * m * n), 0.0f);
  for (int64_t i = 0; i < nb && m * n > 0 && k > 0; ++i)
    MatMul(pa->data() + i * m * k, pb->data() + i * k * n, product.data() + i * m * n, m, k, n);

  const std::string product_letters = batch + free_a + free_b;
  std::vector<float> out = PermutedOwned(std::move(product), ShapeOf(product_letters, sizes),
                                         PositionsOf(lo, product_letters));
  op_support::ConvertAll(out_dtype, out);
  return Array::FromData(std::move(out_shape), out_dtype, std::move(out));
}

}  // namespace shardtrace
