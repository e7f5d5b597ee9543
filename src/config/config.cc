#include "config/config.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/base_config_chain.h"
#include "config/config_checks.h"
#include "config/config_files.h"
#include "config/config_value.h"
#include "config/derived_dims.h"
#include "config/embedded_configs.h"
#include "config/key_defaults.h"
#include "config/key_suggest.h"
#include "config/sharding_keys.h"
#include "config/yaml_value.h"
#include "util/error.h"
#include "util/warnings.h"

namespace shardtrace {
namespace {

using config_internal::CheckFloatKeys;
using config_internal::CheckMoeConstraints;
using config_internal::CheckRuleList;
using config_internal::CoerceToDefaultType;
using config_internal::ConfigFiles;
using config_internal::FileText;
using config_internal::LookUp;
using config_internal::MergeRulesByName;
using config_internal::LayeredValues;
using config_internal::ValueMap;
using config_internal::YamlEntry;

constexpr std::string_view kRulesKey = "logical_axis_rules";

ConfigValue EmptyList() {
  ConfigValue list;
  list.type = ConfigValue::Type::kList;
  return list;
}

// One source of key/value pairs after key and type checks: a config file or the
// command-line overrides (empty `name`).
struct Layer {
  std::string name;
  std::vector<YamlEntry> entries;  // in source order; a repeated key: the last wins
  // Each key's value as the layer spells it, before CheckLayer converts it to the key's type
  // ("8" stays a string): what pyconfig compares when a model file and an override both set
  // a key.
  ValueMap spelled;
};

const ConfigValue* FindEntry(const Layer& layer, std::string_view key) {
  const ConfigValue* found = nullptr;
  for (const YamlEntry& entry : layer.entries) {
    if (entry.key == key) found = &entry.value;
  }
  return found;
}

}  // namespace

// What the base chain resolves to; shared by every config loaded from it through one cache.
struct ParsedYamlCache::ResolvedBase {
  explicit ResolvedBase(config_internal::ConfigFiles f) : files(std::move(f)) {}
  config_internal::ConfigFiles files;  // with the chain's fallback folder
  ValueMap defaults;  // every known key -> its default (type source)
  std::vector<std::string> known_keys;  // defaults' keys, for suggestions
  std::set<std::string, std::less<>> base_keys;  // the keys the root base.yml itself defines
  std::string base_name;
  ValueMap values;  // the defaults with the chain's files merged over them
  ConfigValue rules = EmptyList();
  std::vector<std::string> loaded_files;
  std::vector<Warning> warnings;  // found while resolving; replayed on every use
};

std::shared_ptr<const ParsedYamlCache::ResolvedBase> ParsedYamlCache::FindBase(const std::string& key) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = bases_.find(key);
  return it == bases_.end() ? nullptr : it->second;
}

std::shared_ptr<const ParsedYamlCache::ResolvedBase> ParsedYamlCache::StoreBase(
    const std::string& key, std::shared_ptr<const ResolvedBase> base) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return bases_.try_emplace(key, std::move(base)).first->second;
}

namespace {

// Runs pyconfig's merge: base.yml (+ extra files) <- models/<model_name>.yml <- overrides,
// logical_axis_rules merged by name at each step, then custom_mesh_and_rule, then the
// derived values and the MoE checks.
class Resolver {
 public:
  // Warnings found while loading are appended to `warnings`.
  // `embedded_root`: with no config file, the embedded tree to load (ConfigFiles::Embedded).
  Resolver(const ConfigSource& source, std::vector<Warning>* warnings,
           std::string_view embedded_root)
      : source_(source),
        warnings_(warnings),
        embedded_root_(embedded_root),
        files_(source.files.empty() ? ConfigFiles::Embedded(embedded_root)
                                    : ConfigFiles::BesideBase(source.files[0])) {}

