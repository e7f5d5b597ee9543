// The MaxText configuration files compiled into the shardtrace binary: the seed-era
// (MaxText 313890777) base.yml, models/*.yml and custom_mesh_and_rule/*.yml copied under
// src/config/maxtext/, and the release's under its release/ folder. They let `shardtrace trace` run
// with no config file at all and fix the rule set to the one the re-implemented moe.py was written
// against. The table is generated at build time by scripts/embed_configs.cmake; paths are relative
// to src/config/maxtext ("base.yml", "models/deepseek3-671b.yml",
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

// The release's own files (MaxText 0.2.5 from PyPI: base.yml, its MoE model files and
// custom_mesh_and_rule/) are embedded under this folder, src/config/maxtext/release/: a run
// that names the release (--maxtext-revision 0.2.5) with no config file loads them, and so
// does `fit`, whose layouts and TPU fixtures are the release's.
inline constexpr std::string_view kEmbeddedReleaseRoot = "release/";
inline constexpr std::string_view kEmbeddedReleaseRevision = "0.2.5";

}  // namespace shardtrace
