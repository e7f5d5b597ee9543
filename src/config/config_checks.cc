#include "config/config_checks.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "config/derived_dims.h"
#include "numeric/activations.h"
#include "util/checked.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

int64_t IntOf(const LayeredValues& values, std::string_view key) {
  return ValueAsInt(key, LookUp(values, key));
}

constexpr int64_t kMaxDim = kMaxConfigDim;
constexpr int64_t kMaxExperts = int64_t{1} << 20;
// The embedding chunks of the route/dispatch/gmm pipeline: one per device at most matters.
constexpr int64_t kMaxEmbChunks = int64_t{1} << 20;

}  // namespace

void CheckIntKeys(const LayeredValues& values) {
  // Each integer key the tracer divides by, multiplies into a shape or counts with, and the
  // range MaxText gives it meaning in. Checked before the derived values scale the base_*
  // dims, so a zero or negative value names the key the user set, not an op that divides.
  struct Range {
    std::string_view key;
    int64_t lo, hi;
    std::string_view meaning;
  };
  static constexpr Range kRanges[] = {
      {"max_target_length", 1, kMaxDim, "a sequence length"},
      {"base_emb_dim", 1, kMaxDim, "an embedding dim"},
      {"base_mlp_dim", 1, kMaxDim, "an MLP dim"},
      {"base_moe_mlp_dim", -1, kMaxDim, "-1 (unset) or an MoE MLP dim"},
      {"moe_expert_input_dim", -1, kMaxDim, "-1 (the embedding dim) or a dim"},
      {"padded_base_moe_mlp_dim", 1, kMaxDim, "None or a padded MoE MLP dim"},
      {"num_experts_per_tok", 1, kMaxExperts, "a count of experts per token"},
      {"shared_experts", 0, kMaxExperts, "a count of shared experts"},
      {"first_num_dense_layers", 0, kMaxDim, "a count of layers"},
      {"base_num_decoder_layers", 1, kMaxDim, "a count of layers"},
      {"interleave_moe_layer_step", 1, kMaxDim, "a layer step"},
      {"inhomogeneous_layer_cycle_interval", 1, kMaxDim, "a layer cycle"},
      {"num_moe_emb_chunks", 0, kMaxEmbChunks, "a count of chunks (0: none)"},
      {"num_moe_token_chunks", 1, kMaxEmbChunks, "a count of chunks (1: none)"},
      {"shardtrace_pr3981_emb_chunks", 0, kMaxEmbChunks, "a count of chunks (0: none)"},
      {"wi_tile_fwd_batch_seq", 1, kMaxDim, "a tile size"},
      {"wi_tile_fwd_embed_dim", 1, kMaxDim, "a tile size"},
      {"wi_tile_fwd_mlp_dim", 1, kMaxDim, "a tile size"},
      {"wo_tile_fwd_batch_seq", 1, kMaxDim, "a tile size"},
      {"wo_tile_fwd_embed_dim", 1, kMaxDim, "a tile size"},
      {"wo_tile_fwd_mlp_dim", 1, kMaxDim, "a tile size"},
  };
  for (const Range& r : kRanges) {
    const auto it = values.find(r.key);
    if (it == values.end() || it->second.type == ConfigValue::Type::kNull) continue;
    const int64_t v = ValueAsInt(r.key, it->second);
    // -1 is the one "unset" value of the keys that allow it; 0 is not.
    if (v < r.lo || v > r.hi || (r.lo == -1 && v == 0))
      Fail("{}: expected {} from {} to {}, got {}", r.key, r.meaning, r.lo == -1 ? 1 : r.lo, r.hi,
           it->second.ToString());
  }
  const int64_t num_experts = IntOf(values, "num_experts");
  if (num_experts > kMaxExperts || num_experts < 1)
    Fail("num_experts: expected 1 to {} experts, got {}", kMaxExperts, num_experts);
}

