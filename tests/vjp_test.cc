// The VJP rules of numeric/vjp.h against central finite differences of the ops themselves:
// for a random cotangent g and direction d, <vjp(g), d> must equal the derivative of
// sum(op(x) * g) along d. And the tape's reverse pass: fan-out adds, rules run in reverse,
// and a cotangent reaching an op without a rule is an internal error.
#include "numeric/vjp.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "numeric/ops.h"
#include "numeric/tape.h"

namespace shardtrace {
namespace {

using Fn = std::function<Array(const std::vector<Array>&)>;

// Deterministic values in [-1, 1) (no ties, so top_k and clip are differentiable there).
Array Random(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = scale * (static_cast<float>(s % 20001) / 10000.0f - 1.0f);
  }
  return Array::FromData(shape, DType::kFloat32, std::move(v));
}

double Dot(const Array& a, const Array& b) {
  REQUIRE(a.shape == b.shape);
  double sum = 0;
  for (size_t i = 0; i < a.values().size(); ++i)
    sum += static_cast<double>(a.values()[i]) * b.values()[i];
  return sum;
}

// sum(f(x) * g) with x[which] moved by t * d.
double Loss(const Fn& f, std::vector<Array> x, size_t which, const Array& d, double t,
            const Array& g) {
  const std::vector<float>& base = x[which].values();
  std::vector<float> moved(base.size());
  for (size_t i = 0; i < base.size(); ++i)
    moved[i] = static_cast<float>(base[i] + t * d.values()[i]);
  x[which] = Array::FromData(x[which].shape, x[which].dtype, std::move(moved));
  return Dot(f(x), g);
}

// Checks `cotangent` (the rule's answer for input `which` at cotangent g) against the
// central difference of f along a random direction.
void CheckAgainstDifferences(const Fn& f, const std::vector<Array>& x, size_t which, const Array& g,
                             const Array& cotangent, double eps = 1e-2) {
  REQUIRE(cotangent.shape == x[which].shape);
  const Array d = Random(x[which].shape, 77 + which);
  const double numeric = (Loss(f, x, which, d, eps, g) - Loss(f, x, which, d, -eps, g)) / (2 * eps);
  const double analytic = Dot(cotangent, d);
  INFO("input " << which << ": finite differences " << numeric << ", vjp " << analytic);
  CHECK(std::fabs(numeric - analytic) <= 2e-3 * (1.0 + std::fabs(numeric)));
}

}  // namespace

TEST_CASE("vjp: elementwise arithmetic with broadcasting", "[numeric][vjp]") {
  const std::vector<Array> x = {Random({2, 3, 4}, 1),
                                Add(Random({3, 1}, 2), Scalar(2.5f, DType::kFloat32))};
  const Array g = Random({2, 3, 4}, 3);
  const auto check = [&](const Fn& f, const std::pair<Array, Array>& vjp) {
    CheckAgainstDifferences(f, x, 0, g, vjp.first);
    CheckAgainstDifferences(f, x, 1, g, vjp.second);
  };
  check([](const std::vector<Array>& a) { return Add(a[0], a[1]); }, AddVjp(x[0], x[1], g));
  check([](const std::vector<Array>& a) { return Sub(a[0], a[1]); }, SubVjp(x[0], x[1], g));
  check([](const std::vector<Array>& a) { return Mul(a[0], a[1]); }, MulVjp(x[0], x[1], g));
  check([](const std::vector<Array>& a) { return Div(a[0], a[1]); }, DivVjp(x[0], x[1], g));
  const Array cond = Greater(Random({2, 3, 4}, 4), Scalar(0, DType::kFloat32));
  const auto [wa, wb] = WhereVjp(cond, x[0], x[1], g);
  check([&](const std::vector<Array>& a) { return Where(cond, a[0], a[1]); }, {wa, wb});
  // Broadcast operands get the cotangent summed back to their own shape.
  CHECK(SumToShape(Random({2, 3, 4}, 5), {3, 1}, DType::kFloat32).shape == Shape{3, 1});
}

