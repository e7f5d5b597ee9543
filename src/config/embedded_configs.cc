#include "config/embedded_configs.h"

#include <algorithm>

namespace shardtrace {

std::optional<std::string_view> FindEmbeddedConfig(std::string_view path) {
  const std::span<const EmbeddedFile> files = EmbeddedConfigFiles();
  // The generator sorts the table by path, so a binary search is valid.
  const auto it = std::lower_bound(
      files.begin(), files.end(), path,
      [](const EmbeddedFile& file, std::string_view key) { return file.path < key; });
  if (it == files.end() || it->path != path) return std::nullopt;
  return it->text;
}

}  // namespace shardtrace
