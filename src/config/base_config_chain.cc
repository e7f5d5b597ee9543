#include "config/base_config_chain.h"

#include <algorithm>
#include <system_error>

#include "config/config_value.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

constexpr std::string_view kIncludeKey = "base_config";

const ConfigValue* IncludeOf(const std::vector<YamlEntry>& entries) {
  const ConfigValue* found = nullptr;
  for (const YamlEntry& entry : entries) {
    if (entry.key == kIncludeKey) found = &entry.value;  // a repeated key: the last wins
  }
  return found;
}

bool IsFile(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

}  // namespace

std::filesystem::path LocateInclude(const std::filesystem::path& including,
                                    const std::string& named) {
  const std::filesystem::path path(named);
  if (path.is_absolute()) {
    if (!IsFile(path)) Fail("base_config '{}' (in {}): no such file", named, including.string());
    return path;
  }
  const std::filesystem::path beside = including.parent_path() / path;
  if (IsFile(beside)) return beside;
  // One folder up, written relative to the including file's folder: a file named without a
  // folder (`x.yml`, run from inside models/) has no parent_path() to climb from.
  const std::filesystem::path configs = (including.parent_path() / ".." / path).lexically_normal();
  if (IsFile(configs)) return configs;
  Fail("base_config '{}' (in {}): found neither at {} nor at {}", named, including.string(),
       beside.string(), configs.string());
}

namespace {

// A name for the cycle check that two spellings of one file share.
std::string Identity(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, error);
  return error ? path.lexically_normal().string() : canonical.string();
}

}  // namespace

std::vector<ChainFile> ResolveBaseConfigChain(const std::filesystem::path& top,
                                              std::vector<Warning>* warnings,
                                              ParsedYamlCache* cache) {
  std::vector<ChainFile> chain;  // `top` first while walking; reversed at the end
  std::vector<std::string> seen;
  std::filesystem::path current = top;
  while (true) {
    const std::string identity = Identity(current);
    if (std::find(seen.begin(), seen.end(), identity) != seen.end()) {
      std::string cycle;
      for (const ChainFile& f : chain) cycle += f.file.name + " -> ";
      Fail("base_config cycle: {}{} (each file includes the next)", cycle, current.string());
    }
    seen.push_back(identity);
    FileText file = ReadConfigFile(current);
    std::vector<YamlEntry> entries = ParseConfigYaml(file.text, file.name, warnings, cache);
    const ConfigValue* include = IncludeOf(entries);
    const ConfigValue named = include == nullptr ? ConfigValue{} : NoneStringToNull(*include);
    chain.push_back(ChainFile{std::move(file), std::move(entries)});
    if (named.type == ConfigValue::Type::kNull) break;
    if (named.type != ConfigValue::Type::kString || named.s.empty()) {
      Fail("base_config (in {}): expected the path of a config file, got {}", current.string(),
           named.ToString());
    }
    current = LocateInclude(current, named.s);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace shardtrace::config_internal
