#include "paths/mlp_block.h"

#include <fmt/format.h>

#include "config/moe_settings.h"
#include "paths/traced_ops.h"

namespace shardtrace {

namespace tr = traced;

Value MlpBlock(Tracer& t, const MoeSettings& settings, const Value& inputs_in,
               const MlpParams& params, const std::string& scope) {
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
    const Value kernel = t.Weight({name, "MF"}, params.wi.at(i), wi_axes);
    const Value k = tr::Cast(t, kernel, dtype, {name, "MF"});
    Value y = tr::Einsum(t, "BSM,MF -> BSF", inputs, k, dtype, {"x", "BSF"});
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
  const Value wo = t.Weight({"wo", "FM"}, params.wo, wo_axes);
  const Value wo_cast = tr::Cast(t, wo, dtype, {"wo", "FM"});
  const Value out = tr::Einsum(t, "BSF,FM -> BSM", product, wo_cast, dtype, {"output", "BSM"});
  t.SetDumpFile("moe");
  return out;
}

}  // namespace shardtrace
