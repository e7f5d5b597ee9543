#include "config/override_file.h"

#include "config/yaml_value.h"
#include "io/input_file.h"
#include "util/error.h"
#include "util/warnings.h"

namespace shardtrace {

std::vector<std::string> OverridesFromYamlFile(const std::string& path) {
  const std::string text = ReadInputFile(path, "golden case config");
  std::vector<std::string> warnings;
  const std::vector<config_internal::YamlEntry> entries =
      config_internal::ParseConfigYaml(text, path, &warnings);
  for (const std::string& w : warnings) Warn(w);
  std::vector<std::string> overrides;
  overrides.reserve(entries.size());
  for (const config_internal::YamlEntry& e : entries)
    overrides.push_back(e.key + "=" + config_internal::ToYamlFlow(e.value));
  return overrides;
}

}  // namespace shardtrace
