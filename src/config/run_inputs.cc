#include "config/run_inputs.h"

#include "config/mesh_config.h"

namespace shardtrace {

ConfigSource SplitArgs(const std::vector<std::string>& args) {
  ConfigSource source;
  for (const std::string& arg : args) {
    if (arg.find('=') != std::string::npos)
      source.overrides.push_back(arg);
    else
      source.files.push_back(arg);
  }
  return source;
}

RunInputs LoadRunInputs(const std::vector<std::string>& args, std::optional<int64_t> devices) {
  Config config = Config::Load(SplitArgs(args));
  Mesh mesh = MeshFromConfig(config, devices);
  return {std::move(config), std::move(mesh)};
}

}  // namespace shardtrace
