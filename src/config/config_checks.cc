#include "config/config_checks.h"

#include <string>
#include <string_view>

#include "config/derived_dims.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

int64_t IntOf(const ValueMap& values, std::string_view key) {
  return ValueAsInt(key, LookUp(values, key));
}

}  // namespace

void CheckFloatKeys(const ValueMap& values) {
  // The float keys shardtrace reads, with the range it can honour: each is later multiplied
  // into a size or cast to float32, so NaN, infinities and absurd magnitudes are refused
  // here, at load, naming the key, rather than wrapping or saturating in a cast.
  struct Range {
    std::string_view key;
    double lo, hi;
    std::string_view meaning;
  };
  static constexpr Range kRanges[] = {
      {"per_device_batch_size", 0.0, 1e9, "a positive batch size per device"},
      {"capacity_factor", -1e6, 1e6, "a factor within +-1e6 (<= 0 means no dropping)"},
      {"ragged_buffer_factor", -1e6, 1e6, "a factor within +-1e6 (<= 0 means worst case)"},
      {"routed_scaling_factor", -1e30, 1e30, "a finite factor"},
      {"load_balance_loss_weight", -1e30, 1e30, "a finite weight"},
      {"routed_bias_update_rate", -1e30, 1e30, "a finite rate"},
      {"mlp_activations_limit", -1e30, 1e30, "a finite limit"},
  };
  for (const Range& r : kRanges) {
    const auto it = values.find(r.key);
    if (it == values.end() || it->second.type == ConfigValue::Type::kNull) continue;
    const double v = ValueAsFloat(r.key, it->second);
    const bool positive = r.key == "per_device_batch_size";
    if (!(v >= r.lo && v <= r.hi) || (positive && v <= 0.0))
      Fail("{}: expected {}, got {}", r.key, r.meaning, it->second.ToString());
  }
}

void CheckMoeConstraints(const ValueMap& values) {
  const int64_t num_experts = IntOf(values, "num_experts");
  const int64_t top_k = IntOf(values, "num_experts_per_tok");
  const std::string decoder_block = ValueAsString("decoder_block", LookUp(values, "decoder_block"));

  // Per-expert bookkeeping (group sizes, routing masks) exists even in symbolic mode, so an
  // absurd expert count would take gigabytes before any check on tensor sizes could fire.
  constexpr int64_t kMaxExperts = int64_t{1} << 20;
  if (num_experts > kMaxExperts || num_experts < 1)
    Fail("num_experts: expected 1 to {} experts, got {}", kMaxExperts, num_experts);
  if (top_k > num_experts) {
    Fail("num_experts_per_tok ({}) must be <= num_experts ({})", top_k, num_experts);
  }

  // Device-limited routing (n_routing_groups != -1) splits the experts into equal groups
  // and keeps the best topk_routing_group of them.
  const int64_t groups = IntOf(values, "n_routing_groups");
  if (groups != -1) {
    if (groups <= 0 || num_experts % groups != 0) {
      Fail("n_routing_groups ({}) must divide num_experts ({}) (or be -1 to disable)", groups,
           num_experts);
    }
    const int64_t top_groups = IntOf(values, "topk_routing_group");
    if (top_groups < 1 || top_groups > groups) {
      Fail("topk_routing_group ({}) must be between 1 and n_routing_groups ({})", top_groups,
           groups);
    }
  }

  if (num_experts > 1) {
    const int64_t moe_mlp_dim = IntOf(values, "moe_mlp_dim");
    if (moe_mlp_dim <= 0) {
      Fail("moe_mlp_dim ({}) must be > 0 when num_experts > 1; set base_moe_mlp_dim", moe_mlp_dim);
    }
    // qwen3_moe was already reconciled by ApplyDerivedValues; gemma4 uses a separate
    // dense MLP width by design.
    const int64_t base_mlp_dim = IntOf(values, "base_mlp_dim");
    const int64_t base_moe_mlp_dim = IntOf(values, "base_moe_mlp_dim");
    if (IsFullyMoe(values) && base_mlp_dim != base_moe_mlp_dim && decoder_block != "gemma4") {
      Fail(
          "base_mlp_dim ({}) must equal base_moe_mlp_dim ({}) for a fully-MoE model "
          "(interleave_moe_layer_step 1, first_num_dense_layers 0, "
          "inhomogeneous_layer_cycle_interval 1)",
          base_mlp_dim, base_moe_mlp_dim);
    }
    if (decoder_block == "gpt_oss" &&
        !ValueAsBool("sparse_matmul", LookUp(values, "sparse_matmul"))) {
      const double capacity_factor =
          ValueAsFloat("capacity_factor", LookUp(values, "capacity_factor"));
      if (capacity_factor != -1.0) {
        Fail(
            "capacity_factor must be -1 (dropless) for decoder_block gpt_oss with "
            "sparse_matmul=false, got {}",
            LookUp(values, "capacity_factor").ToString());
      }
    }
  }

  const bool routed_bias = ValueAsBool("routed_bias", LookUp(values, "routed_bias"));
  const double update_rate =
      ValueAsFloat("routed_bias_update_rate", LookUp(values, "routed_bias_update_rate"));
  if (routed_bias && update_rate > 0.0 && decoder_block != "deepseek") {
    Fail(
        "routed_bias_update_rate > 0 with routed_bias=true needs decoder_block 'deepseek', got "
        "'{}'",
        decoder_block);
  }
}

}  // namespace shardtrace::config_internal