  void Run() {
    UseBase(CachedBase());
    // Extra files act like model files stacked on the base (MaxText's own equivalent is
    // a config whose base_config is base.yml): they may set model_name, and the model
    // file and the overrides still apply over them.
    for (size_t k = 1; k < source_.files.size(); ++k) {
      const FileText file = config_internal::ReadConfigFile(source_.files[k]);
      loaded_files_.push_back(file.display);
      ApplyLayer(CheckedLayer(file));
    }
    const Layer overrides = ParseOverrides();
    LoadModel(overrides);
    for (const std::string& c : source_.case_files)
      loaded_files_.push_back(c + " (command-line overrides)");
    ApplyLayer(overrides);
    LoadCustomMeshAndRule();
    values_.insert_or_assign(std::string(kRulesKey), std::move(rules_));
    config_internal::CheckIntKeys(values_);
    config_internal::CheckDtypeKeys(values_);
    config_internal::ApplyDerivedValues(values_);
    CheckFloatKeys(values_);
    // MaxText's own validation refuses these files before anything MoE-specific is checked.
    config_internal::CheckAttentionConstraints(values_);
    CheckMoeConstraints(values_);
    config_internal::CheckRaggedBufferConstraints(values_,
                                                  base_->base_keys.contains("use_ragged_sort"));
    config_internal::CheckReleaseMoeKnobs(values_, base_->base_keys);
  }

  LayeredValues& values() { return values_; }
  std::vector<std::string>& loaded_files() { return loaded_files_; }
  std::string base_name() const { return base_->base_name; }
  // The keys base.yml itself defines (before the built-in fallbacks): its revision's
  // fingerprint.
  const std::set<std::string, std::less<>>& base_keys() const { return base_->base_keys; }

 private:
  using ResolvedBase = ParsedYamlCache::ResolvedBase;

  // The base chain's state, from the cache when the caller shares one: every config of a
  // plan starts from the same base.yml, and resolving it (about 700 keys, their defaults and
  // types) was most of a config's load. Keyed by the first file's path and text (or the
  // embedded base); its warnings are replayed on every hit, as a fresh load reports them.
  std::shared_ptr<const ResolvedBase> CachedBase() {
    if (source_.yaml_cache == nullptr) return ResolveBase(warnings_);
    std::string key = "embedded:" + std::string(embedded_root_);
    if (!source_.files.empty()) {
      const std::shared_ptr<const FileText> file = source_.yaml_cache->File(source_.files[0]);
      key = source_.files[0] + '\0' +
            (file ? file->text : config_internal::ReadConfigFile(source_.files[0]).text);
    }
    std::shared_ptr<const ResolvedBase> base = source_.yaml_cache->FindBase(key);
    if (base == nullptr) {
      std::vector<Warning> found;
      base = source_.yaml_cache->StoreBase(key, ResolveBase(&found));
    }
    for (const Warning& w : base->warnings) AddWarning(*warnings_, w);
    return base;
  }

  void UseBase(std::shared_ptr<const ResolvedBase> base) {
    base_ = std::move(base);
    files_ = base_->files;
    values_ = LayeredValues(std::shared_ptr<const ValueMap>(base_, &base_->values));
    rules_ = base_->rules;
    loaded_files_ = base_->loaded_files;
  }

  // Resolves the base chain into a ResolvedBase; its warnings go to `warnings` and into it.
  std::shared_ptr<const ResolvedBase> ResolveBase(std::vector<Warning>* warnings) {
    auto base = std::make_shared<ResolvedBase>(files_);
    const size_t before = warnings->size();
    Resolver chain(source_, warnings, embedded_root_);
    chain.base_ = base;
    chain.LoadBase(*base);
    base->warnings.assign(warnings->begin() + static_cast<std::ptrdiff_t>(before), warnings->end());
    return base;
  }

  // base.yml, or the file given first with the files it includes through base_config
  // (config/base_config_chain.h): the root of that chain gives every key its default and
  // type, and each including file replaces keys over it, lists included, as OmegaConf merges.
  void LoadBase(ResolvedBase& b) {
    std::vector<config_internal::ChainFile> chain;
    if (source_.files.empty()) {
      const FileText base = b.files.Base();
      std::vector<YamlEntry> entries = Parse(base);
      chain.push_back({base, std::move(entries)});
    } else {
      chain = config_internal::ResolveBaseConfigChain(source_.files[0], warnings_,
                                                      source_.yaml_cache);
    }
    LoadRoot(b, chain.front().file, chain.front().entries);
    if (chain.size() > 1) b.files = b.files.WithFallback(chain.front().file.name);
    for (size_t k = 1; k < chain.size(); ++k) {
      b.loaded_files.push_back(chain[k].file.display);
      Layer layer{chain[k].file.name, chain[k].entries, {}};
      CheckLayer(layer);
      for (const YamlEntry& entry : layer.entries) {
        if (entry.key == kRulesKey)
          b.rules = entry.value;
        else
          b.values.insert_or_assign(entry.key, entry.value);
      }
    }
  }

