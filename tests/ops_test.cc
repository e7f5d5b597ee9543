// Hand-computed cases for every op in numeric/ops.h: numpy/jax semantics (broadcasting,
// tie-breaking, out-of-range handling), dtype rules, error messages and symbolic mode.
#include "numeric/ops.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace shardtrace {
namespace {

Array F32(const Shape& shape, std::vector<float> values) {
  return Array::FromData(shape, DType::kFloat32, std::move(values));
}

Array I32(const Shape& shape, std::vector<float> values) {
  return Array::FromData(shape, DType::kInt32, std::move(values));
}

using Values = std::vector<float>;

}  // namespace

// ---------------------------------------------------------------------------- elementwise

TEST_CASE("elementwise ops broadcast like numpy", "[numeric][ops]") {
  const Array a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Array row = F32({3}, {10, 20, 30});
  const Array col = F32({2, 1}, {100, 200});
  CHECK(Add(a, row).values() == Values{11, 22, 33, 14, 25, 36});
  CHECK(Add(col, row).shape == Shape{2, 3});
  CHECK(Add(col, row).values() == Values{110, 120, 130, 210, 220, 230});
  CHECK(Sub(a, Scalar(1, DType::kFloat32)).values() == Values{0, 1, 2, 3, 4, 5});
  CHECK(Mul(a, col).values() == Values{100, 200, 300, 800, 1000, 1200});
  CHECK(Div(a, Scalar(2, DType::kFloat32)).values() == Values{0.5f, 1, 1.5f, 2, 2.5f, 3});
  CHECK(Maximum(a, Scalar(3, DType::kFloat32)).values() == Values{3, 3, 3, 4, 5, 6});
  CHECK(Minimum(a, Scalar(3, DType::kFloat32)).values() == Values{1, 2, 3, 3, 3, 3});
  CHECK(std::isnan(Maximum(F32({1}, {NAN}), F32({1}, {1})).values()[0]));
  CHECK_THROWS_WITH(
      Add(a, F32({2}, {1, 2})),
      Catch::Contains("add: shapes [2,3] and [2] do not broadcast: dim -1 is 3 vs 2"));
  CHECK_THROWS_WITH(Where(F32({4}, {1, 0, 1, 0}), a, a), Catch::Contains("where:"));
}

TEST_CASE("elementwise dtype promotion", "[numeric][ops]") {
  CHECK(PromoteTypes(DType::kBfloat16, DType::kBfloat16) == DType::kBfloat16);
  CHECK(PromoteTypes(DType::kBfloat16, DType::kFloat32) == DType::kFloat32);
  CHECK(PromoteTypes(DType::kBfloat16, DType::kFloat16) == DType::kFloat32);
  CHECK(PromoteTypes(DType::kInt32, DType::kBfloat16) == DType::kBfloat16);
  CHECK(PromoteTypes(DType::kBool, DType::kInt32) == DType::kInt32);
  // int32 * bool stays int32 (moe.py's expert_mask * less_equal(...)).
  const Array mask = I32({3}, {1, 1, 1});
  const Array keep = LessEqual(I32({3}, {1, 2, 3}), Scalar(2, DType::kInt32));
  CHECK(keep.dtype == DType::kBool);
  CHECK(Mul(mask, keep).dtype == DType::kInt32);
  CHECK(Mul(mask, keep).values() == Values{1, 1, 0});
  // True division of ints is float32; floor_divide and mod follow Python signs.
  CHECK(Div(I32({2}, {1, 3}), I32({2}, {2, 2})).dtype == DType::kFloat32);
  CHECK(Div(I32({2}, {1, 3}), I32({2}, {2, 2})).values() == Values{0.5f, 1.5f});
  CHECK(FloorDivide(I32({4}, {7, -7, 7, -7}), I32({4}, {2, 2, -2, -2})).values() ==
        Values{3, -4, -4, 3});
  CHECK(Mod(I32({4}, {7, -7, 7, -7}), I32({4}, {2, 2, -2, -2})).values() == Values{1, 1, -1, -1});
  CHECK(Mod(I32({1}, {5}), I32({1}, {4})).dtype == DType::kInt32);
  // bfloat16 arithmetic rounds each result: 1 + 2^-8 ties to even (1.0).
  const Array one = Array::FromData({1}, DType::kBfloat16, {1.0f});
  CHECK(Add(one, Scalar(0.00390625f, DType::kBfloat16)).values() == Values{1.0f});
}

