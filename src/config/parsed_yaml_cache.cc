#include "config/parsed_yaml_cache.h"

#include <filesystem>
#include <system_error>

#include "config/case_config.h"
#include "config/config.h"
#include "config/yaml_value.h"

namespace shardtrace {

std::shared_ptr<const config_internal::FileText> ParsedYamlCache::File(const std::string& path) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = files_.find(path);
    if (it != files_.end()) return it->second;
  }
  std::shared_ptr<const config_internal::FileText> file;
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    file = std::make_shared<const config_internal::FileText>(config_internal::ReadConfigFile(path));
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  return files_.emplace(path, file).first->second;
}

bool ParsedYamlCache::IsCase(const std::string& path) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cases_.find(path);
    if (it != cases_.end()) return it->second;
  }
  const bool is_case = IsCaseConfig(path, this);
  const std::lock_guard<std::mutex> lock(mutex_);
  return cases_.emplace(path, is_case).first->second;
}

ConfigValue ParsedYamlCache::OverrideValue(std::string_view text, std::string_view argument) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = overrides_.find(argument);
    if (it != overrides_.end()) return *it->second;
  }
  auto value = std::make_shared<const ConfigValue>(config_internal::ParseOverrideValue(text, argument));
  const std::lock_guard<std::mutex> lock(mutex_);
  return *overrides_.emplace(std::string(argument), std::move(value)).first->second;
}

}  // namespace shardtrace
