#include "config/config_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "config/embedded_configs.h"
#include "config/parsed_yaml_cache.h"
#include "io/input_file.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

// `relative`: the path in the embedded table, under its tree's root.
FileText EmbeddedText(std::string_view relative, std::string_view text) {
  const std::string_view revision = relative.starts_with(kEmbeddedReleaseRoot)
                                        ? kEmbeddedReleaseRevision
                                        : kEmbeddedMaxTextRevision;
  return FileText{fmt::format("embedded {} (MaxText {})", relative, revision),
                  fmt::format("embedded:{}", relative), std::string(text)};
}

}  // namespace

FileText ReadConfigFile(const std::filesystem::path& path) {
  const std::string shown = path.string();
  return FileText{shown, shown, ReadInputFile(shown, "config file")};
}

ConfigFiles ConfigFiles::Embedded(std::string_view root) {
  return ConfigFiles(true, {}, std::string(root));
}

ConfigFiles ConfigFiles::BesideBase(std::filesystem::path base_path) {
  return ConfigFiles(false, std::move(base_path));
}

FileText ConfigFiles::Base() const {
  if (!embedded_) return ReadConfigFile(base_path_);
  const std::string path = root_ + "base.yml";
  const std::optional<std::string_view> text = FindEmbeddedConfig(path);
  // The build embeds src/config/maxtext/base.yml and release/base.yml; an absence is a build bug.
  if (!text) throw std::logic_error("embedded " + path + " missing from the binary");
  return EmbeddedText(path, *text);
}

std::optional<FileText> ConfigFiles::Find(std::string_view relative, bool configs_fallback,
                                          ParsedYamlCache* cache) const {
  if (embedded_) {
    const std::string path = root_ + std::string(relative);
    const std::optional<std::string_view> text = FindEmbeddedConfig(path);
    if (!text) return std::nullopt;
    return EmbeddedText(path, *text);
  }
  std::vector<std::filesystem::path> places = {base_path_.parent_path() / relative};
  if (configs_fallback) places.push_back(base_path_.parent_path().parent_path() / relative);
  if (!fallback_path_.empty()) places.push_back(fallback_path_.parent_path() / relative);
  for (const std::filesystem::path& path : places) {
    if (cache) {
      if (const std::shared_ptr<const FileText> file = cache->File(path.string())) return *file;
      continue;
    }
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return ReadConfigFile(path);
  }
  return std::nullopt;
}

std::vector<std::string> ConfigFiles::Names(std::string_view folder, bool configs_fallback) const {
  std::set<std::string> names;
  const std::string prefix = fmt::format("{}{}/", root_, folder);
  if (embedded_) {
    for (const EmbeddedFile& f : EmbeddedConfigFiles())
      if (f.path.starts_with(prefix) && f.path.ends_with(".yml"))
        names.insert(std::string(f.path.substr(prefix.size(), f.path.size() - prefix.size() - 4)));
    return {names.begin(), names.end()};
  }
  std::vector<std::filesystem::path> dirs = {base_path_.parent_path() / folder};
  if (configs_fallback) dirs.push_back(base_path_.parent_path().parent_path() / folder);
  if (!fallback_path_.empty()) dirs.push_back(fallback_path_.parent_path() / folder);
  for (const std::filesystem::path& dir : dirs) {
    std::error_code error;
    int listed = 0;  // a config folder holds tens of files; stop at a sane bound
    for (std::filesystem::directory_iterator it(dir, error), end;
         !error && it != end && listed < 10000; it.increment(error), ++listed)
      if (it->path().extension() == ".yml") names.insert(it->path().stem().string());
  }
  return {names.begin(), names.end()};
}

std::string ConfigFiles::Where(std::string_view relative, bool configs_fallback) const {
  if (embedded_) return fmt::format("embedded {}{}", root_, relative);
  std::string places = (base_path_.parent_path() / relative).string();
  if (configs_fallback)
    places += fmt::format(" or {}", (base_path_.parent_path().parent_path() / relative).string());
  if (!fallback_path_.empty())
    places += fmt::format(" or {}", (fallback_path_.parent_path() / relative).string());
  return places;
}

}  // namespace shardtrace::config_internal
