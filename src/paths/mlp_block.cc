#include "paths/mlp_block.h"

#include <fmt/format.h>

#include "config/moe_settings.h"
#include "paths/traced_ops.h"

namespace shardtrace {

namespace tr = traced;

namespace {

// fp8 storage: DenseGeneral's kernel_scale (a parameter sharded like its kernel on the dims
// with more than one block, replicated elsewhere; a scalar without weight_block_size), and
// the kernel dequantized with it to the input's dtype inside _compute_dot_general_nnx.
Value Dequantize(Tracer& t, const Value& kernel, const Array& scale, const LogicalAxes& axes,
                 const Out& out, DType dtype, const std::string& param) {
  const auto cond = t.Condition("weight_dtype == float8_e4m3fn");
  LogicalAxes scale_axes;
  for (size_t d = 0; d < scale.shape.size(); ++d)
    scale_axes.push_back(scale.shape[d] > 1 ? axes.at(d) : std::nullopt);
  const Value s = t.Weight({out.name + ".kernel_scale", scale.shape.empty() ? "" : "--"}, scale,
                           scale_axes, param);
  return tr::Dequantize(t, kernel, s, dtype, out);
}

}  // namespace

Value MlpBlock(Tracer& t, const MoeSettings& settings, const Value& inputs_in,
               const MlpParams& params, const std::string& scope, const std::string& param_prefix) {
  const auto sc = t.Scope(scope);
  t.SetDumpFile("linears");
  const DType dtype = settings.dtype;
  const std::vector<std::string>& activations = settings.mlp_activations;
  const LogicalAxes wi_axes = {"embed", "mlp"};
  const LogicalAxes wo_axes = {"mlp", "embed"};
  const Value inputs = tr::Cast(t, inputs_in, dtype, {"inputs", "BSM"});
  std::optional<Value> x;
  for (size_t i = 0; i < activations.size(); ++i) {
    const std::string name = activations.size() == 1 ? "wi" : fmt::format("wi_{}", i);
    const auto branch = t.Scope(name);
    const Value kernel =
        t.Weight({name, "MF"}, params.wi.at(i), wi_axes, fmt::format("{}wi_{}", param_prefix, i));
    const Value k = params.wi_scale.empty()
                        ? tr::Cast(t, kernel, dtype, {name, "MF"})
                        : Dequantize(t, kernel, params.wi_scale.at(i), wi_axes, {name, "MF"}, dtype,
                                     fmt::format("{}wi_{}_scale", param_prefix, i));
    Value y = tr::Einsum(t, "BSM,MF -> BSF", inputs, k, dtype, {"x", "BSF"});
    tr::Tag(t, y, "mlp" + name);  // linears.py:816
    if (settings.activations_in_float32) {
      const auto cond = t.Condition("activations_in_float32");
      y = tr::Cast(t, y, DType::kFloat32, {"x", "BSF"});
    }
    if (activations[i] != "linear") y = tr::Activation(t, activations[i], y, {"x", "BSF"});
    x = x ? tr::Binary(t, OpKind::kMul, *x, y, {"x", "BSF"}) : y;
  }
  Value product = tr::Cast(t, *x, dtype, {"x", "BSF"});
  product = t.ShardWithLogical(product, "x", "BSF",
                               {"activation_batch", "activation_length", "activation_mlp"});
  const Value wo = t.Weight({"wo", "FM"}, params.wo, wo_axes, param_prefix + "wo");
  const Value wo_cast = params.wo_scale ? Dequantize(t, wo, *params.wo_scale, wo_axes, {"wo", "FM"},
                                                     dtype, param_prefix + "wo_scale")
                                        : tr::Cast(t, wo, dtype, {"wo", "FM"});
  const Value out = tr::Einsum(t, "BSF,FM -> BSM", product, wo_cast, dtype, {"output", "BSM"});
  tr::Tag(t, out, "mlpwo");  // linears.py:829
  t.SetDumpFile("moe");
  return out;
}

}  // namespace shardtrace
