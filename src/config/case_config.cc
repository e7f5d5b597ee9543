#include "config/case_config.h"

#include <filesystem>
#include <sstream>
#include <system_error>

#include "config/base_config_chain.h"
#include "config/config_files.h"
#include "config/parsed_yaml_cache.h"
#include "config/yaml_value.h"
#include "util/error.h"

namespace shardtrace {
namespace {

bool HasMarkerLine(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line == kCaseMarker) return true;
  }
  return false;
}

}  // namespace

bool IsCaseConfig(const std::string& path, ParsedYamlCache* cache) {
  if (cache) {
    const std::shared_ptr<const config_internal::FileText> file = cache->File(path);
    return file && HasMarkerLine(file->text);
  }
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  return HasMarkerLine(config_internal::ReadConfigFile(path).text);
}

CaseConfig ReadCaseConfig(const std::string& path) {
  const config_internal::FileText file = config_internal::ReadConfigFile(path);
  CaseConfig c;
  const std::vector<config_internal::YamlEntry> entries =
      config_internal::ParseConfigYaml(file.text, file.name, &c.warnings);
  for (const config_internal::YamlEntry& e : entries) {
    if (e.key != "base_config") {
      c.overrides.push_back(e.key + "=" + config_internal::ToYamlFlow(e.value));
      continue;
    }
    if (e.value.type != ConfigValue::Type::kString)
      Fail("base_config (in {}): expected the path of a config file, got {}", path,
           e.value.ToString());
    c.base = config_internal::LocateInclude(path, e.value.s).lexically_normal().string();
  }
  return c;
}

}  // namespace shardtrace
