// Einsum against a naive loop over every letter, for the equations moe.py uses (3-, 4- and
// 5-D), plus parsing, shape errors and symbolic mode at DeepSeek-V3 sizes.
#include "numeric/einsum.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "util/error.h"

namespace shardtrace {
namespace {

// Small multiples of 0.5 in [-2, 2]: every product and partial sum is exact in float32,
// so Eigen's summation order cannot change the result and comparisons can be exact.
Array Pattern(const Shape& shape, int seed) {
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  uint32_t state = static_cast<uint32_t>(seed) * 2654435761u + 12345u;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>((state >> 16) % 9) - 4) * 0.5f;
  }
  return Array::FromData(shape, DType::kFloat32, std::move(values));
}

// out[out letters] = sum over all other letters of a[...] * b[...], by brute force.
std::vector<float> NaiveEinsum(const std::string& la, const std::string& lb, const std::string& lo,
                               const Array& a, const Array& b) {
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < la.size(); ++i) sizes[la[i]] = a.shape[i];
  for (size_t i = 0; i < lb.size(); ++i) sizes[lb[i]] = b.shape[i];
  std::string letters;
  for (const auto& [c, n] : sizes) letters.push_back(c);
  const auto offset = [&](const std::string& sub, const std::map<char, int64_t>& at) {
    int64_t off = 0;
    for (const char c : sub) off = off * sizes[c] + at.at(c);
    return off;
  };
  int64_t out_size = 1;
  for (const char c : lo) out_size *= sizes[c];
  std::vector<float> out(static_cast<size_t>(out_size), 0.0f);
  std::map<char, int64_t> at;
  for (const char c : letters) at[c] = 0;
  while (true) {
    out[offset(lo, at)] += a.values()[offset(la, at)] * b.values()[offset(lb, at)];
    size_t d = letters.size();
    while (d > 0) {
      --d;
      if (++at[letters[d]] < sizes[letters[d]]) break;
      at[letters[d]] = 0;
      if (d == 0) return out;
    }
    if (letters.empty()) return out;
  }
}

struct Case {
  std::string equation;
  std::map<char, int64_t> sizes;
};

Shape ShapeFor(const std::string& letters, const std::map<char, int64_t>& sizes) {
  Shape shape;
  for (const char c : letters) shape.push_back(sizes.at(c));
  return shape;
}

}  // namespace

TEST_CASE("einsum matches a naive loop for moe.py equations", "[numeric][einsum]") {
  const std::map<char, int64_t> sz = {{'B', 2}, {'S', 3}, {'M', 4}, {'E', 3},
                                      {'H', 5}, {'C', 2}, {'N', 2}, {'K', 2}};
  const std::vector<std::string> equations = {
      "BSM,ME->BSE",       "BSM,EMH->BSEH",     "BSEH,EHM->BSEM", "BSEM,BSE->BSM",
      "BSM,BSEC->EBCM",    "EBCM,EMH->EBCH",    "EBCH,EHM->EBCM", "EBCM,BSEC->BSM",
      "BNSM,BNSEC->EBNCM", "EBNCM,BNSEC->BNSM", "BKE,BK->BE",     "BSE,BSEC->BSEC",
      "BS,SM->M",          "BSM,SE->E"};
  int seed = 1;
  for (const std::string& eq : equations) {
    const ParsedEinsum parsed = ParseEinsum(eq);
    const Array a = Pattern(ShapeFor(parsed.operands[0], sz), seed++);
    const Array b = Pattern(ShapeFor(parsed.operands[1], sz), seed++);
    const Array out = Einsum(eq, a, b, DType::kFloat32);
    INFO(eq);
    CHECK(out.shape == ShapeFor(parsed.output, sz));
    REQUIRE(out.numeric());
    CHECK(out.values() == NaiveEinsum(parsed.operands[0], parsed.operands[1], parsed.output, a, b));
  }
}

