#include "config/yaml_value.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// YAML 1.1 allows '_' as a digit separator (rope_max_timescale: 10_000); strip it.
std::string WithoutUnderscores(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c != '_') out.push_back(c);
  }
  return out;
}

// Decimal [-+]?[0-9][0-9_]* or hex 0x[0-9a-fA-F_]+, range-checked into int64.
bool ParseYamlInt(std::string_view text, int64_t* out) {
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  int base = 10;
  if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
    base = 16;
    body.remove_prefix(2);
    for (const char c : body) {
      if (!IsHexDigit(c) && c != '_') return false;
    }
  } else {
    if (body.empty() || !IsDigit(body[0])) return false;
    for (const char c : body) {
      if (!IsDigit(c) && c != '_') return false;
    }
  }
  // Built with append: g++ 12 -O2 warns (-Wrestrict, a known false positive) on "-" + str.
  std::string digits = negative ? "-" : "";
  digits.append(WithoutUnderscores(body));
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  *out = value;
  return true;
}

// [-+]? (digits [. digits*] | . digits) [e [-+]? digits], needing a '.' or an exponent;
// also .inf / .nan. OmegaConf accepts 1e-6 without a dot, unlike plain PyYAML.
bool ParseYamlFloat(std::string_view text, double* out) {
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    const double inf = std::numeric_limits<double>::infinity();
    *out = negative ? -inf : inf;
    return true;
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  size_t pos = 0;
  size_t mantissa_digits = 0;
  bool has_dot = false;
  bool has_exponent = false;
  while (pos < body.size() && (IsDigit(body[pos]) || (body[pos] == '_' && mantissa_digits > 0))) {
    if (body[pos] != '_') ++mantissa_digits;
    ++pos;
  }
  if (pos < body.size() && body[pos] == '.') {
    has_dot = true;
    ++pos;
    while (pos < body.size() && (IsDigit(body[pos]) || body[pos] == '_')) {
      if (body[pos] != '_') ++mantissa_digits;
      ++pos;
    }
  }
  if (mantissa_digits == 0) return false;
  if (pos < body.size() && (body[pos] == 'e' || body[pos] == 'E')) {
    has_exponent = true;
    ++pos;
    if (pos < body.size() && (body[pos] == '+' || body[pos] == '-')) ++pos;
    const size_t exponent_start = pos;
    while (pos < body.size() && IsDigit(body[pos])) ++pos;
    if (pos == exponent_start) return false;
  }
  if (pos != body.size() || (!has_dot && !has_exponent)) return false;
  const std::string clean = WithoutUnderscores(text);
  char* end = nullptr;
  const double value = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return false;
  *out = value;
  return true;
}

// Limits a hostile file cannot push past. Real configs nest 3 deep and hold a few thousand
// values; yaml-cpp itself refuses nesting beyond ~2000 while parsing.
constexpr int kMaxDepth = 32;
constexpr int64_t kMaxExpandedValues = 100000;

// Where a node is, "path:line:column", for messages.
std::string At(std::string_view path, const YAML::Node& node) {
  return fmt::format("{}:{}:{}", path, node.Mark().line + 1, node.Mark().column + 1);
}

// Counts the values `node` expands to with every alias followed, without expanding: an alias
// shares its anchor's node, and nodes are told apart by their position in the text, so each
// distinct node is counted once and reused (a 354-byte "billion laughs" file is refused
// here in microseconds). Fails past kMaxDepth or kMaxExpandedValues naming `key`.
class ExpansionCounter {
 public:
  ExpansionCounter(std::string_view path, std::string_view key) : path_(path), key_(key) {}

  int64_t Count(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth)
      Fail("{} (key '{}'): expected values nested at most {} deep, found deeper nesting",
           At(path_, node), key_, kMaxDepth);
    if (!node.IsSequence() && !node.IsMap()) return 1;
    const int pos = node.Mark().pos;
    if (pos >= 0) {
      const auto it = memo_.find(pos);
      if (it != memo_.end()) return it->second;
    }
    int64_t total = 1;
    for (const auto& item : node) {
      // Sequence iterators yield the element; map iterators a key/value pair.
      if (node.IsSequence()) {
        total += Count(item, depth + 1);
      } else {
        if (!item.first.IsScalar())
          Fail("{} (key '{}'): expected a plain scalar key, found a {}", At(path_, item.first),
               key_, item.first.IsMap() ? "mapping" : "sequence");
        total += Count(item.second, depth + 1);
      }
      if (total > kMaxExpandedValues)
        Fail(
            "{} (key '{}'): expected at most {} values with aliases expanded, found more (an "
            "alias bomb?)",
            At(path_, node), key_, kMaxExpandedValues);
    }
    if (pos >= 0) memo_[pos] = total;
    return total;
  }

 private:
  std::string_view path_;
  std::string_view key_;
  std::map<int, int64_t> memo_;
};

