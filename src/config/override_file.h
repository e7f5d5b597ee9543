// A flat `key: value` YAML file read as MaxText CLI overrides (a golden case's
// config.yml): each entry becomes "key=<value in YAML flow form>", in file order, so it
// merges exactly like `key=value` arguments (after the base and model files).
#pragma once

#include <string>
#include <vector>

#include "util/warnings.h"

namespace shardtrace {

struct FileOverrides {
  std::vector<std::string> overrides;  // "key=value", in file order
  std::vector<Warning> warnings;       // what parsing the file found (a repeated key, ...)
};

FileOverrides OverridesFromYamlFile(const std::string& path);

}  // namespace shardtrace
