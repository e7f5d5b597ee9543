// ResolveMoeSettings: every config value the tracer reads, typed once. The values follow the
// model file and overrides, derived dims are pyconfig's, and a bad value fails at resolution
// naming its key, before anything is traced.
#include "config/moe_settings.h"

#include <catch2/catch.hpp>

#include "config/config.h"
#include "util/error.h"

namespace shardtrace {
namespace {

MoeSettings Resolve(std::vector<std::string> overrides) {
  return ResolveMoeSettings(Config::Load({{}, std::move(overrides)}));
}

}  // namespace

TEST_CASE("MoE settings carry the model's values and the overrides, typed", "[settings]") {
  const MoeSettings s = Resolve({"model_name=mixtral-8x7b", "capacity_factor=1.5",
                                 "wo_tile_fwd_embed_dim=256", "dtype=float32"});
  CHECK(s.model_name == "mixtral-8x7b");
  CHECK(s.decoder_block == "mixtral");
  CHECK(s.num_experts == 8);
  CHECK(s.num_experts_per_tok == 2);
  CHECK(s.emb_dim == 4096);
  CHECK(s.mlp_dim == 14336);
  CHECK(s.capacity_factor == 1.5);
  CHECK(s.dtype == DType::kFloat32);
  CHECK(s.weight_dtype == DType::kFloat32);
  CHECK(s.mlp_activations == std::vector<std::string>{"silu", "linear"});
  CHECK(s.wo_tile_fwd.embed_dim == 256);
  CHECK(s.wi_tile_fwd.batch_seq == 512);
  CHECK_FALSE(s.padded_base_moe_mlp_dim.has_value());
  CHECK(s.revision.id == RevisionId::kSeed);
  CHECK_FALSE(s.UpdatesLoadBalanceBias());
  CHECK(Resolve({"model_name=deepseek3-test", "routed_bias=true", "routed_bias_update_rate=0.01"})
            .UpdatesLoadBalanceBias());
}

TEST_CASE("A bad setting fails when the settings are resolved, naming its key", "[settings]") {
  CHECK_THROWS_WITH(Resolve({"dtype=bfloat61"}), Catch::Contains("dtype"));
  CHECK_THROWS_WITH(Resolve({"weight_dtype=float7"}), Catch::Contains("weight_dtype"));
}

}  // namespace shardtrace