TEST_CASE("comparisons, logic and where", "[numeric][ops]") {
  const Array a = F32({4}, {1, 2, 3, 4});
  const Array b = F32({4}, {4, 2, 2, 4});
  CHECK(Greater(a, b).values() == Values{0, 0, 1, 0});
  CHECK(GreaterEqual(a, b).values() == Values{0, 1, 1, 1});
  CHECK(Less(a, b).values() == Values{1, 0, 0, 0});
  CHECK(LessEqual(a, b).values() == Values{1, 1, 0, 1});
  CHECK(Equal(a, b).values() == Values{0, 1, 0, 1});
  CHECK(NotEqual(a, b).values() == Values{1, 0, 1, 0});
  CHECK(Equal(a, b).dtype == DType::kBool);
  CHECK(LogicalAnd(F32({4}, {0, 1, 2, 0}), F32({4}, {1, 1, 0, 0})).values() == Values{0, 1, 0, 0});
  // jnp.where(mask > 0, logits, -inf) with a broadcast scalar.
  const Array w = Where(Greater(F32({3}, {1, 0, 1}), Scalar(0, DType::kFloat32)),
                        F32({2, 3}, {1, 2, 3, 4, 5, 6}), Scalar(-INFINITY, DType::kFloat32));
  CHECK(w.shape == Shape{2, 3});
  CHECK(w.values() == Values{1, -INFINITY, 3, 4, -INFINITY, 6});
  const Array sym = Where(Array::Symbolic({2, 3}, DType::kBool), Scalar(1, DType::kInt32),
                          Scalar(0, DType::kInt32));
  CHECK_FALSE(sym.numeric());
  CHECK(sym.shape == Shape{2, 3});
}

TEST_CASE("unary ops", "[numeric][ops]") {
  const Array a = F32({4}, {-2, -0.5f, 0, 4});
  CHECK(Neg(a).values() == Values{2, 0.5f, 0, -4});
  CHECK(Abs(a).values() == Values{2, 0.5f, 0, 4});
  CHECK(Sign(a).values() == Values{-1, -1, 0, 1});
  CHECK(Sqrt(F32({2}, {4, 9})).values() == Values{2, 3});
  CHECK(Exp(F32({1}, {0})).values() == Values{1});
  CHECK(Log(F32({1}, {1})).values() == Values{0});
  CHECK(Exp(I32({1}, {0})).dtype == DType::kFloat32);
  CHECK(Sign(I32({3}, {-5, 0, 7})).dtype == DType::kInt32);
}

TEST_CASE("Cast rounds to bfloat16 and truncates to int32", "[numeric][ops]") {
  const Array x = F32({4}, {1.00390625f, 1.01171875f, -1.01171875f, 3.0f});
  const Array bf = Cast(x, DType::kBfloat16);
  CHECK(bf.dtype == DType::kBfloat16);
  CHECK(bf.values() == Values{1.0f, 1.015625f, -1.015625f, 3.0f});
  CHECK(Cast(F32({4}, {1.7f, -1.7f, 2.5f, NAN}), DType::kInt32).values() == Values{1, -1, 2, 0});
  CHECK(Cast(F32({3}, {0.0f, 0.5f, -2.0f}), DType::kBool).values() == Values{0, 1, 1});
  CHECK_FALSE(
      Cast(Array::Symbolic({256, 7168, 2048}, DType::kFloat32), DType::kBfloat16).numeric());
}

TEST_CASE("Clip with optional bounds", "[numeric][ops]") {
  const Array x = F32({5}, {-9, -1, 0, 1, 9});
  CHECK(Clip(x, -2.0f, 2.0f).values() == Values{-2, -1, 0, 1, 2});
  CHECK(Clip(x, std::nullopt, 0.5f).values() == Values{-9, -1, 0, 0.5f, 0.5f});
  CHECK(Clip(x, 0.0f, std::nullopt).values() == Values{0, 0, 0, 1, 9});
  CHECK(Clip(x, 3.0f, 1.0f).values() == Values{1, 1, 1, 1, 1});  // jnp: hi wins
}

