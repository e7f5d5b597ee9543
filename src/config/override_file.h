// A flat `key: value` YAML file read as MaxText CLI overrides (a golden case's
// config.yml): each entry becomes "key=<value in YAML flow form>", in file order, so it
// merges exactly like `key=value` arguments (after the base and model files).
#pragma once

#include <string>
#include <vector>

namespace shardtrace {

std::vector<std::string> OverridesFromYamlFile(const std::string& path);

}  // namespace shardtrace
