// The inputs every command starts from: the positional MaxText-style arguments split into
// config files and key=value overrides, loaded into a Config, and the Mesh built from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "shard/mesh.h"

namespace shardtrace {

struct RunInputs {
  Config config;
  Mesh mesh;
};

ConfigSource SplitArgs(const std::vector<std::string>& args);

// `args` with the key=value overrides `more`: a key `args` already sets takes the new value
// in place (so a command line built from the result names each key once), a new key is
// appended.
std::vector<std::string> WithOverrides(std::vector<std::string> args,
                                       const std::vector<std::string>& more);
RunInputs LoadRunInputs(const std::vector<std::string>& args, std::optional<int64_t> devices);

}  // namespace shardtrace
