#include "config/override_file.h"

#include <yaml-cpp/yaml.h>

#include "util/error.h"

namespace shardtrace {

std::vector<std::string> OverridesFromYamlFile(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    Fail("{}: cannot read the file", path);
  } catch (const YAML::ParserException& e) {
    Fail("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (!root.IsMap()) Fail("{}: expected a mapping of config keys to values", path);
  std::vector<std::string> overrides;
  for (const auto& item : root) {
    YAML::Emitter emitter;
    emitter.SetSeqFormat(YAML::Flow);
    emitter.SetMapFormat(YAML::Flow);
    emitter << item.second;
    overrides.push_back(item.first.as<std::string>() + "=" + emitter.c_str());
  }
  return overrides;
}

}  // namespace shardtrace
