#include "config/override_file.h"

#include "config/yaml_value.h"
#include "io/input_file.h"
#include "util/error.h"

namespace shardtrace {

FileOverrides OverridesFromYamlFile(const std::string& path) {
  const std::string text = ReadInputFile(path, "golden case config");
  FileOverrides file;
  const std::vector<config_internal::YamlEntry> entries =
      config_internal::ParseConfigYaml(text, path, &file.warnings);
  file.overrides.reserve(entries.size());
  for (const config_internal::YamlEntry& e : entries)
    file.overrides.push_back(e.key + "=" + config_internal::ToYamlFlow(e.value));
  return file;
}

}  // namespace shardtrace