// ---------------------------------------------------------------------------- activations

TEST_CASE("activations by MaxText name", "[numeric][ops]") {
  const auto at = [](std::string_view name, float x) {
    return Activation(name, F32({1}, {x})).values()[0];
  };
  CHECK(at("gelu", 1.0f) == Approx(0.8411920f).epsilon(1e-6));
  CHECK(at("gelu", -1.0f) == Approx(-0.1588080f).epsilon(1e-5));
  CHECK(at("linear", -3.5f) == -3.5f);
  CHECK(at("silu", 1.0f) == Approx(0.7310586f));
  CHECK(at("swish", 1.0f) == at("silu", 1.0f));
  CHECK(at("sigmoid", 0.0f) == 0.5f);
  CHECK(at("relu", -1.0f) == 0.0f);
  CHECK(at("relu", 2.0f) == 2.0f);
  CHECK(at("tanh", 0.5f) == Approx(std::tanh(0.5f)));
  CHECK(at("softplus", 0.0f) == Approx(std::log(2.0f)));
  CHECK(at("softplus", 100.0f) == 100.0f);
  CHECK(at("elu", -1.0f) == Approx(std::exp(-1.0f) - 1.0f));
  CHECK(at("leaky_relu", -2.0f) == Approx(-0.02f));
  CHECK(at("relu6", 7.0f) == 6.0f);
  CHECK(at("hard_sigmoid", 0.0f) == 0.5f);
  CHECK(at("hard_sigmoid", 4.0f) == 1.0f);
  CHECK(at("log_sigmoid", 0.0f) == Approx(-std::log(2.0f)));
  CHECK(at("soft_sign", 3.0f) == 0.75f);
  CHECK(at("selu", 1.0f) == Approx(1.0507009873554805f));
  CHECK(at("selu", -1.0f) ==
        Approx(1.0507009873554805f * 1.6732632423543772f * (std::exp(-1.0f) - 1)));
  CHECK(at("celu", -1.0f) == Approx(std::exp(-1.0f) - 1.0f));
  // DeepSeek-V4's router score, sqrt(softplus(x)): sqrt(log 2) at 0.
  CHECK(at("sqrtsoftplus", 0.0f) == Approx(std::sqrt(std::log(2.0f))));
  CHECK(at("sqrtsoftplus", 100.0f) == 10.0f);
  CHECK(ActivationNames().size() == 17);
}

TEST_CASE("activation keeps bfloat16 and rejects unknown names", "[numeric][ops]") {
  const Array x = Array::FromData({1}, DType::kBfloat16, {1.0f});
  const Array y = Activation("gelu", x);
  CHECK(y.dtype == DType::kBfloat16);
  CHECK(y.values()[0] == 0.83984375f);  // bf16 nearest to 0.841192
  CHECK_THROWS_WITH(Activation("gelu_new", x),
                    Catch::Contains("activation 'gelu_new'") &&
                        Catch::Contains("valid names: linear, silu, swish, sigmoid, relu, gelu"));
  CHECK_FALSE(Activation("silu", Array::Symbolic({2, 4}, DType::kBfloat16)).numeric());
}

TEST_CASE("Softmax and Sigmoid", "[numeric][ops]") {
  const Array s = Softmax(F32({2, 3}, {1, 2, 3, 1000, 1000, 1000}), -1);
  const float e1 = std::exp(-2.0f);
  const float e2 = std::exp(-1.0f);
  const float total = e1 + e2 + 1.0f;
  CHECK(s.values()[0] == Approx(e1 / total));
  CHECK(s.values()[1] == Approx(e2 / total));
  CHECK(s.values()[2] == Approx(1.0f / total));
  // Max-subtraction keeps large logits finite.
  CHECK(s.values()[3] == Approx(1.0f / 3.0f));
  const Array col = Softmax(F32({2, 2}, {0, 5, 0, 5}), 0);
  CHECK(col.values() == Values{0.5f, 0.5f, 0.5f, 0.5f});
  CHECK(Softmax(Array::FromData({2}, DType::kBfloat16, {0, 0})).dtype == DType::kBfloat16);
  CHECK_THROWS_WITH(Softmax(F32({2}, {0, 0}), 1),
                    Catch::Contains("softmax: axis 1 is out of range for shape [2]"));
  CHECK(Sigmoid(F32({3}, {0, 100, -100})).values() == Values{0.5f, 1.0f, 0.0f});
}