TEST_CASE("einsum hand-computed gate matmul", "[numeric][einsum]") {
  // [1,2,3] x [3,2]: rows (1,2,3) and (4,5,6) times [[1,0],[0,1],[1,1]].
  const Array x = Array::FromData({1, 2, 3}, DType::kFloat32, {1, 2, 3, 4, 5, 6});
  const Array w = Array::FromData({3, 2}, DType::kFloat32, {1, 0, 0, 1, 1, 1});
  const Array out = Einsum("BSM,ME->BSE", x, w, DType::kFloat32);
  CHECK(out.shape == Shape{1, 2, 2});
  CHECK(out.values() == std::vector<float>{4, 5, 10, 11});
}

TEST_CASE("einsum ignores whitespace and rounds to the output dtype", "[numeric][einsum]") {
  const Array a = Array::FromData({1, 2}, DType::kFloat32, {1.0f, 1.0f});
  const Array b = Array::FromData({2, 1}, DType::kFloat32, {1.0f, 0.00390625f});
  const Array out =
      Einsum("EBCM, EMH -> EBCH", Array::FromData({1, 1, 1, 2}, DType::kFloat32, {1.0f, 1.0f}),
             Array::FromData({1, 2, 1}, DType::kFloat32, {1.0f, 0.00390625f}), DType::kBfloat16);
  CHECK(out.dtype == DType::kBfloat16);
  CHECK(out.values() == std::vector<float>{1.0f});  // 1.00390625 rounds to even in bf16
  CHECK(Einsum("ij,jk->ik", a, b, DType::kFloat32).values() == std::vector<float>{1.00390625f});
}

TEST_CASE("einsum is bit-for-bit repeatable", "[numeric][einsum]") {
  std::vector<float> va(6 * 40);
  std::vector<float> vb(40 * 7);
  for (size_t i = 0; i < va.size(); ++i) va[i] = 1.0f / static_cast<float>(i + 3);
  for (size_t i = 0; i < vb.size(); ++i) vb[i] = 0.1f * static_cast<float>(i % 13) - 0.5f;
  const Array a = Array::FromData({6, 40}, DType::kFloat32, va);
  const Array b = Array::FromData({40, 7}, DType::kFloat32, vb);
  const Array first = Einsum("mk,kn->mn", a, b, DType::kFloat32);
  for (int i = 0; i < 5; ++i) {
    CHECK(Einsum("mk,kn->mn", a, b, DType::kFloat32).values() == first.values());
  }
  const std::vector<float> naive = NaiveEinsum("mk", "kn", "mn", a, b);
  for (size_t i = 0; i < naive.size(); ++i) CHECK(first.values()[i] == Approx(naive[i]));
}