  void LoadRoot(ResolvedBase& b, const FileText& base, const std::vector<YamlEntry>& base_entries) {
    b.loaded_files.push_back(base.display);
    b.base_name = base.name;
    for (const YamlEntry& entry : base_entries) {
      b.defaults.insert_or_assign(entry.key, config_internal::NoneStringToNull(entry.value));
      b.base_keys.insert(entry.key);
    }
    // Every key's type comes from the base, so an overlay given first would make most
    // keys unknown; say what went wrong instead.
    if (!b.defaults.contains("mesh_axes") || !b.defaults.contains(kRulesKey)) {
      Fail(
          "{} is not a MaxText base.yml (it defines no mesh_axes / logical_axis_rules); give "
          "base.yml first, further files merge over it",
          base.name);
    }
    // Keys this base.yml lacks (other MaxText era, types.py-only keys) get built-in
    // defaults, so they are known, typed and readable.
    for (const YamlEntry& entry : config_internal::FallbackDefaults(source_.yaml_cache)) {
      b.defaults.try_emplace(entry.key, entry.value);
    }
    b.known_keys.reserve(b.defaults.size());
    for (const auto& [key, value] : b.defaults) b.known_keys.push_back(key);
    b.values = b.defaults;
    const auto rules = b.values.find(kRulesKey);
    if (rules != b.values.end()) {
      CheckRuleList(rules->second, fmt::format(" (in {})", base.name));
      b.rules = rules->second;
    }
  }

  // Parses one file. What is legal for MaxText but likely a mistake (a repeated key, a second
  // YAML document) is a warning: it never changes the result, and it shows even when a later
  // check fails (Config::Load passes it on with the Error).
  std::vector<YamlEntry> Parse(const FileText& file) const {
    return config_internal::ParseConfigYaml(file.text, file.name, warnings_, source_.yaml_cache);
  }

  // Parses, key-checks and type-checks one config file.
  Layer CheckedLayer(const FileText& file) const {
    Layer layer{file.name, Parse(file), {}};
    CheckLayer(layer);
    return layer;
  }

  void CheckLayer(Layer& layer) const {
    const std::string in = layer.name.empty() ? "" : fmt::format(" in {}", layer.name);
    const std::string where = layer.name.empty() ? "" : fmt::format(" (in {})", layer.name);
    for (YamlEntry& entry : layer.entries) {
      layer.spelled.insert_or_assign(entry.key, entry.value);
      const auto known = base_->defaults.find(entry.key);
      if (known == base_->defaults.end()) {
        const std::vector<std::string> close =
            config_internal::SuggestKeys(entry.key, base_->known_keys);
        const std::string hint =
            close.empty() ? "" : fmt::format(" (did you mean {}?)", fmt::join(close, ", "));
        Fail("unknown config key '{}'{}{}", entry.key, in, hint);
      }
      if (config_internal::IsDerivedOnlyKey(entry.key)) {
        Fail("{} is derived by pyconfig and cannot be set{}; set {} instead", entry.key, where,
             config_internal::DerivedSourceKey(entry.key));
      }
      entry.value = config_internal::NoneStringToNull(entry.value);
      if (!config_internal::IsUntypedKey(entry.key)) {
        entry.value = CoerceToDefaultType(entry.key, entry.value, known->second, where);
      }
      if (entry.key == kRulesKey) CheckRuleList(entry.value, where);
    }
  }

  // Ordinary keys replace; logical_axis_rules merge by name unless this same layer sets
  // override_logical_axis_rules, which (as in pyconfig) replaces the list with this
  // layer's rules, or with none at all when the layer gives none.
  void ApplyLayer(const Layer& layer) {
    const ConfigValue* flag = FindEntry(layer, "override_logical_axis_rules");
    const bool replace_rules = flag != nullptr && flag->type == ConfigValue::Type::kBool && flag->b;
    const ConfigValue* layer_rules = FindEntry(layer, kRulesKey);
    // A layer without rules (the overrides, usually) merges nothing: the rules stand as they are.
    if (layer_rules != nullptr || replace_rules) {
      const ConfigValue new_rules = layer_rules != nullptr ? *layer_rules : EmptyList();
      rules_ = replace_rules ? new_rules : MergeRulesByName(rules_, new_rules);
    }
    for (const YamlEntry& entry : layer.entries) {
      if (entry.key != kRulesKey) values_.insert_or_assign(entry.key, entry.value);
    }
  }

