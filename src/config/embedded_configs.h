// The MaxText configuration files compiled into the shardtrace binary: the seed-era
// (MaxText 313890777) base.yml, models/*.yml and custom_mesh_and_rule/*.yml copied under
// src/config/maxtext/. They let `shardtrace trace` run with no config file at all and fix
// the rule set to the one the re-implemented moe.py was written against. The table is
// generated at build time by scripts/embed_configs.cmake; paths are relative to
// src/config/maxtext ("base.yml", "models/deepseek3-671b.yml",
// "custom_mesh_and_rule/pure-fsdp.yml"). Licence and provenance: NOTICE.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace shardtrace {

struct EmbeddedFile {
  std::string_view path;  // relative to src/config/maxtext, '/'-separated
  std::string_view text;  // the file's exact bytes
};

// Every embedded file, sorted by path. Defined in the generated embedded_configs_data.cc.
std::span<const EmbeddedFile> EmbeddedConfigFiles();

// The text of one embedded file, or std::nullopt when no file has that path.
std::optional<std::string_view> FindEmbeddedConfig(std::string_view path);

// The MaxText revision the embedded files were copied from (short form, for messages).
inline constexpr std::string_view kEmbeddedMaxTextRevision = "313890777";

}  // namespace shardtrace