// ---------------------------------------------------------------------------- reductions

TEST_CASE("Sum, Mean, Max over axes", "[numeric][ops]") {
  const Array a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(Sum(a, 1).values() == Values{6, 15});
  CHECK(Sum(a, -1, true).shape == Shape{2, 1});
  CHECK(Sum(a, 0).values() == Values{5, 7, 9});
  CHECK(Sum(a, std::vector<int64_t>{0, 1}).values() == Values{21});
  CHECK(Sum(a).shape == Shape{});
  CHECK(Sum(a, std::vector<int64_t>{}).values() == a.values());
  CHECK(Mean(a, 1).values() == Values{2, 5});
  CHECK(Mean(a).values() == Values{3.5f});
  CHECK(Max(a, 0).values() == Values{4, 5, 6});
  CHECK(Max(a).values() == Values{6});
  CHECK(Max(a, 1, true).shape == Shape{2, 1});
  const Array b = Array::FromData({2, 2}, DType::kBool, {1, 0, 1, 1});
  CHECK(Sum(b, 1).dtype == DType::kInt32);
  CHECK(Sum(b, 1).values() == Values{1, 2});
  CHECK(Mean(I32({2}, {1, 2})).dtype == DType::kFloat32);
  CHECK(Mean(I32({2}, {1, 2})).values() == Values{1.5f});
  CHECK_THROWS_WITH(Sum(a, 2), Catch::Contains("sum: axis 2 is out of range for shape [2,3]"));
  CHECK_THROWS_WITH(Sum(a, std::vector<int64_t>{1, -1}),
                    Catch::Contains("sum: axis -1 is repeated"));
  CHECK_THROWS_WITH(Max(F32({2, 0}, {}), 1), Catch::Contains("max:"));
  const Array sym = Sum(Array::Symbolic({256, 7168, 2048}, DType::kBfloat16), 1);
  CHECK_FALSE(sym.numeric());
  CHECK(sym.shape == Shape{256, 2048});
}

TEST_CASE("Cumsum is inclusive (moe.py's expert_token_count example)", "[numeric][ops]") {
  // expert_mask [[1,0,0,0],[0,1,0,0],[0,1,0,0],[0,0,0,1]] fused over tokens -> cumsum axis 0.
  const Array mask = I32({4, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1});
  const Array count = Cumsum(mask, 0);
  CHECK(count.dtype == DType::kInt32);
  CHECK(count.values() == Values{1, 0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 1, 2, 0, 1});
  CHECK(Cumsum(F32({3}, {1, 2, 3}), -1).values() == Values{1, 3, 6});
  CHECK(Cumsum(Array::FromData({2}, DType::kBool, {1, 1}), 0).dtype == DType::kInt32);
  CHECK(Cumsum(F32({2}, {1, 2}), 0, DType::kInt32).dtype == DType::kInt32);
}

// ---------------------------------------------------------------------------- sorting

TEST_CASE("TopK breaks ties toward the lower index", "[numeric][ops]") {
  const TopKResult r = TopK(F32({4}, {1, 3, 3, 2}), 2);
  CHECK(r.values.values() == Values{3, 3});
  CHECK(r.indices.values() == Values{1, 2});
  CHECK(r.indices.dtype == DType::kInt32);
  const TopKResult rows = TopK(F32({2, 4}, {0, 0, 0, 0, 5, -1, 7, 5}), 3);
  CHECK(rows.values.shape == Shape{2, 3});
  CHECK(rows.indices.values() == Values{0, 1, 2, 2, 0, 3});
  CHECK(rows.values.values() == Values{0, 0, 0, 7, 5, 5});
  const TopKResult masked = TopK(F32({3}, {-INFINITY, 1, -INFINITY}), 2);
  CHECK(masked.indices.values() == Values{1, 0});
  CHECK_THROWS_WITH(TopK(F32({4}, {1, 2, 3, 4}), 5),
                    Catch::Contains("top_k: k=5 is out of range for shape [4]"));
  const TopKResult sym = TopK(Array::Symbolic({8, 4096, 256}, DType::kFloat32), 8);
  CHECK_FALSE(sym.values.numeric());
  CHECK(sym.indices.shape == Shape{8, 4096, 8});
  CHECK(sym.indices.dtype == DType::kInt32);
}

