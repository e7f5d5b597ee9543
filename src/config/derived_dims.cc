#include "config/derived_dims.h"

#include <string>
#include <string_view>

#include "config/config_checks.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

ConfigValue IntValue(int64_t i) {
  ConfigValue value;
  value.type = ConfigValue::Type::kInt;
  value.i = i;
  return value;
}

int64_t IntOf(const LayeredValues& values, std::string_view key) {
  return ValueAsInt(key, LookUp(values, key));
}

// Scales `base_key` into `key` when the base is set; a missing or null base (a trimmed
// user base.yml, or a key this model does not use) leaves the derived key unset.
void SetScaled(LayeredValues& values, std::string_view key, std::string_view base_key, int scale) {
  const auto it = values.find(base_key);
  if (it == values.end() || it->second.type == ConfigValue::Type::kNull) return;
  const int64_t base = ValueAsInt(base_key, it->second);
  // The scaled dim is a shape dim of every MoE tensor: bounded like the base dims.
  int64_t scaled = 0;
  if (__builtin_mul_overflow(base, int64_t{1} << scale, &scaled) || scaled > kMaxConfigDim)
    Fail("{}: {} ({}) x {} (from global_parameter_scale) is more than {}", key, base_key, base,
         int64_t{1} << scale, kMaxConfigDim);
  values.insert_or_assign(std::string(key), IntValue(scaled));
}

}  // namespace

ParameterScales ScalesFor(int64_t global_parameter_scale) {
  const int64_t scale = global_parameter_scale;
  if (scale < 1 || (scale & (scale - 1)) != 0) {
    Fail("global_parameter_scale must be a power of two >= 1, got {}", scale);
  }
  int log2 = 0;
  while ((int64_t{1} << log2) < scale) ++log2;
  const int q = log2 / 3;
  const int r = log2 % 3;
  return ParameterScales{.emb = q + (r > 1 ? 1 : 0), .mlp = q + (r > 0 ? 1 : 0), .layer = q};
}

bool IsFullyMoe(const LayeredValues& values) {
  return IntOf(values, "interleave_moe_layer_step") == 1 &&
         IntOf(values, "first_num_dense_layers") == 0 &&
         IntOf(values, "inhomogeneous_layer_cycle_interval") == 1;
}

void ApplyDerivedValues(LayeredValues& values) {
  const ParameterScales scales = ScalesFor(IntOf(values, "global_parameter_scale"));

  // qwen3_moe configs leave base_mlp_dim at a dense value; pyconfig silently replaces it
  // with base_moe_mlp_dim for a fully-MoE model rather than rejecting the mismatch.
  if (IntOf(values, "num_experts") > 1 && IsFullyMoe(values) &&
      ValueAsString("decoder_block", LookUp(values, "decoder_block")) == "qwen3_moe" &&
      IntOf(values, "base_mlp_dim") != IntOf(values, "base_moe_mlp_dim")) {
    values.insert_or_assign("base_mlp_dim", IntValue(IntOf(values, "base_moe_mlp_dim")));
  }

  SetScaled(values, "emb_dim", "base_emb_dim", scales.emb);
  SetScaled(values, "mlp_dim", "base_mlp_dim", scales.mlp);
  SetScaled(values, "moe_mlp_dim", "base_moe_mlp_dim", scales.mlp);
  SetScaled(values, "num_query_heads", "base_num_query_heads", scales.mlp);
  SetScaled(values, "num_kv_heads", "base_num_kv_heads", scales.mlp);
  SetScaled(values, "num_decoder_layers", "base_num_decoder_layers", scales.layer);

  ConfigValue pipeline;
  pipeline.type = ConfigValue::Type::kBool;
  pipeline.b = IntOf(values, "ici_pipeline_parallelism") > 1 ||
               IntOf(values, "dcn_pipeline_parallelism") > 1;
  values.insert_or_assign("using_pipeline_parallelism", pipeline);
}

}  // namespace shardtrace::config_internal
