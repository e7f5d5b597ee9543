#include "config/yaml_value.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdlib>
#include <limits>
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

std::vector<YamlEntry> ParseConfigYaml(std::string_view text, std::string_view display_path) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    // yaml-cpp marks are 0-based; editors and compilers count from 1.
    Fail("{}:{}:{}: {}", display_path, e.mark.line + 1, e.mark.column + 1, e.msg);
  } catch (const YAML::Exception& e) {
    Fail("{}: {}", display_path, e.what());
  }
  std::vector<YamlEntry> entries;
  if (root.IsNull()) return entries;  // an empty (or all-comment) file sets nothing
  if (!root.IsMap()) {
    Fail("{}:{}:{}: expected a mapping of `key: value` at the top level", display_path,
         root.Mark().line + 1, root.Mark().column + 1);
  }
  for (const auto& item : root) {
    if (!item.first.IsScalar()) {
      Fail("{}:{}:{}: expected a plain key", display_path, item.first.Mark().line + 1,
           item.first.Mark().column + 1);
    }
    entries.push_back(YamlEntry{item.first.Scalar(), NodeToValue(item.second)});
  }
  return entries;
}

ConfigValue ParseOverrideValue(std::string_view text, std::string_view argument) {
  if (text.empty()) {
    ConfigValue empty;
    empty.type = ConfigValue::Type::kString;
    return empty;
  }
  try {
    return NodeToValue(YAML::Load(std::string(text)));
  } catch (const YAML::ParserException& e) {
    // Report the column within the whole "key=value" argument the user typed.
    const size_t value_offset = argument.size() - text.size();
    Fail("override '{}': value is not valid YAML at column {}: {}", argument,
         value_offset + e.mark.column + 1, e.msg);
  } catch (const YAML::Exception& e) {
    Fail("override '{}': {}", argument, e.what());
  }
}

}  // namespace shardtrace::config_internal