TEST_CASE("ArgsortStable keeps duplicates in order", "[numeric][ops]") {
  const Array x = I32({6}, {2, 1, 2, 1, 0, 2});
  CHECK(ArgsortStable(x).values() == Values{4, 1, 3, 0, 2, 5});
  CHECK(ArgsortStable(x).dtype == DType::kInt32);
  CHECK(SortStable(x).values() == Values{0, 1, 1, 2, 2, 2});
  const Array m = F32({2, 2}, {3, 1, 1, 1});
  CHECK(ArgsortStable(m, 0).values() == Values{1, 0, 0, 1});
  CHECK(SortStable(m, 0).values() == Values{1, 1, 3, 1});
  CHECK(ArgsortStable(F32({3}, {NAN, 1, 0})).values() == Values{2, 1, 0});
  // argsort(argsort(p)) inverts the permutation, as moe.py's unpermute relies on.
  const Array perm = ArgsortStable(x);
  CHECK(ArgsortStable(perm).values() == Values{3, 1, 4, 2, 0, 5});
}

// ---------------------------------------------------------------------------- shapes

TEST_CASE("Reshape, Transpose, Slice, Concat, Pad, BroadcastTo", "[numeric][ops]") {
  const Array a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(Reshape(a, {3, -1}).shape == Shape{3, 2});
  CHECK(Reshape(a, {-1}).values() == a.values());
  CHECK_THROWS_WITH(Reshape(a, {4, -1}), Catch::Contains("reshape: [2,3] (6 elements) to [4,-1]"));
  CHECK_THROWS_WITH(Reshape(a, {4, 2}), Catch::Contains("sizes differ"));
  CHECK_THROWS_WITH(Reshape(a, {-1, -1}), Catch::Contains("more than one -1"));
  CHECK(Transpose(a, {1, 0}).values() == Values{1, 4, 2, 5, 3, 6});
  CHECK(Transpose(a, {1, 0}).shape == Shape{3, 2});
  CHECK_THROWS_WITH(Transpose(a, {0, 0}), Catch::Contains("transpose: permutation [0,0]"));
  CHECK(Slice(a, -1, 1, 2).values() == Values{2, 3, 5, 6});
  CHECK(Slice(a, 0, 1, 1).values() == Values{4, 5, 6});
  CHECK_THROWS_WITH(Slice(a, 1, 2, 2),
                    Catch::Contains("slice: [2, 4) of axis 1 is outside shape [2,3]"));
  const Array c = Concat({a, F32({2, 1}, {7, 8})}, 1);
  CHECK(c.shape == Shape{2, 4});
  CHECK(c.values() == Values{1, 2, 3, 7, 4, 5, 6, 8});
  CHECK(Concat({I32({1}, {0}), I32({2}, {1, 2})}, 0).values() == Values{0, 1, 2});
  CHECK_THROWS_WITH(Concat({a, F32({1, 2}, {0, 0})}, 0),
                    Catch::Contains("concatenate: array 1 has shape [1,2] but array 0 has [2,3]"));
  const Array p = Pad(a, 1, 1, 2, -1);
  CHECK(p.shape == Shape{2, 6});
  CHECK(p.values() == Values{-1, 1, 2, 3, -1, -1, -1, 4, 5, 6, -1, -1});
  CHECK(BroadcastTo(F32({2, 1}, {1, 2}), {3, 2, 2}).values() ==
        Values{1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2});
  CHECK_THROWS_AS(BroadcastTo(a, {3, 3}), Error);
  CHECK(Reshape(Array::Symbolic({256, 7168, 2048}, DType::kBfloat16), {256, -1}).shape ==
        Shape{256, 7168 * 2048});
}

