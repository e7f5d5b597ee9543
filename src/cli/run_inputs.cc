#include "cli/run_inputs.h"

#include "io/atomic_file.h"

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

RunInputs LoadRunInputs(const CommonOptions& options) {
  Config config = Config::Load(SplitArgs(options.args));
  Mesh mesh = Mesh::FromConfig(config, options.devices);
  return {std::move(config), std::move(mesh)};
}

void WriteOutput(const CommonOptions& options, const std::string& text, std::ostream& out) {
  if (options.output.empty()) {
    out << text;
  } else {
    WriteTextAtomically(options.output, text);
  }
}

}  // namespace shardtrace