  Layer ParseOverrides() const {
    Layer layer;
    for (const std::string& argument : source_.overrides) {
      const size_t equals = argument.find('=');
      if (equals == std::string::npos || equals == 0) {
        Fail("malformed override '{}': expected key=value", argument);
      }
      layer.entries.push_back(
          YamlEntry{argument.substr(0, equals),
                    source_.yaml_cache
                        ? source_.yaml_cache->OverrideValue(
                              std::string_view(argument).substr(equals + 1), argument)
                        : config_internal::ParseOverrideValue(
                              std::string_view(argument).substr(equals + 1), argument)});
    }
    CheckLayer(layer);
    return layer;
  }

  // A key of the base (+ extra files) as overridden on the command line: what pyconfig
  // sees when it decides model_name and override_model_config.
  const ConfigValue& BeforeModel(const Layer& overrides, std::string_view key) const {
    const ConfigValue* override_value = FindEntry(overrides, key);
    return override_value != nullptr ? *override_value : LookUp(values_, key);
  }

  void LoadModel(const Layer& overrides) {
    const ConfigValue& name_value = BeforeModel(overrides, "model_name");
    if (name_value.type == ConfigValue::Type::kNull) return;
    std::string model_name = config_internal::ValueAsString("model_name", name_value);
    // Instruct variants share the base model's architecture file.
    for (size_t pos = model_name.find("-Instruct"); pos != std::string::npos;
         pos = model_name.find("-Instruct")) {
      model_name.erase(pos, 9);
    }
    if (model_name == "default") return;

    // pyconfig looks beside the config it was started with, then one folder up.
    const std::string relative = fmt::format("models/{}.yml", model_name);
    const std::optional<FileText> file =
        files_.Find(relative, /*configs_fallback=*/true, source_.yaml_cache);
    if (!file) {
      const std::vector<std::string> close = config_internal::SuggestKeys(
          model_name, files_.Names("models", /*configs_fallback=*/true));
      Fail("model_name '{}': model file not found: {}{}{}", model_name,
           files_.Where(relative, /*configs_fallback=*/true),
           close.empty() ? "" : fmt::format(" (did you mean {}?)", fmt::join(close, ", ")),
           files_.embedded()
               ? fmt::format("; the embedded configs are MaxText {}'s: for a model of another "
                             "MaxText, give its base.yml first ("
                             "path/to/maxtext/configs/base.yml model_name={})",
                             kEmbeddedMaxTextRevision, model_name)
               : "");
    }
    Layer model = CheckedLayer(*file);

    // pyconfig reads it as the overrides spell it, before pydantic converts it, by Python's
    // truth: the string "false" lets the overrides win (and the key is False afterwards).
    const auto spelled = overrides.spelled.find("override_model_config");
    const bool override_model =
        spelled != overrides.spelled.end()
            ? config_internal::PythonTruth(spelled->second)
            : config_internal::ValueAsBool("override_model_config",
                                           LookUp(values_, "override_model_config"));
    if (override_model) {
      // The override wins: drop the model's value (its rules too) for every overridden key.
      std::erase_if(model.entries, [&overrides](const YamlEntry& entry) {
        return FindEntry(overrides, entry.key) != nullptr;
      });
    } else {
      for (const YamlEntry& entry : model.entries) {
        const auto override_value = overrides.spelled.find(entry.key);
        // pyconfig only objects when the two values differ as spelled, before pydantic
        // converts them: a model's 8 and an override's "8" differ.
        const ConfigValue& model_value = model.spelled.at(entry.key);
        if (override_value != overrides.spelled.end() &&
            !config_internal::SameValue(model_value, override_value->second)) {
          Fail(
              "{} is set both by {} ({}) and by the overrides ({}); add override_model_config=true "
              "to let the override win",
              entry.key, file->name, model_value.ToString(), override_value->second.ToString());
        }
      }
    }
    loaded_files_.push_back(file->display);
    ApplyLayer(model);
  }