ConfigValue NodeToValue(const YAML::Node& node) {
  ConfigValue value;
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return value;
    case YAML::NodeType::Scalar: {
      const std::string& tag = node.Tag();
      // "!" marks a quoted scalar and "...:str" an explicit !!str: both stay text, so
      // 'True' in quotes is the string True, as in PyYAML.
      const bool is_string =
          tag == "!" || (tag.size() >= 4 && tag.compare(tag.size() - 4, 4, ":str") == 0);
      if (is_string) {
        value.type = ConfigValue::Type::kString;
        value.s = node.Scalar();
        return value;
      }
      return ResolvePlainScalar(node.Scalar());
    }
    case YAML::NodeType::Sequence:
      value.type = ConfigValue::Type::kList;
      for (const YAML::Node& item : node) value.list.push_back(NodeToValue(item));
      return value;
    case YAML::NodeType::Map:
      value.type = ConfigValue::Type::kMap;
      for (const auto& item : node) {
        value.keys.push_back(item.first.Scalar());
        value.list.push_back(NodeToValue(item.second));
      }
      return value;
  }
  return value;
}

// NodeToValue after ExpansionCounter has bounded the work.
ConfigValue CheckedNodeToValue(const YAML::Node& node, std::string_view path,
                               std::string_view key) {
  ExpansionCounter(path, key).Count(node, 1);
  return NodeToValue(node);
}

// The 1-based line of a `---` document marker that follows content (a second document), or
// 0. Markers sit at column 0; top-level content of a block scalar is always indented.
int SecondDocumentLine(std::string_view text) {
  bool content = false;
  int line = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view l = text.substr(start, end - start);
    ++line;
    const bool marker = l.starts_with("---") && (l.size() == 3 || l[3] == ' ' || l[3] == '\r');
    if (marker && content) return line;
    if (!marker && !l.empty() && l[0] != '#' && l[0] != '%' &&
        l.find_first_not_of(" \t\r") != std::string_view::npos)
      content = true;
    start = end + 1;
  }
  return 0;
}

// Double-quoted YAML: reads back as exactly `s`, a string whatever it spells.
std::string YamlQuoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

}  // namespace

ConfigValue ResolvePlainScalar(std::string_view text) {
  ConfigValue value;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return value;
  }
  // YAML 1.2 spellings plus Python's True/False; yes/no/on/off stay strings so a model
  // or run name such as "on" is not silently turned into a boolean.
  if (text == "true" || text == "True" || text == "TRUE") {
    value.type = ConfigValue::Type::kBool;
    value.b = true;
    return value;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    value.type = ConfigValue::Type::kBool;
    value.b = false;
    return value;
  }
  if (ParseYamlInt(text, &value.i)) {
    value.type = ConfigValue::Type::kInt;
    return value;
  }
  if (ParseYamlFloat(text, &value.f)) {
    value.type = ConfigValue::Type::kFloat;
    return value;
  }
  value.type = ConfigValue::Type::kString;
  value.s = std::string(text);
  return value;
}

std::vector<YamlEntry> ParseConfigYaml(std::string_view text, std::string_view display_path,
                                       std::vector<Warning>* warnings) {
  // YAML::Load, not LoadAll: yaml-cpp 0.7's LoadAll loops forever on some malformed
  // input (a 10-byte case found by fuzzing, testdata/bad/yaml-loadall-hang.case); the
  // second-document warning comes from SecondDocumentLine instead.
  std::vector<YAML::Node> documents;
  try {
    documents.push_back(YAML::Load(std::string(text)));
  } catch (const YAML::DeepRecursion& e) {
    Fail("{}:{}:{}: expected values nested at most {} deep, found deeper nesting", display_path,
         e.mark.line + 1, e.mark.column + 1, kMaxDepth);
  } catch (const YAML::ParserException& e) {
    // yaml-cpp marks are 0-based; editors and compilers count from 1.
    Fail("{}:{}:{}: {}", display_path, e.mark.line + 1, e.mark.column + 1, e.msg);
  } catch (const YAML::Exception& e) {
    Fail("{}: {}", display_path, e.what());
  }
  std::vector<YamlEntry> entries;
  if (const int second = SecondDocumentLine(text); second > 0 && warnings)
    AddWarning(*warnings,
               {WarningKind::kSecondDocument, "",
                fmt::format("{}:{}: a second YAML document ('---') follows the first; only the "
                            "first is read, as MaxText reads it",
                            display_path, second)});
  const YAML::Node& root = documents[0];
  if (root.IsNull()) return entries;  // an empty (or all-comment) file sets nothing
  if (!root.IsMap()) {
    Fail("{}: expected a mapping of `key: value` at the top level, found a {}",
         At(display_path, root), root.IsSequence() ? "sequence" : "scalar");
  }
  std::map<std::string, int, std::less<>> first_line;
  for (const auto& item : root) {
    if (!item.first.IsScalar()) {
      Fail("{}: expected a plain key, found a {}", At(display_path, item.first),
           item.first.IsMap() ? "mapping" : "sequence");
    }
    const std::string& key = item.first.Scalar();
    const int line = item.first.Mark().line + 1;
    const auto [it, fresh] = first_line.emplace(key, line);
    if (!fresh && warnings)
      AddWarning(*warnings, {WarningKind::kRepeatedKey, key,
                             fmt::format("{}:{}: key '{}' repeats the one on line {}; the later "
                                         "value is used, as MaxText's loader does",
                                         display_path, line, key, it->second)});
    entries.push_back(YamlEntry{key, CheckedNodeToValue(item.second, display_path, key)});
  }
  return entries;
}

