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
RunInputs LoadRunInputs(const std::vector<std::string>& args, std::optional<int64_t> devices);

}  // namespace shardtrace
