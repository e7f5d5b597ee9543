#include "paths/masked_loop.h"

#include <fmt/format.h>

#include "paths/dense_matmul.h"
#include "paths/routing.h"
#include "paths/traced_ops.h"

namespace shardtrace {

namespace tr = traced;
using Args = std::vector<const Array*>;

PathOutput MaskedLoop(const MoeContext& ctx, const Value& inputs, const Value& gate_logits,
                      const std::optional<Value>& pre_bias_logits, const ExpertKernels& k) {
  Tracer& t = ctx.t;
  const MoeSetup& s = ctx.setup;
  const auto scope = t.Scope("masked_loop");
  const TopKOutput top = GetTopK(ctx, gate_logits, pre_bias_logits);
  ctx.Capture(Capture::kTopKWeights, top.weights.array());
  ctx.Capture(Capture::kTopKIndices, top.indices.array());
  t.trace().top_k_indices = top.indices.tensor;
  const Value gating = ReshapeAndUpdateWeights(ctx, top.weights, top.indices);  // [B,S,E]
  ctx.Capture(Capture::kWeights, gating.array());  // as dense_matmul's dropless weights
  const DType acc = ctx.settings().float32_weight_sum ? DType::kFloat32 : s.dtype;
  Value final_output = tr::Zeros(t, inputs.shape(), acc, {"final_output", "BSM"});
  for (int64_t e = 0; e < s.num_experts; ++e) {
    const auto expert = t.Iteration("expert", e, s.num_experts);
    auto row = [&](const Value& w, const char* name, const char* dims) {
      return t.Apply(
          {OpKind::kIndex, "", {{"expr", fmt::format("{}[{}]", name, e)}}}, {&w},
          {name, dims, TensorKind::kWeight},
          [&](const Args& a) {  // a kernel slice
            Shape shape(a[0]->shape.begin() + 1, a[0]->shape.end());
            return Reshape(Slice(*a[0], 0, e, 1), shape);
          },
          [e](const Args& a, const Args&, const Args& g) {
            const Shape shape(a[0]->shape.begin() + 1, a[0]->shape.end());
            return std::vector<Array>{
                SelectionVjp([&](const Array& p) { return Reshape(Slice(p, 0, e, 1), shape); },
                             a[0]->shape, a[0]->dtype, *g[0])};
          });
    };
    const Value w0 = row(k.w0, "w0_kernel", "MH"), w1 = row(k.w1, "w1_kernel", "MH"),
                wo = row(k.wo, "wo_kernel", "HM");
    Value h0 = tr::Einsum(t, "BSM,MH -> BSH", inputs, w0, s.dtype, {"layer_w0", "BSH"});
    Value h1 = tr::Einsum(t, "BSM,MH -> BSH", inputs, w1, s.dtype, {"layer_w1", "BSH"});
    if (k.w0_bias) {
      h0 = tr::Binary(t, OpKind::kAdd, h0, row(*k.w0_bias, "w0_bias", "H"), {"layer_w0", "BSH"});
      h1 = tr::Binary(t, OpKind::kAdd, h1, row(*k.w1_bias, "w1_bias", "H"), {"layer_w1", "BSH"});
    }
    const Value act = ApplyFfnActivation(ctx, h0, h1);
    Value y = tr::Einsum(t, "BSH,HM -> BSM", act, wo, s.dtype, {"expert_output", "BSM"});
    if (k.wo_bias)
      y = tr::Binary(t, OpKind::kAdd, y, row(*k.wo_bias, "wo_bias", "M"), {"expert_output", "BSM"});
    // expert_mask = any(top_k_indices == e, -1); weight = weights[..., e] (the [B,S,E] routing
    // weights, the port's gating); both [B,S,1].
    const Value scale = t.Apply(
        {OpKind::kMaskedWeight,
         "",
         {{"expr", fmt::format("weights[..., {0}] * any(top_k_indices == {0}, -1)", e)}}},
        {&gating, &top.indices}, {"weighted_mask", "BS1"},
        [&](const Args& a) {
          const Shape bs1 = {a[0]->shape[0], a[0]->shape[1], 1};
          const Array g = Reshape(Slice(*a[0], 2, e, 1), bs1);
          const Array hit =
              Sum(Equal(*a[1], Scalar(static_cast<float>(e), DType::kInt32)), 2, true);
          return Cast(Mul(Cast(g, acc), Cast(Greater(hit, Scalar(0, DType::kInt32)), acc)), acc);
        },
        // weights[..., e] where the token chose e: the cotangent goes back to column e there.
        [e](const Args& a, const Args&, const Args& g) {
          const Shape bs1 = {a[0]->shape[0], a[0]->shape[1], 1};
          const Array hit =
              Sum(Equal(*a[1], Scalar(static_cast<float>(e), DType::kInt32)), 2, true);
          const Array masked = Mul(Cast(*g[0], DType::kFloat32),
                                   Cast(Greater(hit, Scalar(0, DType::kInt32)), DType::kFloat32));
          return std::vector<Array>{
              SelectionVjp([&](const Array& p) { return Reshape(Slice(p, 2, e, 1), bs1); },
                           a[0]->shape, a[0]->dtype, masked),
              Array{}};
        });
    const Value masked = tr::Binary(t, OpKind::kMul, tr::Cast(t, y, acc, {"expert_output", "BSM"}),
                                    scale, {"masked_output", "BSM"});
    final_output = tr::Binary(t, OpKind::kAdd, final_output, masked, {"final_output", "BSM"});
  }
  PathOutput out;
  out.output = tr::Cast(t, final_output, s.dtype, {"output", "BSM"});
  return out;
}

}  // namespace shardtrace