std::string ToYamlFlow(const ConfigValue& value) {
  switch (value.type) {
    case ConfigValue::Type::kNull:
      return "null";
    case ConfigValue::Type::kBool:
      return value.b ? "true" : "false";
    case ConfigValue::Type::kInt:
      return std::to_string(value.i);
    case ConfigValue::Type::kFloat:
      return value.ToString();  // Python repr: 1e-05, 2.0, inf, nan (read back by the resolver)
    case ConfigValue::Type::kString:
      return YamlQuoted(value.s);
    case ConfigValue::Type::kList: {
      std::string out = "[";
      for (size_t k = 0; k < value.list.size(); ++k)
        out.append(k ? ", " : "").append(ToYamlFlow(value.list[k]));
      return out + "]";
    }
    case ConfigValue::Type::kMap: {
      std::string out = "{";
      for (size_t k = 0; k < value.list.size(); ++k)
        out.append(k ? ", " : "")
            .append(YamlQuoted(value.keys[k]))
            .append(": ")
            .append(ToYamlFlow(value.list[k]));
      return out + "}";
    }
  }
  return "null";
}

ConfigValue ParseOverrideValue(std::string_view text, std::string_view argument) {
  if (text.empty()) {
    ConfigValue empty;
    empty.type = ConfigValue::Type::kString;
    return empty;
  }
  try {
    return CheckedNodeToValue(YAML::Load(std::string(text)), argument, argument);
  } catch (const YAML::DeepRecursion& e) {
    Fail("override '{}': expected values nested at most {} deep, found deeper nesting", argument,
         kMaxDepth);
  } catch (const YAML::ParserException& e) {
    // Report the column within the whole "key=value" argument the user typed.
    const size_t value_offset = argument.size() - text.size();
    Fail("override '{}': value is not valid YAML at column {}: {}", argument,
         value_offset + e.mark.column + 1, e.msg);
  } catch (const YAML::Exception& e) {
    Fail("override '{}': {}", argument, e.what());
  }
}

std::vector<YamlEntry> ParseConfigYaml(std::string_view text, std::string_view display_path,
                                       std::vector<Warning>* warnings, ParsedYamlCache* cache) {
  return cache ? cache->Parse(text, display_path, warnings)
               : ParseConfigYaml(text, display_path, warnings);
}

}  // namespace shardtrace::config_internal

namespace shardtrace {

struct ParsedYamlCache::Parsed {
  std::vector<config_internal::YamlEntry> entries;
  std::vector<Warning> warnings;
};

std::vector<config_internal::YamlEntry> ParsedYamlCache::Parse(std::string_view text,
                                                               std::string_view display_path,
                                                               std::vector<Warning>* warnings) {
  std::string key(display_path);
  key.push_back('\0');
  key.append(text);
  std::shared_ptr<const Parsed> hit;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = parsed_.find(key);
    if (it != parsed_.end()) hit = it->second;
  }
  if (!hit) {
    auto fresh = std::make_shared<Parsed>();
    fresh->entries = config_internal::ParseConfigYaml(text, display_path, &fresh->warnings);
    hit = fresh;
    const std::lock_guard<std::mutex> lock(mutex_);
    parsed_.emplace(std::move(key), hit);
  }
  if (warnings) {
    for (const Warning& w : hit->warnings) AddWarning(*warnings, w);
  }
  return hit->entries;
}

}  // namespace shardtrace
