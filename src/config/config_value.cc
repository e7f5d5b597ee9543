#include "config/config_value.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "config/lax_scalars.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// Python's repr(float): shortest round-trip digits, positional for exponents in
// [-4, 16), scientific with a signed two-digit exponent otherwise; always has a '.' or
// an 'e' so it reads back as a float (2.0, 1e-05, 1e+16).
std::string PythonFloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), v, std::chars_format::scientific);
  const std::string sci(buffer, end);  // e.g. "-1.2345e-05"
  const size_t e_pos = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t k = negative ? 1 : 0; k < e_pos; ++k) {
    if (sci[k] != '.') digits.push_back(sci[k]);
  }
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits.substr(1));
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

// Python's repr(str): single quotes unless the text holds ' and no ".
std::string PythonStringRepr(const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    if (c == '\\' || c == quote) {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

bool IsNumeric(const ConfigValue& v) {
  return v.type == ConfigValue::Type::kBool || v.type == ConfigValue::Type::kInt ||
         v.type == ConfigValue::Type::kFloat;
}

double NumericValue(const ConfigValue& v) {
  switch (v.type) {
    case ConfigValue::Type::kBool:
      return v.b ? 1.0 : 0.0;
    case ConfigValue::Type::kInt:
      return static_cast<double>(v.i);
    default:
      return v.f;
  }
}

// Sets `to` to the value `read` holds, if any; says whether it held one.
template <typename T, typename U>
bool Assign(const std::optional<T>& read, U& to) {
  if (read) to = *read;
  return read.has_value();
}

}  // namespace

std::string ConfigValue::ToString() const {
  switch (type) {
    case Type::kNull:
      return "None";
    case Type::kBool:
      return b ? "True" : "False";
    case Type::kInt:
      return std::to_string(i);
    case Type::kFloat:
      return PythonFloatRepr(f);
    case Type::kString:
      return PythonStringRepr(s);
    case Type::kList: {
      std::string out = "[";
      for (size_t k = 0; k < list.size(); ++k) {
        if (k > 0) out += ", ";
        out += list[k].ToString();
      }
      return out + "]";
    }
    case Type::kMap: {
      std::string out = "{";
      for (size_t k = 0; k < list.size(); ++k) {
        if (k > 0) out += ", ";
        out += PythonStringRepr(keys[k]) + ": " + list[k].ToString();
      }
      return out + "}";
    }
  }
  return "?";
}

namespace config_internal {

bool SameValue(const ConfigValue& a, const ConfigValue& b) {
  using Type = ConfigValue::Type;
  if (IsNumeric(a) && IsNumeric(b)) {
    if (a.type == Type::kInt && b.type == Type::kInt) return a.i == b.i;
    return NumericValue(a) == NumericValue(b);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case Type::kNull:
      return true;
    case Type::kString:
      return a.s == b.s;
    case Type::kList:
      if (a.list.size() != b.list.size()) return false;
      for (size_t k = 0; k < a.list.size(); ++k) {
        if (!SameValue(a.list[k], b.list[k])) return false;
      }
      return true;
    case Type::kMap:
      if (a.keys.size() != b.keys.size()) return false;
      for (size_t k = 0; k < a.keys.size(); ++k) {
        bool found = false;
        for (size_t m = 0; m < b.keys.size(); ++m) {
          if (b.keys[m] == a.keys[k]) {
            if (!SameValue(a.list[k], b.list[m])) return false;
            found = true;
            break;
          }
        }
        if (!found) return false;
      }
      return true;
    default:
      return false;
  }
}

bool PythonTruth(const ConfigValue& value) {
  switch (value.type) {
    case ConfigValue::Type::kNull:
      return false;
    case ConfigValue::Type::kBool:
      return value.b;
    case ConfigValue::Type::kInt:
      return value.i != 0;
    case ConfigValue::Type::kFloat:
      return value.f != 0.0;
    case ConfigValue::Type::kString:
      return !value.s.empty();
    case ConfigValue::Type::kList:
    case ConfigValue::Type::kMap:
      return !value.list.empty();
  }
  return false;
}

std::string_view TypeDescription(ConfigValue::Type type) {
  switch (type) {
    case ConfigValue::Type::kNull:
      return "null";
    case ConfigValue::Type::kBool:
      return "a boolean";
    case ConfigValue::Type::kInt:
      return "an integer";
    case ConfigValue::Type::kFloat:
      return "a float";
    case ConfigValue::Type::kString:
      return "a string";
    case ConfigValue::Type::kList:
      return "a list";
    case ConfigValue::Type::kMap:
      return "a mapping";
  }
  return "a value";
}

ConfigValue NoneStringToNull(ConfigValue value) {
  if (value.type != ConfigValue::Type::kString || value.s.size() != 4) return value;
  std::string lower = value.s;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "none") return ConfigValue{};
  return value;
}

ConfigValue CoerceToDefaultType(std::string_view key, const ConfigValue& value,
                                const ConfigValue& default_value, std::string_view where) {
  using Type = ConfigValue::Type;
  const Type want = default_value.type;
  if (want == Type::kNull || value.type == want) return value;
  ConfigValue out;
  out.type = want;
  // A string: what pydantic's lax mode reads in it for this type (config/lax_scalars.h).
  if (value.type == Type::kString &&
      ((want == Type::kInt && Assign(LaxIntFromString(value.s), out.i)) ||
       (want == Type::kFloat && Assign(LaxFloatFromString(value.s), out.f)) ||
       (want == Type::kBool && Assign(LaxBoolFromString(value.s), out.b))))
    return out;
  switch (want) {
    case Type::kFloat:
      if (value.type == Type::kInt || value.type == Type::kBool) {
        out.f = value.type == Type::kInt ? static_cast<double>(value.i) : (value.b ? 1.0 : 0.0);
        return out;
      }
      break;
    case Type::kInt:
      // Pydantic accepts 2.0 for an int field but not 2.5, and True as 1.
      if (value.type == Type::kFloat && std::isfinite(value.f) && std::trunc(value.f) == value.f &&
          std::fabs(value.f) < 9.2e18) {
        out.i = static_cast<int64_t>(value.f);
        return out;
      }
      if (value.type == Type::kBool) {
        out.i = value.b ? 1 : 0;
        return out;
      }
      break;
    case Type::kBool:
      // 0 and 1, ints or floats; 2 is refused.
      if ((value.type == Type::kInt && (value.i == 0 || value.i == 1)) ||
          (value.type == Type::kFloat && (value.f == 0.0 || value.f == 1.0))) {
        out.b = NumericValue(value) == 1.0;
        return out;
      }
      break;
    case Type::kString:
      // A string key may be unset (None) like pyconfig's Optional[str] fields. A number or a
      // boolean is refused, as pydantic refuses it (run_name=123 is the int 123 to OmegaConf).
      if (value.type == Type::kNull) return value;
      if (value.type == Type::kInt || value.type == Type::kFloat || value.type == Type::kBool)
        Fail(
            "{}: expected a string, got {}{}; MaxText's config refuses a number or boolean for a "
            "string key: quote it ({}: \"{}\" in YAML, {}='\"{}\"' on the command line)",
            key, value.ToString(), where, key, value.ToString(), key, value.ToString());
      break;
    default:
      break;
  }
  Fail("{}: expected {}, got {}{}", key, TypeDescription(want), value.ToString(), where);
}

const ConfigValue& LookUp(const ValueMap& values, std::string_view key) {
  const auto it = values.find(key);
  if (it == values.end()) Fail("config has no key '{}'", key);
  return it->second;
}

const ConfigValue& LookUp(const LayeredValues& values, std::string_view key) {
  const LayeredValues::Entry* entry = values.find(key);
  if (entry == nullptr) Fail("config has no key '{}'", key);
  return entry->second;
}

const LayeredValues::Entry* LayeredValues::find(std::string_view key) const {
  if (const auto it = own_.find(key); it != own_.end()) return &*it;
  if (base_) {
    if (const auto it = base_->find(key); it != base_->end()) return &*it;
  }
  return nullptr;
}

void LayeredValues::ForEach(
    const std::function<void(const std::string&, const ConfigValue&)>& visit) const {
  if (!base_) {
    for (const auto& [key, value] : own_) visit(key, value);
    return;
  }
  auto b = base_->begin();
  auto o = own_.begin();
  while (b != base_->end() || o != own_.end()) {
    if (o == own_.end() || (b != base_->end() && b->first < o->first)) {
      visit(b->first, b->second);
      ++b;
    } else {
      if (b != base_->end() && b->first == o->first) ++b;  // shadowed
      visit(o->first, o->second);
      ++o;
    }
  }
}

int64_t ValueAsInt(std::string_view key, const ConfigValue& value) {
  if (value.type == ConfigValue::Type::kInt) return value.i;
  if (value.type == ConfigValue::Type::kFloat && std::isfinite(value.f) &&
      std::trunc(value.f) == value.f && std::fabs(value.f) < 9.2e18) {
    return static_cast<int64_t>(value.f);
  }
  Fail("{}: expected an integer, got {}", key, value.ToString());
}

double ValueAsFloat(std::string_view key, const ConfigValue& value) {
  if (value.type == ConfigValue::Type::kFloat) {
    if (!std::isfinite(value.f))
      Fail("{}: expected a finite number, got {}", key, value.ToString());
    return value.f;
  }
  if (value.type == ConfigValue::Type::kInt) return static_cast<double>(value.i);
  Fail("{}: expected a float, got {}", key, value.ToString());
}

bool ValueAsBool(std::string_view key, const ConfigValue& value) {
  if (value.type == ConfigValue::Type::kBool) return value.b;
  Fail("{}: expected a boolean, got {}", key, value.ToString());
}

std::string ValueAsString(std::string_view key, const ConfigValue& value) {
  if (value.type == ConfigValue::Type::kString) return value.s;
  Fail("{}: expected a string, got {}", key, value.ToString());
}

std::vector<std::string> ValueAsStringList(std::string_view key, const ConfigValue& value) {
  if (value.type != ConfigValue::Type::kList) {
    Fail("{}: expected a list of strings, got {}", key, value.ToString());
  }
  std::vector<std::string> out;
  out.reserve(value.list.size());
  for (const ConfigValue& item : value.list) {
    if (item.type != ConfigValue::Type::kString) {
      Fail("{}: expected a list of strings, got {}", key, value.ToString());
    }
    out.push_back(item.s);
  }
  return out;
}

}  // namespace config_internal
}  // namespace shardtrace
