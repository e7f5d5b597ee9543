#include "config/config_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/embedded_configs.h"
#include "io/input_file.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

FileText EmbeddedText(std::string_view relative, std::string_view text) {
  return FileText{fmt::format("embedded {} (MaxText {})", relative, kEmbeddedMaxTextRevision),
                  fmt::format("embedded:{}", relative), std::string(text)};
}

}  // namespace

FileText ReadConfigFile(const std::filesystem::path& path) {
  const std::string shown = path.string();
  return FileText{shown, shown, ReadInputFile(shown, "config file")};
}

ConfigFiles ConfigFiles::Embedded() { return ConfigFiles(true, {}); }

ConfigFiles ConfigFiles::BesideBase(std::filesystem::path base_path) {
  return ConfigFiles(false, std::move(base_path));
}

FileText ConfigFiles::Base() const {
  if (!embedded_) return ReadConfigFile(base_path_);
  const std::optional<std::string_view> text = FindEmbeddedConfig("base.yml");
  // The build embeds src/config/maxtext/base.yml; its absence is a build bug.
  if (!text) throw std::logic_error("embedded base.yml missing from the binary");
  return EmbeddedText("base.yml", *text);
}

std::optional<FileText> ConfigFiles::Find(std::string_view relative) const {
  if (embedded_) {
    const std::optional<std::string_view> text = FindEmbeddedConfig(relative);
    if (!text) return std::nullopt;
    return EmbeddedText(relative, *text);
  }
  const std::filesystem::path path = base_path_.parent_path() / std::filesystem::path(relative);
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return std::nullopt;
  return ReadConfigFile(path);
}

std::string ConfigFiles::Where(std::string_view relative) const {
  if (embedded_) return fmt::format("embedded {}", relative);
  return (base_path_.parent_path() / std::filesystem::path(relative)).string();
}

}  // namespace shardtrace::config_internal