TEST_CASE("vjp: activations, softmax, clip and casts", "[numeric][vjp]") {
  const std::vector<Array> x = {Random({3, 5}, 11, 2.0f)};
  const Array g = Random({3, 5}, 12);
  for (const std::string name :
       {"linear", "silu", "sigmoid", "relu", "gelu", "tanh", "softplus", "sqrtsoftplus", "elu",
        "leaky_relu", "log_sigmoid", "soft_sign", "selu", "celu"}) {
    INFO(name);
    CheckAgainstDifferences([&](const std::vector<Array>& a) { return Activation(name, a[0]); }, x,
                            0, g, ActivationVjp(name, x[0], g), 1e-3);
  }
  CheckAgainstDifferences([](const std::vector<Array>& a) { return Softmax(a[0], -1); }, x, 0, g,
                          SoftmaxVjp(Softmax(x[0], -1), g, -1));
  CheckAgainstDifferences([](const std::vector<Array>& a) { return Softmax(a[0], 0); }, x, 0, g,
                          SoftmaxVjp(Softmax(x[0], 0), g, 0));
  CheckAgainstDifferences([](const std::vector<Array>& a) { return Clip(a[0], -0.5f, 0.7f); }, x, 0,
                          g, ClipVjp(x[0], -0.5f, 0.7f, g), 1e-4);
  CheckAgainstDifferences(
      [](const std::vector<Array>& a) { return Clip(a[0], std::nullopt, 0.7f); }, x, 0, g,
      ClipVjp(x[0], std::nullopt, 0.7f, g), 1e-4);
  // A bfloat16 operand's cotangent is rounded to bfloat16.
  const Array bf = Cast(x[0], DType::kBfloat16);
  const Array cg = CastVjp(bf, g);
  CHECK(cg.dtype == DType::kBfloat16);
  CHECK(cg.values() == Cast(g, DType::kBfloat16).values());
}

TEST_CASE("vjp: reductions and einsums", "[numeric][vjp]") {
  const std::vector<Array> x = {Random({2, 3, 4}, 21), Random({4, 5}, 22)};
  CheckAgainstDifferences([](const std::vector<Array>& a) { return Sum(a[0], 1, false); }, x, 0,
                          Random({2, 4}, 23), SumVjp(x[0], {1}, false, Random({2, 4}, 23)));
  CheckAgainstDifferences([](const std::vector<Array>& a) { return Mean(a[0], -1, true); }, x, 0,
                          Random({2, 3, 1}, 24), MeanVjp(x[0], {-1}, true, Random({2, 3, 1}, 24)));
  const ParsedEinsum mm = ParseEinsum("BSM,ME->BSE");
  const Array g = Random({2, 3, 5}, 25);
  const auto [da, db] = EinsumVjp(mm, x[0], x[1], g);
  const Fn f = [&](const std::vector<Array>& a) { return Einsum(mm, a[0], a[1], DType::kFloat32); };
  CheckAgainstDifferences(f, x, 0, g, da);
  CheckAgainstDifferences(f, x, 1, g, db);
  // A letter only one operand has and the output lacks (summed away alone): 'S' in a, 'X' in b.
  const ParsedEinsum odd = ParseEinsum("BSM,MX->BM");
  const std::vector<Array> y = {Random({2, 3, 4}, 26), Random({4, 6}, 27)};
  const Array gy = Random({2, 4}, 28);
  const auto [oa, ob] = EinsumVjp(odd, y[0], y[1], gy);
  const Fn fo = [&](const std::vector<Array>& a) {
    return Einsum(odd, a[0], a[1], DType::kFloat32);
  };
  CheckAgainstDifferences(fo, y, 0, gy, oa);
  CheckAgainstDifferences(fo, y, 1, gy, ob);
  const ParsedEinsum one = ParseEinsum("BSM->MB");
  const Array g1 = Random({4, 2}, 29);
  CheckAgainstDifferences(
      [&](const std::vector<Array>& a) { return Einsum(one, a[0], DType::kFloat32); }, x, 0, g1,
      EinsumVjp(one, x[0], g1));
}

TEST_CASE("vjp: ragged_dot", "[numeric][vjp]") {
  // 7 rows in groups 3, 0, 2 (the last 2 rows belong to no group), K=4, O=5.
  const std::vector<Array> x = {Random({7, 4}, 31), Random({3, 4, 5}, 32)};
  const Array sizes = Array::FromData({3}, DType::kInt32, {3, 0, 2});
  const Array g = Random({7, 5}, 33);
  const auto [dl, dr] = RaggedDotVjp(x[0], x[1], sizes, g);
  const Fn f = [&](const std::vector<Array>& a) {
    return RaggedDot(a[0], a[1], sizes, DType::kFloat32);
  };
  CheckAgainstDifferences(f, x, 0, g, dl);
  CheckAgainstDifferences(f, x, 1, g, dr);
  for (int64_t i = 5 * 4; i < 7 * 4; ++i) CHECK(dl.values()[i] == 0.0f);  // rows past the groups
}