  // custom_mesh_and_rule=<name> swaps in a whole sharding strategy: its mesh_axes,
  // data_sharding and logical_axis_rules replace the merged ones outright.
  void LoadCustomMeshAndRule() {
    const ConfigValue& name_value = LookUp(values_, "custom_mesh_and_rule");
    if (name_value.type == ConfigValue::Type::kNull) return;
    const std::string name = config_internal::ValueAsString("custom_mesh_and_rule", name_value);
    if (name.empty()) return;
    const std::string relative = fmt::format("custom_mesh_and_rule/{}.yml", name);
    const std::optional<FileText> file = files_.Find(relative);
    if (!file) {
      Fail("custom_mesh_and_rule '{}': file not found: {}", name, files_.Where(relative));
    }
    const Layer layer = CheckedLayer(*file);
    loaded_files_.push_back(file->display);
    for (const YamlEntry& entry : layer.entries) {
      if (entry.key == kRulesKey) {
        rules_ = entry.value;
      } else {
        values_.insert_or_assign(entry.key, entry.value);
      }
    }
  }

  const ConfigSource& source_;
  std::vector<Warning>* warnings_;
  std::string_view embedded_root_;
  ConfigFiles files_;  // gains the base_config chain's folder as a fallback in LoadBase
  std::shared_ptr<const ResolvedBase> base_;  // the base chain's defaults, types and keys
  LayeredValues values_;
  ConfigValue rules_ = EmptyList();
  std::vector<std::string> loaded_files_;
};



}  // namespace

Config Config::Load(const ConfigSource& source, std::string_view maxtext_revision) {
  // A bad --maxtext-revision fails before any file is read.
  std::optional<MaxTextRevision> named;
  if (!maxtext_revision.empty()) named = NamedRevision(maxtext_revision);
  std::vector<Warning> warnings = source.warnings;
  // Read when an Error passes: every warning found up to the failure.
  return WarnedBefore(warnings, [&] {
    // Naming the release with no config file loads the release's own embedded files.
    const std::string_view root =
        named && named->id == RevisionId::kRelease ? kEmbeddedReleaseRoot : std::string_view();
    Resolver resolver(source, &warnings, root);
    resolver.Run();

    auto data = std::make_shared<Data>();
    data->values = std::make_shared<const LayeredValues>(std::move(resolver.values()));
    data->loaded_files = std::move(resolver.loaded_files());
    data->revision = named ? *named : DetectRevision(resolver.base_keys(), resolver.base_name());
    for (const std::string_view key : {"mesh_axes", "data_sharding", "logical_axis_rules"}) {
      if (!data->values->contains(key)) Fail("{} defines no {}", resolver.base_name(), key);
    }
    data->rules = config_internal::ToAxisRules(LookUp(*data->values, "logical_axis_rules"));
    data->mesh_axes = config_internal::ToMeshAxes(LookUp(*data->values, "mesh_axes"));
    data->data_sharding = config_internal::ToDataSharding(LookUp(*data->values, "data_sharding"));
    data->warnings = warnings;
    Config config;
    config.data_ = std::move(data);
    return config;
  });
}

bool Config::Has(std::string_view key) const { return data_->values && data_->values->contains(key); }

const ConfigValue& Config::Get(std::string_view key) const {
  if (!data_->values) Fail("config has no key '{}'", key);
  return LookUp(*data_->values, key);
}

void Config::ForEachValue(
    const std::function<void(const std::string&, const ConfigValue&)>& visit) const {
  if (data_->values) data_->values->ForEach(visit);
}

int64_t Config::Int(std::string_view key) const {
  return config_internal::ValueAsInt(key, Get(key));
}

double Config::Float(std::string_view key) const {
  return config_internal::ValueAsFloat(key, Get(key));
}

bool Config::Bool(std::string_view key) const {
  return config_internal::ValueAsBool(key, Get(key));
}

std::string Config::Str(std::string_view key) const {
  return config_internal::ValueAsString(key, Get(key));
}

std::vector<std::string> Config::StrList(std::string_view key) const {
  return config_internal::ValueAsStringList(key, Get(key));
}

namespace {

std::optional<double> AsNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::string> AwayFromDefault(const Config& config, std::string_view key,
                                           std::string_view default_value) {
  if (!config.Has(key)) return std::nullopt;
  std::string value = config.Get(key).ToString();
  if (value == default_value) return std::nullopt;
  const std::optional<double> a = AsNumber(value), b = AsNumber(std::string(default_value));
  if (a && b && *a == *b) return std::nullopt;
  return value;
}

}  // namespace shardtrace