// ---------------------------------------------------------------------------- indexing

TEST_CASE("OneHot appends a dim and zeroes out-of-range", "[numeric][ops]") {
  const Array oh = OneHot(I32({4}, {0, 2, 5, -1}), 3, DType::kInt32);
  CHECK(oh.shape == Shape{4, 3});
  CHECK(oh.values() == Values{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  CHECK(OneHot(Array::Symbolic({2, 8}, DType::kInt32), 256, DType::kFloat32).shape ==
        Shape{2, 8, 256});
}

TEST_CASE("TakeAlongAxis and Take", "[numeric][ops]") {
  const Array logits = F32({2, 4}, {10, 11, 12, 13, 20, 21, 22, 23});
  const Array idx = I32({2, 2}, {3, 0, 1, -1});
  CHECK(TakeAlongAxis(logits, idx, -1).values() == Values{13, 10, 21, 23});
  CHECK(TakeAlongAxis(logits, I32({1, 2}, {0, 2}), 1).values() == Values{10, 12, 20, 22});
  CHECK(TakeAlongAxis(logits, I32({1, 4}, {1, 0, 1, 0}), 0).values() == Values{20, 11, 22, 13});
  CHECK_THROWS_WITH(TakeAlongAxis(logits, I32({2, 1}, {4, 0}), 1),
                    Catch::Contains("take_along_axis: index 4") && Catch::Contains("shape [2,4]"));
  CHECK_THROWS_WITH(TakeAlongAxis(logits, F32({2, 1}, {0, 0}), 1),
                    Catch::Contains("take_along_axis: indices must be int32, got float32[2,1]"));
  CHECK_THROWS_WITH(TakeAlongAxis(logits, I32({3, 1}, {0, 0, 0}), 1),
                    Catch::Contains("does not broadcast"));
  const Array rows = Take(logits, I32({3}, {1, 0, 1}), 0);
  CHECK(rows.shape == Shape{3, 4});
  CHECK(rows.values() == Values{20, 21, 22, 23, 10, 11, 12, 13, 20, 21, 22, 23});
  const Array cols = Take(logits, I32({2, 1}, {3, 0}), 1);
  CHECK(cols.shape == Shape{2, 2, 1});
  CHECK(cols.values() == Values{13, 10, 23, 20});
}

TEST_CASE("PutAlongAxis scatters top-k weights into [B,S,E]", "[numeric][ops]") {
  // moe.py: zeros((B,S,E)).at[arange(B)[:,None,None], arange(S)[:,None], idx].set(w).
  const Array zeros = Array::Filled({1, 2, 4}, DType::kBfloat16, 0.0f);
  const Array idx = I32({1, 2, 2}, {2, 0, 1, 3});
  const Array w = F32({1, 2, 2}, {0.75f, 0.25f, 0.5f, 0.5f});
  const Array out = PutAlongAxis(zeros, idx, w, -1);
  CHECK(out.dtype == DType::kBfloat16);
  CHECK(out.values() == Values{0.25f, 0, 0.75f, 0, 0, 0.5f, 0, 0.5f});
  // Duplicates: last write wins.
  CHECK(PutAlongAxis(F32({3}, {0, 0, 0}), I32({2}, {1, 1}), F32({2}, {5, 6}), 0).values() ==
        Values{0, 6, 0});
  CHECK_FALSE(PutAlongAxis(Array::Symbolic({8, 4096, 256}, DType::kBfloat16),
                           Array::Symbolic({8, 4096, 8}, DType::kInt32),
                           Array::Symbolic({8, 4096, 8}, DType::kBfloat16), -1)
                  .numeric());
}

TEST_CASE("Repeat, Bincount, Arange", "[numeric][ops]") {
  const Array a = F32({2, 2}, {1, 2, 3, 4});
  CHECK(Repeat(a, 2, 0).values() == Values{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(Repeat(a, 2, 1).values() == Values{1, 1, 2, 2, 3, 3, 4, 4});
  CHECK(Repeat(a, 3, 0).shape == Shape{6, 2});
  // jnp.repeat(arange(4), [1,2,0,5], total_repeat_length=...) truncates and extends.
  const Array experts = Arange(4);
  const Array counts = I32({4}, {1, 2, 0, 5});
  CHECK(Repeat(experts, counts, 0, 8).values() == Values{0, 1, 1, 3, 3, 3, 3, 3});
  CHECK(Repeat(experts, counts, 0, 5).values() == Values{0, 1, 1, 3, 3});
  CHECK(Repeat(experts, counts, 0, 10).values() == Values{0, 1, 1, 3, 3, 3, 3, 3, 3, 3});
  CHECK(Repeat(experts, I32({4}, {1, 0, 0, 0}), 0, 3).values() == Values{0, 3, 3});
  CHECK_THROWS_WITH(Repeat(experts, I32({3}, {1, 1, 1}), 0, 3),
                    Catch::Contains("repeat: repeats shape [3] must be [4]"));
  const Array bins = Bincount(I32({7}, {0, 1, 1, 3, 4, 9, -2}), 4);
  CHECK(bins.dtype == DType::kInt32);
  CHECK(bins.values() == Values{2, 2, 0, 1});
  CHECK(Arange(4).values() == Values{0, 1, 2, 3});
  CHECK(Arange(3, DType::kFloat32).dtype == DType::kFloat32);
  CHECK(FullLike(Array::Symbolic({2, 2}, DType::kFloat32), 1.0f, DType::kInt32).shape ==
        Shape{2, 2});
  CHECK(FullLike(a, 1.5f, DType::kInt32).values() == Values{1, 1, 1, 1});
}

// ---------------------------------------------------------------------------- ragged_dot

TEST_CASE("RaggedDot matches a per-group matmul", "[numeric][ops]") {
  const int64_t n = 7, k = 3, o = 2, g = 3;
  std::vector<float> lv(n * k), rv(g * k * o);
  for (size_t i = 0; i < lv.size(); ++i) lv[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = static_cast<float>(static_cast<int>(i % 4) - 1);
  const Array lhs = F32({n, k}, lv);
  const Array rhs = F32({g, k, o}, rv);
  const std::vector<int64_t> sizes = {2, 0, 3};  // rows 5 and 6 are beyond the groups
  const Array out = RaggedDot(lhs, rhs, I32({g}, {2, 0, 3}), DType::kFloat32);
  CHECK(out.shape == Shape{n, o});
  std::vector<float> expected(n * o, 0.0f);
  int64_t row = 0;
  for (int64_t gi = 0; gi < g; ++gi) {
    for (int64_t r = row; r < row + sizes[gi]; ++r) {
      for (int64_t j = 0; j < o; ++j) {
        for (int64_t kk = 0; kk < k; ++kk) {
          expected[r * o + j] += lv[r * k + kk] * rv[(gi * k + kk) * o + j];
        }
      }
    }
    row += sizes[gi];
  }
  CHECK(out.values() == expected);
  CHECK(out.values()[5 * o] == 0.0f);
  CHECK(out.values()[6 * o + 1] == 0.0f);
  // Groups running past N are cut at N.
  CHECK(RaggedDot(lhs, rhs, I32({g}, {4, 4, 4}), DType::kFloat32).values().size() == n * o);
  CHECK_THROWS_WITH(RaggedDot(lhs, rhs, I32({2}, {1, 1}), DType::kFloat32),
                    Catch::Contains("ragged_dot: group_sizes has 2 groups but rhs has G=3"));
  CHECK_THROWS_WITH(RaggedDot(lhs, F32({g, 4, o}, std::vector<float>(g * 4 * o)),
                              I32({g}, {1, 1, 1}), DType::kFloat32),
                    Catch::Contains("ragged_dot: lhs dim K is 3 but rhs has 4"));
  const Array sym = RaggedDot(Array::Symbolic({32768, 7168}, DType::kBfloat16),
                              Array::Symbolic({256, 7168, 2048}, DType::kBfloat16),
                              Array::Symbolic({256}, DType::kInt32), DType::kBfloat16);
  CHECK_FALSE(sym.numeric());
  CHECK(sym.shape == Shape{32768, 2048});
}

}  // namespace shardtrace
