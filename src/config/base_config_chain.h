// pyconfig's `base_config:` include directive. The config file MaxText is started with may
// name another config file as its base (`base_config: "base.yml"`); pyconfig loads that one
// first, recursively, and lays the including file over it key by key (an OmegaConf merge:
// lists such as logical_axis_rules are replaced, not merged by name). A relative path is
// looked up beside the including file, then in MaxText's configs folder, which for a file
// of <configs>/models/ is the parent folder. Only the file MaxText is started with is
// resolved this way: a model file loaded through model_name keeps `base_config` as an inert
// key, as pyconfig loads it without includes. A cycle is refused, naming the files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config_files.h"
#include "config/yaml_value.h"

namespace shardtrace::config_internal {

struct ChainFile {
  FileText file;
  std::vector<YamlEntry> entries;  // in file order, as ParseConfigYaml returns them
};

// `top` and the files it includes, the root (the file without base_config) first and `top`
// last. Parse warnings (repeated keys, ...) are appended to `warnings`. Throws Error naming
// the including file for a base_config that is not a string, a file found in neither place,
// or a cycle ("a.yml -> b.yml -> a.yml").
// Where pyconfig's _load_config finds `base_config: named` for `including`: beside it, else
// in the configs folder (the parent of <configs>/models/ for a model file); Error otherwise.
std::filesystem::path LocateInclude(const std::filesystem::path& including,
                                    const std::string& named);

std::vector<ChainFile> ResolveBaseConfigChain(const std::filesystem::path& top,
                                              std::vector<Warning>* warnings,
                                              ParsedYamlCache* cache = nullptr);

}  // namespace shardtrace::config_internal
