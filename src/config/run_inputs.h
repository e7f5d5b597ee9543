// The inputs every command starts from: the positional MaxText-style arguments split into
// config files and key=value overrides, loaded into a Config, and the Mesh built from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "shard/mesh.h"
#include "util/warnings.h"

namespace shardtrace {

struct RunInputs {
  Config config;
  Mesh mesh;
  // The config's warnings (Config::warnings) and the mesh's (MeshWarnings).
  std::vector<Warning> warnings;
};

// An argument `--maxtext-revision=NAME` among the others names the MaxText revision: the CLI
// puts the option there, so the revision rides with the arguments into every run a command
// derives from them (variants, reduced runs, both sides of a diff) and into the `shardtrace`
// command lines pages print.
inline constexpr std::string_view kRevisionArg = "--maxtext-revision=";

// Files and overrides; a revision argument is neither (RevisionArg reads it). `cache`: files
// read through it (config/parsed_yaml_cache.h).
ConfigSource SplitArgs(const std::vector<std::string>& args, ParsedYamlCache* cache = nullptr);
// The last `--maxtext-revision=NAME` among `args`, or empty.
std::string RevisionArg(const std::vector<std::string>& args);

// `args` with the key=value overrides `more`: a key `args` already sets takes the new value
// in place, where it first sets it, and its later settings go (so a command line built from the
// result names each key once, and none set twice by the user undoes the override); a new key is
// appended.
std::vector<std::string> WithOverrides(std::vector<std::string> args,
                                       const std::vector<std::string>& more);
// `earlier`: warnings found before (a golden case's config.yml); the inputs' warnings start
// with them, and so do those of an Error thrown on the way.
// `cache`: parsed config files shared with other loads (config/parsed_yaml_cache.h).
RunInputs LoadRunInputs(const std::vector<std::string>& args, std::optional<int64_t> devices,
                        const std::vector<Warning>& earlier = {},
                        ParsedYamlCache* cache = nullptr);

// LoadRunInputs in two steps, for a caller that reads the config before it knows the device
// count (fit: compile_topology= names it): the config alone, then its mesh on `devices`.
Config LoadRunConfig(const std::vector<std::string>& args, const std::vector<Warning>& earlier = {},
                     ParsedYamlCache* cache = nullptr);
RunInputs WithMesh(Config config, std::optional<int64_t> devices);

}  // namespace shardtrace
