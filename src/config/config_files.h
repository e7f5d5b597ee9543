// Where MaxText config files come from. Given a base.yml path, model and
// custom_mesh_and_rule files are looked up beside it (<dir>/models/X.yml,
// <dir>/custom_mesh_and_rule/Y.yml), as pyconfig does; with no path, all three come from
// the embedded copies (config/embedded_configs.h): the seed era's, or the release's under
// kEmbeddedReleaseRoot. Each file carries the name
// shown in errors and in Config::loaded_files().
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardtrace {
class ParsedYamlCache;
}  // namespace shardtrace

namespace shardtrace::config_internal {

struct FileText {
  std::string display;  // "embedded models/x.yml (MaxText 313890777)" or the path
  std::string name;     // short name for error locations: the path, or "embedded:<rel>"
  std::string text;
};

// Reads a file from disk; throws Error naming the path when it is missing or unreadable.
FileText ReadConfigFile(const std::filesystem::path& path);

class ConfigFiles {
 public:
  // `root`: "" (the seed era's files) or kEmbeddedReleaseRoot.
  static ConfigFiles Embedded(std::string_view root = "");
  static ConfigFiles BesideBase(std::filesystem::path base_path);

  FileText Base() const;
  // A file relative to base.yml's directory ("models/x.yml"), or nullopt when absent.
  // With `configs_fallback`, a file missing there is also looked up relative to the parent
  // directory, as pyconfig finds a model file when the config it was started with sits in
  // <configs>/models/ and includes base.yml through base_config.
  // `cache`: the file read through it (config/parsed_yaml_cache.h).
  std::optional<FileText> Find(std::string_view relative, bool configs_fallback = false,
                               ParsedYamlCache* cache = nullptr) const;
  // Where Find looked, for "not found" messages.
  std::string Where(std::string_view relative, bool configs_fallback = false) const;
  // The names (without .yml) of the files in `folder` ("models") where Find would look,
  // sorted and distinct: the candidates a "did you mean" picks from.
  std::vector<std::string> Names(std::string_view folder, bool configs_fallback = false) const;
  bool embedded() const { return embedded_; }
  // A last place to look, as pyconfig falls back to its installed configs folder: the folder
  // of the base.yml a base_config chain ends in, when the started file lives elsewhere.
  ConfigFiles WithFallback(std::filesystem::path base_path) const {
    ConfigFiles f = *this;
    f.fallback_path_ = std::move(base_path);
    return f;
  }

 private:
  ConfigFiles(bool embedded, std::filesystem::path base_path, std::string root = "")
      : embedded_(embedded), base_path_(std::move(base_path)), root_(std::move(root)) {}

  bool embedded_;
  std::filesystem::path base_path_;
  std::string root_;  // embedded: the folder of the embedded tree, "" or "release/"
  std::filesystem::path fallback_path_;  // empty: none
};

}  // namespace shardtrace::config_internal
