// A cache of parsed config files, for a caller that loads the same files many times: plan fits
// hundreds of configs over one base.yml and model file, and parsing them was half its time.
// Keyed by the file's name and its whole text, so an edited file is parsed again; a result is
// immutable once stored and its warnings (a repeated key, a second document) are replayed on
// every hit, as a fresh parse would report them. Thread-safe. A ConfigSource (config.h) and a
// RunRequest (run/run_request.h) carry a pointer to one; without it every load parses.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_files.h"
#include "util/warnings.h"

namespace shardtrace {

struct ConfigValue;
namespace config_internal {
struct YamlEntry;
}  // namespace config_internal

class ParsedYamlCache {
 public:
  // config_internal::ParseConfigYaml's result for this file, parsed once.
  std::vector<config_internal::YamlEntry> Parse(std::string_view text, std::string_view display_path,
                                                std::vector<Warning>* warnings);

  // The config file at `path`, read once (a cache lives for one command, and plan reads the
  // same base.yml and model file for every config); null when no regular file is there. A read
  // that fails throws, and is tried again next time.
  std::shared_ptr<const config_internal::FileText> File(const std::string& path);
  // Whether `path` is a case config (config/case_config.h's IsCaseConfig), decided once.
  bool IsCase(const std::string& path);
  // config_internal::ParseOverrideValue's value of a key=value argument, parsed once (an
  // override that fails to parse throws each time).
  ConfigValue OverrideValue(std::string_view text, std::string_view argument);

  // The state a base.yml chain resolves to (every key's default and type, the chain merged),
  // which Config::Load starts each config from (config.cc). Keyed by the first file's path
  // and text: the files it includes are read when the key is first stored, and a cache lives
  // for one command.
  struct ResolvedBase;
  std::shared_ptr<const ResolvedBase> FindBase(const std::string& key);
  // Stores `base` unless another thread stored the key first; returns the stored one.
  std::shared_ptr<const ResolvedBase> StoreBase(const std::string& key,
                                                std::shared_ptr<const ResolvedBase> base);

 private:
  struct Parsed;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Parsed>, std::less<>> parsed_;
  std::map<std::string, std::shared_ptr<const ResolvedBase>, std::less<>> bases_;
  std::map<std::string, std::shared_ptr<const config_internal::FileText>, std::less<>> files_;
  std::map<std::string, bool, std::less<>> cases_;
  std::map<std::string, std::shared_ptr<const ConfigValue>, std::less<>> overrides_;
};

}  // namespace shardtrace
