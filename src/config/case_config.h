// A case's config.yml: the keys MaxText was started with as command-line overrides, and the
// base config they apply to. MaxText's oracle runs a case as `base.yml key=value ...` with
// `override_model_config`, so the case's keys win over its model file; a config *file*
// naming model_name would lose to the model file (pyconfig merges base, model, overrides).
// A case file therefore says what its keys are with one comment line, kCaseMarker, and names
// its base with MaxText's own `base_config:` key (relative to the file). SplitArgs turns such
// a file into its base (unless another CONFIG is given) plus overrides before the user's own
// key=value, so `trace CASE/config.yml`, `check CASE` and `compare-dump CASE/sharding` run
// exactly what MaxText ran (docs/maxtext-oracle.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/warnings.h"

namespace shardtrace {

class ParsedYamlCache;

inline constexpr std::string_view kCaseMarker =
    "# shardtrace: the keys below are command-line overrides";

struct CaseConfig {
  std::optional<std::string> base;     // base_config resolved beside the file; none: embedded
  std::vector<std::string> overrides;  // "key=value" in file order, base_config left out
  std::vector<Warning> warnings;       // what parsing the file found (a repeated key, ...)
};

// True when the file at `path` is a readable file holding kCaseMarker as a line of its own.
// `cache`: the file's text read through it (config/parsed_yaml_cache.h).
bool IsCaseConfig(const std::string& path, ParsedYamlCache* cache = nullptr);
// The case file's base and overrides; Error naming the file for a YAML or base_config error.
CaseConfig ReadCaseConfig(const std::string& path);

}  // namespace shardtrace
