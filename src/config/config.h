// Config: a MaxText configuration resolved exactly as MaxText's pyconfig resolves it.
// Merge order base.yml <- models/<model_name>.yml <- key=value overrides, the
// logical_axis_rules merge-by-name-and-append, override_logical_axis_rules,
// custom_mesh_and_rule, and the derived values (emb_dim, mlp_dim, moe_mlp_dim from base_*
// and global_parameter_scale; using_pipeline_parallelism). With no config file the
// embedded seed-era base.yml (MaxText 313890777) and its model / custom_mesh_and_rule
// files are used. Every lookup of a missing or mistyped key throws Error naming the key.
// What is legal but suspicious comes back as warnings() (util/warnings.h), and with an Error
// thrown after it.
// Facts: ../shared/research/maxtext-facts.md sections 1.4-1.5.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/maxtext_revision.h"
#include "config/parsed_yaml_cache.h"
#include "shard/axis_rules.h"
#include "util/warnings.h"

namespace shardtrace {

namespace config_internal {
class LayeredValues;
}  // namespace config_internal

// One parsed config value. YAML scalars keep their YAML type; lists hold scalars or lists.
// A few base.yml keys are mappings (`debug: {rl: False}`, `vllm_hf_overrides: {}`): kMap
// keeps them with keys[i] naming list[i], in file order.
struct ConfigValue {
  enum class Type { kNull, kBool, kInt, kFloat, kString, kList, kMap };
  Type type = Type::kNull;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<ConfigValue> list;
  std::vector<std::string> keys;  // kMap only

  // Python-repr-like text: 2, 2.0, True, 'silu', ['silu', 'linear'].
  std::string ToString() const;
};

// What to load. files[0] is the user's base.yml (MaxText's `CONFIG` argument); model and
// custom_mesh_and_rule files are looked up beside it. Any further files merge over it in
// order the way a model file does (keys replace, logical_axis_rules merge by name unless
// that file sets override_logical_axis_rules) before models/<model_name>.yml and the
// overrides apply, like a MaxText config whose base_config is base.yml.
struct ConfigSource {
  std::vector<std::string> files;      // user CONFIG paths; empty = embedded base.yml
  std::vector<std::string> overrides;  // "key=value" strings, in command-line order
  // Case files (config/case_config.h) whose keys lead `overrides`: listed in loaded_files().
  std::vector<std::string> case_files = {};
  // Warnings found reading the case files: the config's warnings start with them.
  std::vector<Warning> warnings = {};
  // Parsed files shared between loads (config/parsed_yaml_cache.h); null: parse every time.
  ParsedYamlCache* yaml_cache = nullptr;
};

class Config {
 public:
  // Loads and merges as pyconfig does; validates keys, types and the MoE constraints that
  // need no mesh (num_experts_per_tok <= num_experts, routing groups, moe_mlp_dim > 0, ...).
  // `maxtext_revision` (--maxtext-revision) names the revision; empty: recognised from the
  // keys base.yml defines (config/maxtext_revision.h).
  static Config Load(const ConfigSource& source, std::string_view maxtext_revision = {});

  bool Has(std::string_view key) const;
  const ConfigValue& Get(std::string_view key) const;  // throws Error on a missing key
  int64_t Int(std::string_view key) const;             // accepts integral floats (2.0)
  double Float(std::string_view key) const;            // accepts ints
  bool Bool(std::string_view key) const;
  std::string Str(std::string_view key) const;
  std::vector<std::string> StrList(std::string_view key) const;

  const AxisRules& logical_axis_rules() const { return data_->rules; }
  const std::vector<std::string>& mesh_axes() const { return data_->mesh_axes; }
  const std::vector<std::vector<std::string>>& data_sharding() const { return data_->data_sharding; }
  // "embedded base.yml (MaxText 313890777)" or the user's path, then the model file if any.
  const std::vector<std::string>& loaded_files() const { return data_->loaded_files; }
  // Every key and value, in key order.
  void ForEachValue(const std::function<void(const std::string&, const ConfigValue&)>& visit) const;
  // The MaxText revision whose moe.py runs this config (config/maxtext_revision.h).
  const MaxTextRevision& revision() const { return data_->revision; }
  // What loading found legal but suspicious (a repeated key, ...), the source's first.
  const std::vector<Warning>& warnings() const { return data_->warnings; }

 private:
  // Immutable once loaded and shared by every copy: a run copies its config into each block's
  // setup and result, and plan runs thousands (copying the few hundred keys was a sixth of its
  // time).
  struct Data {
    std::shared_ptr<const config_internal::LayeredValues> values;
    AxisRules rules;
    std::vector<std::string> mesh_axes;
    std::vector<std::vector<std::string>> data_sharding;
    std::vector<std::string> loaded_files;
    MaxTextRevision revision;
    std::vector<Warning> warnings;
  };
  std::shared_ptr<const Data> data_ = std::make_shared<const Data>();
};

// `key`'s value as Config values print it (ConfigValue::ToString) where the config sets it
// away from `default_value` (printed the same way; numbers compare as numbers, so 0 is 0.0);
// nullopt where it is unset or at the default. The key tables' test (config/moe_keys.h,
// model/step_keys.h).
std::optional<std::string> AwayFromDefault(const Config& config, std::string_view key,
                                           std::string_view default_value);

}  // namespace shardtrace