TEST_CASE("vjp: selections replayed on positions", "[numeric][vjp]") {
  const std::vector<Array> x = {Random({2, 3, 4}, 41)};
  const Array idx = Array::FromData({2, 3, 2}, DType::kInt32, {3, 1, 0, 0, 2, 3, 1, 1, 0, 2, 3, 0});
  int which = 0;
  const auto check = [&](const std::function<Array(const Array&)>& select) {
    INFO("selection " << which++);
    const Array out = select(x[0]);
    const Array g = Random(out.shape, 42);
    CheckAgainstDifferences([&](const std::vector<Array>& a) { return select(a[0]); }, x, 0, g,
                            SelectionVjp(select, x[0].shape, x[0].dtype, g));
  };
  check([&](const Array& a) { return TakeAlongAxis(a, idx, -1); });  // repeats add up
  {
    // top_k on values 0.1 apart, so the finite differences do not change the choice.
    std::vector<float> spaced(24);
    for (size_t i = 0; i < spaced.size(); ++i) spaced[i] = static_cast<float>((i * 7) % 24) / 10.0f;
    const std::vector<Array> y = {Array::FromData({2, 3, 4}, DType::kFloat32, spaced)};
    const Array g = Random({2, 3, 2}, 43);
    const auto top = [](const Array& a) { return TopK(a, 2); };
    CheckAgainstDifferences(
        [&](const std::vector<Array>& a) { return top(a[0]).values; }, y, 0, g,
        SelectionVjp([&](const Array& p) { return TakeAlongAxis(p, top(y[0]).indices, -1); },
                     y[0].shape, y[0].dtype, g));
  }
  check([&](const Array& a) { return Take(a, Array::FromData({3}, DType::kInt32, {2, 0, 2}), 1); });
  check([](const Array& a) { return Transpose(a, {2, 0, 1}); });
  check([](const Array& a) { return Slice(a, 2, 1, 2); });
  check([](const Array& a) { return Repeat(a, 2, 1); });
  check([](const Array& a) {
    return Repeat(Reshape(a, {6, 4}), Array::FromData({6}, DType::kInt32, {1, 0, 3, 2, 0, 1}), 0,
                  8);
  });
  check([](const Array& a) { return BroadcastTo(Reshape(a, {2, 1, 3, 4}), {2, 5, 3, 4}); });
}

TEST_CASE("tape: reverse pass adds fan-out and names a missing rule", "[numeric][vjp]") {
  // y = x * x (as two reads of x), z = 3 * y: dz/dx = 6x.
  const Array x = Array::FromData({2}, DType::kFloat32, {1.5f, -2.0f});
  Tape tape;
  tape.AddLeaf(0);
  tape.Record(
      {0, 0}, {1},
      [&](const std::vector<Shards>& g) {
        const auto [a, b] = MulVjp(x, x, g[0][0]);
        return std::vector<Shards>{{a}, {b}};
      },
      "mul");
  tape.Record(
      {1}, {2},
      [](const std::vector<Shards>& g) {
        return std::vector<Shards>{{Mul(g[0][0], Scalar(3, DType::kFloat32))}};
      },
      "scale");
  CHECK(tape.Tracks(2));
  CHECK_FALSE(tape.Tracks(7));
  const std::map<int, Shards> grads =
      tape.Backward({{2, {Array::Filled({2}, DType::kFloat32, 1.0f)}}}, {0});
  REQUIRE(grads.contains(0));
  CHECK(grads.at(0)[0].values() == std::vector<float>{9.0f, -12.0f});
  tape.Record({2}, {3}, nullptr, "opaque op in scope s");
  CHECK_THROWS_WITH(tape.Backward({{3, {Array::Filled({2}, DType::kFloat32, 1.0f)}}}, {0}),
                    Catch::Contains("opaque op in scope s"));
  // No cotangent reaches a rule-less op that nothing downstream of the seeds reads.
  CHECK(tape.Backward({{2, {Array::Filled({2}, DType::kFloat32, 1.0f)}}}, {0}).contains(0));
}

}  // namespace shardtrace