void CheckDtypeKeys(const LayeredValues& values) {
  // MaxText computes activations and keeps weights in a floating dtype; ParseDType
  // (numeric/dtype.h) also knows int32 and bool (npz arrays), which are no model dtype.
  // float8_e4m3fn is a weight storage type (common_types.is_fp8_dtype: kernels dequantized to
  // `dtype` before each matmul), not a compute dtype.
  for (const std::string_view key : {"dtype", "weight_dtype"}) {
    const auto it = values.find(key);
    if (it == values.end() || it->second.type == ConfigValue::Type::kNull) continue;
    const std::string text = ValueAsString(key, it->second);
    // The names MaxText takes (types.py DType; no 'bf16' or 'fp32' aliases).
    const bool known = text == "bfloat16" || text == "float16" || text == "float32" ||
                       (key == "weight_dtype" && text == "float8_e4m3fn");
    if (!known)
      Fail("{}: unknown dtype {} (expected bfloat16, float16 or float32{})", key,
           it->second.ToString(),
           key == "weight_dtype" ? ", or float8_e4m3fn for fp8 storage" : "");
  }
  // MlpBlock multiplies one branch per activation and the routed experts apply the first:
  // an empty list leaves nothing to compute.
  const auto acts = values.find("mlp_activations");
  if (acts == values.end()) return;
  const std::vector<std::string> names = ValueAsStringList("mlp_activations", acts->second);
  const std::vector<std::string> known = ActivationNames();
  if (names.empty())
    Fail("mlp_activations: expected a non-empty list of activations ({}), got []",
         fmt::join(known, ", "));
  for (size_t i = 0; i < names.size(); ++i)
    if (std::find(known.begin(), known.end(), names[i]) == known.end())
      Fail("mlp_activations: unknown activation {} in {} (expected one of {})",
           acts->second.list[i].ToString(), acts->second.ToString(), fmt::join(known, ", "));
}

