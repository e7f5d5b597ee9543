#include "config/remat_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "util/error.h"

namespace shardtrace {
namespace {

// minimal_policy's names (nnx_decoders.py:1258-1276).
std::vector<std::string> MinimalNames() {
  return {"query_proj", "value_proj", "key_proj", "kv_proj", "qkv_proj",
          "out_proj",   "mlpwi_0",    "mlpwi_1",  "mlpwi",   "mlpwo"};
}

std::vector<std::string> AttentionNames() {
  return {"query_proj", "value_proj", "key_proj", "kv_proj", "qkv_proj"};
}

// The per-tensor keys pyconfig reads for `custom` (types.py:4520-4545), in its order.
constexpr std::array<std::string_view, 23> kCustomTensors = {
    "decoder_layer_input", "indexer_cutoff_threshold",
    "context",             "mlpwi",
    "moe_mlpwi_0",         "moe_x_sorted",
    "moe_routing_maps",    "moe_mlpwi_1",
    "moe_mlpwo",           "mlpwi_0",
    "mlpwi_1",             "mlpwo",
    "query_proj",          "key_proj",
    "value_proj",          "kv_proj",
    "query_wa_proj",       "kv_wa_proj",
    "mla_kv",              "mla_q",
    "qkv_proj",            "attention_out",
    "out_proj"};

}  // namespace

bool IsRematKey(std::string_view key) {
  return key == "remat_policy" ||
         std::find(kCustomTensors.begin(), kCustomTensors.end(), key) != kCustomTensors.end();
}

RematPolicy RematPolicyOf(const Config& config) {
  RematPolicy p;
  // `remat_policy=none` parses as YAML null; get_remat_policy treats None and "none" alike.
  if (!config.Has("remat_policy"))
    p.name = "full";
  else if (config.Get("remat_policy").type == ConfigValue::Type::kNull)
    p.name = "none";
  else
    p.name = config.Str("remat_policy");
  const std::string& n = p.name;
  if (n == "none" || n.empty()) {
    p.wrapped = false;
    p.summary = "no jax.checkpoint around the layer: every residual the backward reads is kept";
    return p;
  }
  if (n == "full") {
    p.summary = "saves nothing inside the layer: the backward re-runs its forward";
  } else if (n == "minimal" || n == "minimal_with_context" || n == "minimal_flash" ||
             n == "minimal_with_quantization" || n == "minimal_with_context_and_quantization") {
    p.saved = MinimalNames();
    if (n.find("context") != std::string::npos || n == "minimal_flash")
      p.saved.push_back("context");
    if (n.find("quantization") != std::string::npos) p.saved.push_back("quantization");
  } else if (n == "save_dot_with_context_except_mlp") {
    p.saved = AttentionNames();
    p.saved.push_back("context");
    p.saved.push_back("out_proj");
  } else if (n == "save_dot_except_mlpwi") {
    p.saved = AttentionNames();
    p.saved.push_back("out_proj");
    p.saved.push_back("mlpwo");
  } else if (n == "save_dot_except_mlp") {
    p.saved = AttentionNames();
    p.saved.push_back("out_proj");
  } else if (n == "save_qkv_proj") {
    p.saved = AttentionNames();
  } else if (n == "qkv_proj_offloaded") {
    p.offloaded = {"query_proj", "value_proj", "key_proj", "kv_proj"};
  } else if (n == "minimal_offloaded") {
    p.offloaded = MinimalNames();
  } else if (n == "save_out_proj") {
    p.saved = {"out_proj"};
  } else if (n == "custom") {
    for (const std::string_view key : kCustomTensors) {
      const std::string k(key);
      if (!config.Has(k)) continue;  // a revision without the key: 'remat'
      const std::string v = config.Str(k);
      if (v == "device")
        p.saved.push_back(k);
      else if (v == "offload")
        p.offloaded.push_back(k);
      else if (v != "remat")
        Fail("{}: expected device, offload or remat (remat_policy=custom), found '{}'", k, v);
    }
  } else {
    Fail(
        "remat_policy: expected one of full, minimal, minimal_with_context, "
        "minimal_with_quantization, minimal_with_context_and_quantization, "
        "save_dot_with_context_except_mlp, save_dot_except_mlpwi, save_dot_except_mlp, "
        "save_qkv_proj, qkv_proj_offloaded, minimal_offloaded, custom, save_out_proj or none, "
        "found '{}'",
        n);
  }
  if (p.summary.empty()) {
    std::string s;
    if (!p.saved.empty()) s = fmt::format("saves only {}", fmt::join(p.saved, ", "));
    if (!p.offloaded.empty())
      s += fmt::format("{}offloads {} to pinned_host", s.empty() ? "" : "; ",
                       fmt::join(p.offloaded, ", "));
    p.summary = s.empty() ? "saves nothing" : s;
  }
  return p;
}

}  // namespace shardtrace