TEST_CASE("einsum single operand transposes and sums", "[numeric][einsum]") {
  const Array a = Array::FromData({2, 3}, DType::kFloat32, {1, 2, 3, 4, 5, 6});
  const Array t = Einsum("ij->ji", a, DType::kFloat32);
  CHECK(t.shape == Shape{3, 2});
  CHECK(t.values() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(Einsum("ij->i", a, DType::kFloat32).values() == std::vector<float>{6, 15});
  CHECK(Einsum("ij->j", a, DType::kInt32).values() == std::vector<float>{5, 7, 9});
}

TEST_CASE("ParseEinsum classifies letters", "[numeric][einsum]") {
  const ParsedEinsum p = ParseEinsum("BSM, BSEC -> EBCM");
  CHECK(p.equation == "BSM,BSEC->EBCM");
  CHECK(p.operands == std::vector<std::string>{"BSM", "BSEC"});
  CHECK(p.output == "EBCM");
  CHECK(p.batch == "B");
  CHECK(p.contracted == "S");
  CHECK(p.free == std::vector<std::string>{"M", "EC"});

  const ParsedEinsum gate = ParseEinsum("BSM,ME->BSE");
  CHECK(gate.batch.empty());
  CHECK(gate.contracted == "M");
  CHECK(gate.free == std::vector<std::string>{"BS", "E"});

  const ParsedEinsum weight_sum = ParseEinsum("BSEM,BSE->BSM");
  CHECK(weight_sum.batch == "BS");
  CHECK(weight_sum.contracted == "E");
  CHECK(EinsumDimSizes(weight_sum, {{2, 3, 4, 5}, {2, 3, 4}}) ==
        std::map<char, int64_t>{{'B', 2}, {'S', 3}, {'E', 4}, {'M', 5}});
  CHECK(EinsumOutputShape(weight_sum, {{2, 3, 4, 5}, {2, 3, 4}}) == Shape{2, 3, 5});
}

TEST_CASE("einsum rejects malformed equations", "[numeric][einsum]") {
  CHECK_THROWS_WITH(ParseEinsum("BSM,ME"), Catch::Contains("einsum 'BSM,ME': missing '->'"));
  CHECK_THROWS_WITH(ParseEinsum("BSM,ME->BSX"),
                    Catch::Contains("output letter 'X' appears in no operand"));
  CHECK_THROWS_WITH(ParseEinsum("BBM,ME->BE"), Catch::Contains("repeat 'B'"));
  CHECK_THROWS_WITH(ParseEinsum("B.M,ME->BE"), Catch::Contains("contain '.'"));
  CHECK_THROWS_WITH(ParseEinsum("a,b,c->abc"), Catch::Contains("3 operands"));
  CHECK_NOTHROW(ParseEinsum("BSM,ME->BSE"));
}

TEST_CASE("einsum shape mismatches name the operand and dim", "[numeric][einsum]") {
  const Array x = Array::Symbolic({2, 4, 8}, DType::kBfloat16);
  const Array w = Array::Symbolic({4, 16, 32}, DType::kBfloat16);
  CHECK_THROWS_WITH(Einsum("BSM,EMH->BSEH", x, w, DType::kBfloat16),
                    Catch::Contains("einsum 'BSM,EMH->BSEH': operand 1 dim 'M' is 16 but operand "
                                    "0 has 8") &&
                        Catch::Contains("[2,4,8]") && Catch::Contains("[4,16,32]"));
  CHECK_THROWS_WITH(
      Einsum("BSM,ME->BSE", x, Array::Symbolic({8, 4, 1}, DType::kFloat32), DType::kFloat32),
      Catch::Contains("operand 1 has shape [8,4,1] (rank 3) but subscripts 'ME' "
                      "name 2 dims"));
  CHECK_THROWS_WITH(Einsum("BSM,ME->BSE", x, DType::kFloat32),
                    Catch::Contains("equation has 2 operand(s) but 1 array(s)"));
  // Numeric operands get the same checks.
  CHECK_THROWS_AS(Einsum("ij,jk->ik", Array::Filled({2, 3}, DType::kFloat32, 1),
                         Array::Filled({2, 3}, DType::kFloat32, 1), DType::kFloat32),
                  Error);
}

TEST_CASE("einsum symbolic mode handles DeepSeek-V3 sizes without data", "[numeric][einsum]") {
  // 4096 tokens x 7168 x 256 experts x 2048: ~1.5e16 FLOPs and terabytes if allocated.
  const Array x = Array::Symbolic({1, 4096, 7168}, DType::kBfloat16);
  const Array w0 = Array::Symbolic({256, 7168, 2048}, DType::kBfloat16);
  const Array h = Einsum("BSM,EMH->BSEH", x, w0, DType::kBfloat16);
  CHECK_FALSE(h.numeric());
  CHECK(h.shape == Shape{1, 4096, 256, 2048});
  CHECK(h.dtype == DType::kBfloat16);
  const Array wo = Array::Symbolic({256, 2048, 7168}, DType::kBfloat16);
  const Array y = Einsum("BSEH,EHM->BSEM", h, wo, DType::kFloat32);
  CHECK_FALSE(y.numeric());
  CHECK(y.shape == Shape{1, 4096, 256, 7168});
  // One symbolic operand is enough to stay symbolic.
  const Array gate =
      Einsum("BSM,ME->BSE", x, Array::Filled({7168, 4}, DType::kFloat32, 1), DType::kFloat32);
  CHECK_FALSE(gate.numeric());
  CHECK(gate.shape == Shape{1, 4096, 4});
}

}  // namespace shardtrace