void CheckFloatKeys(const LayeredValues& values) {
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

void CheckMoeConstraints(const LayeredValues& values) {
  const int64_t num_experts = IntOf(values, "num_experts");
  const int64_t top_k = IntOf(values, "num_experts_per_tok");
  const std::string decoder_block = ValueAsString("decoder_block", LookUp(values, "decoder_block"));

  // CheckIntKeys bounded num_experts: per-expert bookkeeping (group sizes, routing masks)
  // exists even in symbolic mode, so an absurd count would take gigabytes before any check on
  // tensor sizes could fire.
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
    // DeepSeek-V3's routing scores each group by the sum of its top 2 experts (get_topk's
    // deepseek_routing), which needs two experts in every group.
    const ConfigValue& model = LookUp(values, "model_name");
    if (model.type == ConfigValue::Type::kString && model.s.starts_with("deepseek3") &&
        num_experts / groups < 2)
      Fail(
          "n_routing_groups ({}) leaves {} expert per group of num_experts ({}); DeepSeek-V3 "
          "routing scores each group by its top 2 experts (expected at most num_experts / 2 "
          "groups)",
          groups, num_experts / groups, num_experts);
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

  // The shared experts' MlpBlock is shared_experts x the expert width wide.
  const int64_t shared = IntOf(values, "shared_experts");
  if (shared > 0) {
    const std::string_view width_key = decoder_block == "gemma4" ? "mlp_dim" : "moe_mlp_dim";
    const int64_t width = IntOf(values, width_key);
    if (width <= 0)
      Fail("shared_experts ({}) needs {} > 0, got {}; set base_{}", shared, width_key, width,
           width_key);
    const int64_t total = CheckedMul(shared, width, fmt::format("shared_experts x {}", width_key));
    if (total > kMaxDim)
      Fail("shared_experts x {}: {} x {} = {}; expected at most {}", width_key, shared, width,
           total, kMaxDim);
  }

  const bool routed_bias = ValueAsBool("routed_bias", LookUp(values, "routed_bias"));
  const double update_rate =
      ValueAsFloat("routed_bias_update_rate", LookUp(values, "routed_bias_update_rate"));
  if (routed_bias && update_rate > 0.0 && decoder_block != "deepseek" &&
      decoder_block != "deepseek4") {
    Fail(
        "routed_bias_update_rate > 0 with routed_bias=true needs decoder_block 'deepseek' or "
        "'deepseek4', got '{}'",
        decoder_block);
  }
}

namespace {

// The value of `key`, or nullptr where the loaded base.yml does not define it (an older
// revision's): a check on a key that revision lacks does not apply.
const ConfigValue* Find(const LayeredValues& values, std::string_view key) {
  const auto it = values.find(key);
  return it == values.end() || it->second.type == ConfigValue::Type::kNull ? nullptr : &it->second;
}

}  // namespace

void CheckRaggedBufferConstraints(const LayeredValues& values, bool base_has_ragged_sort) {
  // main and the release validate ragged_buffer_factor (types.py); the seed, whose base.yml
  // has no use_ragged_sort (shardtrace's fallback defaults do), does not.
  const ConfigValue* ragged_sort = Find(values, "use_ragged_sort");
  if (!base_has_ragged_sort || ragged_sort == nullptr ||
      ValueAsBool("use_ragged_sort", *ragged_sort))
    return;
  if (!ValueAsBool("use_ring_of_experts", LookUp(values, "use_ring_of_experts"))) return;
  for (const std::string_view key : {"ragged_buffer_factor", "eval_ragged_buffer_factor"}) {
    const ConfigValue* factor = Find(values, key);
    if (factor != nullptr && ValueAsFloat(key, *factor) > 0.0)
      Fail(
          "{}={} with use_ring_of_experts=true needs use_ragged_sort=true (the ring's buffer "
          "is the Pallas ragged sort's); MaxText's config validation refuses it",
          key, factor->ToString());
  }
}

void CheckReleaseMoeKnobs(const LayeredValues& values,
                          const std::set<std::string, std::less<>>& base_keys) {
  // Only keys the loaded base.yml defines: shardtrace's built-in fallbacks are no revision's.
  const auto defined = [&](std::string_view key) {
    return base_keys.contains(key) ? Find(values, key) : nullptr;
  };
  const auto on = [&](std::string_view key) {
    const ConfigValue* v = defined(key);
    return v != nullptr && ValueAsBool(key, *v);
  };
  if (on("moe_topk_before_ep_all_gather") && !(on("sparse_matmul") && on("use_ring_of_experts")))
    Fail(
        "moe_topk_before_ep_all_gather=true needs sparse_matmul=true and "
        "use_ring_of_experts=true (it moves the ring's all-gather): MaxText's config validation "
        "refuses it");
  const ConfigValue* emb_chunks = defined("num_moe_emb_chunks");
  if (emb_chunks != nullptr && defined("use_gmm_v2") != nullptr &&
      ValueAsInt("num_moe_emb_chunks", *emb_chunks) > 0) {
    if (!on("use_gmm_v2") || !on("use_ring_of_experts"))
      Fail(
          "num_moe_emb_chunks={} needs use_gmm_v2=true and use_ring_of_experts=true (the ring's "
          "chunked token all-gather accumulates in gmm v2's partial sum): MaxText's config "
          "validation refuses it",
          emb_chunks->ToString());
    const ConfigValue* x_sorted = defined("moe_x_sorted");
    if (x_sorted != nullptr && ValueAsString("moe_x_sorted", *x_sorted) != "remat")
      Fail(
          "moe_x_sorted={} with num_moe_emb_chunks={}: the chunked ring does not tag its routed "
          "input, so MaxText's config validation refuses any moe_x_sorted but remat",
          x_sorted->ToString(), emb_chunks->ToString());
  }
  const ConfigValue* token_chunks = defined("num_moe_token_chunks");
  if (token_chunks != nullptr && ValueAsInt("num_moe_token_chunks", *token_chunks) > 1) {
    const int64_t n = ValueAsInt("num_moe_token_chunks", *token_chunks);
    if (!on("use_ring_of_experts"))
      Fail(
          "num_moe_token_chunks={} needs use_ring_of_experts=true (it chunks the ring's tokens): "
          "MaxText's config validation refuses it",
          n);
    const int64_t length = ValueAsInt("max_target_length", LookUp(values, "max_target_length"));
    if (length % n != 0)
      Fail(
          "num_moe_token_chunks={} must evenly divide max_target_length={}: MaxText's config "
          "validation refuses it",
          n, length);
  }
  if (on("shard_embed_moe_on_fsdp")) {
    const ConfigValue* quantization = defined("quantization");
    const ConfigValue* calibration = defined("weight_quantization_calibration_method");
    if (quantization == nullptr || ValueAsString("quantization", *quantization).empty() ||
        calibration == nullptr ||
        !ValueAsString("weight_quantization_calibration_method", *calibration).starts_with("fixed"))
      Fail(
          "shard_embed_moe_on_fsdp=true needs quantization set and "
          "weight_quantization_calibration_method fixed (static scaling): MaxText's config "
          "validation refuses it");
    if (on("shard_exp_on_fsdp") || on("use_2d_fsdp_sharding"))
      Fail(
          "shard_embed_moe_on_fsdp=true with {}=true: only one of shard_exp_on_fsdp, "
          "use_2d_fsdp_sharding and shard_embed_moe_on_fsdp may be set; MaxText's config "
          "validation refuses it",
          on("shard_exp_on_fsdp") ? "shard_exp_on_fsdp" : "use_2d_fsdp_sharding");
  }
  if (on("defer_small_all_reduces")) {
    if (!on("use_ring_of_experts") || !on("sparse_matmul"))
      Fail(
          "defer_small_all_reduces=true needs use_ring_of_experts=true and sparse_matmul=true (the "
          "deferral is the ring's): MaxText's config validation refuses it");
    const ConfigValue* fallback = defined("moe_dropless_fallback");
    if (fallback != nullptr && fallback->type == ConfigValue::Type::kString &&
        ValueAsString("moe_dropless_fallback", *fallback) == "layer")
      Fail(
          "defer_small_all_reduces=true with moe_dropless_fallback=layer: MaxText's config "
          "validation refuses it");
  }
  if (on("use_gmm_v2") && !on("use_tokamax_gmm"))
    Fail("use_gmm_v2=true needs use_tokamax_gmm=true: MaxText's config validation refuses it");
  if (on("moe_use_direct_token_gather") && on("use_gather_mosaic_kernel"))
    Fail(
        "moe_use_direct_token_gather=true needs use_gather_mosaic_kernel=false: MaxText's config "
        "validation refuses it");
}

void CheckAttentionConstraints(const LayeredValues& values) {
  const ConfigValue* attention = Find(values, "attention");
  if (attention == nullptr) return;
  const std::string att = ValueAsString("attention", *attention);
  const ConfigValue* splash = Find(values, "use_tokamax_splash");
  const bool dot_or_splash = att == "dot_product" || (att == "flash" && splash != nullptr &&
                                                      ValueAsBool("use_tokamax_splash", *splash));
  const std::string decoder_block = ValueAsString("decoder_block", LookUp(values, "decoder_block"));
  // MaxText's config validation (types.py) refuses these before any layer is built, in this
  // order; the release's deepseek4-*, deepseek3.2-671b and deepseek-custom files need the
  // attention key set to be built at all.
  if (decoder_block == "deepseek4" && !dot_or_splash)
    Fail(
        "decoder_block 'deepseek4' needs attention=dot_product (or attention=flash with "
        "use_tokamax_splash=true), got attention '{}': MaxText's config validation refuses it",
        att);
  const ConfigValue* indexer = Find(values, "use_indexer");
  if (indexer != nullptr && ValueAsBool("use_indexer", *indexer) && !dot_or_splash) {
    const ConfigValue* type = Find(values, "attention_type");
    Fail(
        "use_indexer=true (the sparse indexer of attention_type '{}') needs "
        "attention=dot_product (or attention=flash with use_tokamax_splash=true), got attention "
        "'{}': MaxText's config validation refuses it",
        type ? ValueAsString("attention_type", *type) : "", att);
  }
  const ConfigValue* engram = Find(values, "engram_layers");
  if (engram != nullptr && engram->type == ConfigValue::Type::kList && !engram->list.empty()) {
    const ConfigValue* token = Find(values, "hf_access_token");
    const ConfigValue* tokenizer = Find(values, "tokenizer_path");
    const auto empty = [](const ConfigValue* v, std::string_view key) {
      return v == nullptr || ValueAsString(key, *v).empty();
    };
    if (empty(token, "hf_access_token") || empty(tokenizer, "tokenizer_path"))
      Fail(
          "engram_layers {} needs both hf_access_token and tokenizer_path (MaxText loads the "
          "Hugging Face tokenizer for its engram layers; its config validation refuses it "
          "otherwise)",
          engram->ToString());
  }
}

}  // namespace shardtrace::config_internal
