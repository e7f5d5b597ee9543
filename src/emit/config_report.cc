#include "emit/config_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

namespace shardtrace {
namespace {

struct Section {
  const char* title;
  std::vector<const char*> keys;
};

// The config keys moe.py reads, grouped as a reviewer scans them.
const std::vector<Section>& Sections() {
  static const std::vector<Section> sections = {
      {"model",
       {"model_name", "decoder_block", "num_experts", "num_experts_per_tok", "shared_experts",
        "first_num_dense_layers", "mlp_activations", "mlp_activations_limit", "mlp_bias"}},
      {"routing",
       {"routed_score_func", "routed_bias", "routed_bias_update_rate", "routed_scaling_factor",
        "n_routing_groups", "topk_routing_group", "norm_topk_prob", "load_balance_loss_weight",
        "use_random_routing"}},
      {"path",
       {"sparse_matmul", "megablox", "use_tokamax_gmm", "capacity_factor", "use_ring_of_experts",
        "ragged_buffer_factor", "model_call_mode", "attention", "shardtrace_pr3981_emb_chunks"}},
      {"sharding",
       {"shard_mode", "custom_mesh_and_rule", "shard_exp_on_fsdp", "use_2d_fsdp_sharding",
        "use_batch_split_schedule", "moe_fsdp_use_two_stage_all_gather"}},
      {"dtypes",
       {"dtype", "weight_dtype", "float32_gate_logits", "float32_weight_sum",
        "activations_in_float32", "matmul_precision"}},
  };
  return sections;
}

nlohmann::ordered_json ValueToJson(const ConfigValue& v) {
  switch (v.type) {
    case ConfigValue::Type::kNull:
      return nullptr;
    case ConfigValue::Type::kBool:
      return v.b;
    case ConfigValue::Type::kInt:
      return v.i;
    case ConfigValue::Type::kFloat:
      return v.f;
    case ConfigValue::Type::kString:
      return v.s;
    case ConfigValue::Type::kList: {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const ConfigValue& e : v.list) list.push_back(ValueToJson(e));
      return list;
    }
    case ConfigValue::Type::kMap: {
      nlohmann::ordered_json map = nlohmann::ordered_json::object();
      for (size_t i = 0; i < v.keys.size(); ++i) map[v.keys[i]] = ValueToJson(v.list[i]);
      return map;
    }
  }
  return nullptr;
}

std::vector<std::pair<std::string, int64_t>> Dims(const MoeSetup& s) {
  return {{"B", s.batch}, {"S", s.seq},    {"M", s.emb},     {"E", s.num_experts},
          {"K", s.top_k}, {"H", s.hidden}, {"F", s.mlp_dim}, {"shared_H", s.shared_hidden}};
}

}  // namespace

std::string ConfigToJson(const RunSetup& in, const std::vector<std::string>& overrides) {
  const MoeSetup& setup = in.setup;
  nlohmann::ordered_json j;
  j["files"] = in.config.loaded_files();
  j["overrides"] = overrides;
  j["maxtext_revision"] = {{"name", in.config.revision().name},
                           {"title", in.config.revision().Title()},
                           {"why", in.config.revision().why}};
  nlohmann::ordered_json mesh = nlohmann::ordered_json::object();
  for (const MeshAxis& a : in.mesh.axes()) mesh[a.name] = a.size;
  j["mesh"] = {
      {"devices", in.mesh.num_devices()}, {"num_slices", in.mesh.num_slices()}, {"axes", mesh}};
  nlohmann::ordered_json dims = nlohmann::ordered_json::object();
  for (const auto& [k, v] : Dims(setup)) dims[k] = v;
  j["dims"] = dims;
  j["path"] = {{"kind", ToString(setup.path)},
               {"label", setup.PathLabel()},
               {"reasons", setup.path_reasons},
               {"gmm_kernel", setup.gmm_kernel},
               {"expert_parallelism", setup.ep},
               {"tensor_parallelism", setup.tp},
               {"batch_sharded_by_ep", setup.batch_sharded_by_ep}};
  for (const Section& section : Sections()) {
    nlohmann::ordered_json keys = nlohmann::ordered_json::object();
    for (const char* key : section.keys)
      if (in.config.Has(key)) keys[key] = ValueToJson(in.config.Get(key));
    j["keys"][section.title] = keys;
  }
  return j.dump(2) + "\n";
}

std::string ConfigToText(const RunSetup& in, const std::vector<std::string>& overrides) {
  const MoeSetup& setup = in.setup;
  std::string text;
  text += fmt::format("{:<10} {}\n", "files", fmt::join(in.config.loaded_files(), " <- "));
  if (!overrides.empty())
    text += fmt::format("{:<10} {}\n", "overrides", fmt::join(overrides, " "));
  text += fmt::format("{:<10} {} ({})\n", "moe.py", in.config.revision().Title(),
                      in.config.revision().why);
  text += fmt::format("{:<10} {} ({} devices, {} slice{})\n", "mesh", in.mesh.ToString(),
                      in.mesh.num_devices(), in.mesh.num_slices(),
                      in.mesh.num_slices() == 1 ? "" : "s");
  std::vector<std::string> dims;
  for (const auto& [k, v] : Dims(setup)) dims.push_back(fmt::format("{}={}", k, v));
  text += fmt::format("{:<10} {}\n", "dims", fmt::join(dims, " "));
  text += fmt::format("{:<10} {}\n", "moe path", setup.PathLabel());
  text += fmt::format("{:<10} because {}\n", "", fmt::join(setup.path_reasons, "; "));
  for (const std::string& note : setup.notes) text += fmt::format("{:<10} note: {}\n", "", note);
  for (const Section& section : Sections()) {
    std::vector<std::string> items;
    for (const char* key : section.keys)
      if (in.config.Has(key))
        items.push_back(fmt::format("{}={}", key, in.config.Get(key).ToString()));
    text += fmt::format("{:<10} {}\n", section.title, fmt::join(items, " "));
  }
  return text;
}

}  // namespace shardtrace
