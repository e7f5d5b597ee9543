// Reading YAML text into ConfigValues the way MaxText's loader (OmegaConf over PyYAML)
// types them: plain scalars resolve to null / bool / int / float / string (True, 1.e-05
// and 10_000 included), quoted scalars stay strings, sequences become lists and
// mappings kMap. Used for config files (top level must be a `key: value` mapping) and for
// the value half of `key=value` command-line overrides. Syntax errors become one-line
// Errors "path:line:column: message" (1-based).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

#include "config/parsed_yaml_cache.h"

namespace shardtrace::config_internal {

struct YamlEntry {
  std::string key;
  ConfigValue value;
};

// The top-level mapping of a config file, in file order (a repeated key appears twice;
// the later one wins when merged, as in PyYAML). `display_path` names the file in errors.
// Bounded against hostile input before any value is built: nesting depth, aliases counted
// as expanded (an alias bomb fails fast), non-scalar keys. A repeated key or a second YAML
// document is legal for MaxText's loader, so it is appended to `warnings` (when given)
// rather than refused.
std::vector<YamlEntry> ParseConfigYaml(std::string_view text, std::string_view display_path,
                                       std::vector<Warning>* warnings = nullptr);

// `cache` when given, else ParseConfigYaml.
std::vector<YamlEntry> ParseConfigYaml(std::string_view text, std::string_view display_path,
                                       std::vector<Warning>* warnings, ParsedYamlCache* cache);

// `value` as flow YAML that ParseOverrideValue reads back to the same value (strings
// double-quoted so they stay strings).
std::string ToYamlFlow(const ConfigValue& value);

// The value text of one override (`[silu,linear]`, `float32`, `2`, `False`); an empty
// text is the empty string, as OmegaConf's from_cli reads `key=`. `argument` (the whole
// "key=value") names the override in errors.
ConfigValue ParseOverrideValue(std::string_view text, std::string_view argument);

// The YAML 1.1 typing of one unquoted scalar, e.g. "1.e-05" -> 1e-05, "True" -> True.
ConfigValue ResolvePlainScalar(std::string_view text);

}  // namespace shardtrace::config_internal
