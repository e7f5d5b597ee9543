#include "config/run_inputs.h"

#include <algorithm>

#include "config/case_config.h"
#include "config/mesh_config.h"
#include "util/error.h"

namespace shardtrace {

ConfigSource SplitArgs(const std::vector<std::string>& args, ParsedYamlCache* cache) {
  ConfigSource source;
  std::vector<std::string> case_overrides;  // a case file's keys, before the user's overrides
  std::optional<std::string> case_base;
  for (const std::string& arg : args) {
    if (arg.rfind(kRevisionArg, 0) == 0) continue;
    if (arg.find('=') != std::string::npos) {
      source.overrides.push_back(arg);
    } else if (cache ? cache->IsCase(arg) : IsCaseConfig(arg)) {
      CaseConfig c = WarnedBefore(source.warnings, [&] { return ReadCaseConfig(arg); });
      AddWarnings(source.warnings, c.warnings);
      case_overrides.insert(case_overrides.end(), c.overrides.begin(), c.overrides.end());
      if (!case_base && c.base) case_base = c.base;
      source.case_files.push_back(arg);
    } else {
      source.files.push_back(arg);
    }
  }
  // A CONFIG the user gives is the base; else the first case file's base_config.
  if (source.files.empty() && case_base) source.files.push_back(*case_base);
  source.overrides.insert(source.overrides.begin(), case_overrides.begin(), case_overrides.end());
  return source;
}

std::vector<std::string> WithOverrides(std::vector<std::string> args,
                                       const std::vector<std::string>& more) {
  for (const std::string& kv : more) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    const auto same = std::find_if(args.begin(), args.end(),
                                   [&](const std::string& a) { return a.rfind(key, 0) == 0; });
    if (same == args.end()) {
      args.push_back(kv);
      continue;
    }
    *same = kv;
    // MaxText takes a key's last value: a second setting of it in `args` would undo this one.
    args.erase(std::remove_if(std::next(same), args.end(),
                              [&](const std::string& a) { return a.rfind(key, 0) == 0; }),
               args.end());
  }
  return args;
}

std::string RevisionArg(const std::vector<std::string>& args) {
  std::string name;
  for (const std::string& arg : args)
    if (arg.rfind(kRevisionArg, 0) == 0) name = arg.substr(kRevisionArg.size());
  return name;
}

Config LoadRunConfig(const std::vector<std::string>& args, const std::vector<Warning>& earlier,
                     ParsedYamlCache* cache) {
  ConfigSource source = WarnedBefore(earlier, [&] { return SplitArgs(args, cache); });
  source.yaml_cache = cache;
  std::vector<Warning> warnings = earlier;
  AddWarnings(warnings, source.warnings);
  source.warnings = warnings;
  return Config::Load(source, RevisionArg(args));
}

RunInputs WithMesh(Config config, std::optional<int64_t> devices) {
  Mesh mesh = WarnedBefore(config.warnings(), [&] { return MeshFromConfig(config, devices); });
  std::vector<Warning> warnings = config.warnings();
  AddWarnings(warnings, MeshWarnings(config));
  return {std::move(config), std::move(mesh), std::move(warnings)};
}

RunInputs LoadRunInputs(const std::vector<std::string>& args, std::optional<int64_t> devices,
                        const std::vector<Warning>& earlier, ParsedYamlCache* cache) {
  return WithMesh(LoadRunConfig(args, earlier, cache), devices);
}

}  // namespace shardtrace
