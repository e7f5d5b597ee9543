// Helpers on ConfigValue that pyconfig's Python semantics dictate: equality as Python's
// == (1 == 1.0 == True), the words used for a type in "expected an integer, got 'abc'"
// messages, coercion of a value to the type of its default, and typed reads out of a
// key -> value map that throw Error naming the key. ConfigValue::ToString (the Python
// repr) is defined in config_value.cc too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace shardtrace::config_internal {

// Python == on the values pyconfig would hold (numbers compare by value across
// bool/int/float, lists element-wise, mappings by key set).
bool SameValue(const ConfigValue& a, const ConfigValue& b);

// Python's truth value (bool(v)) of a value as pyconfig holds it: False, 0, 0.0, None, "" and
// empty lists and mappings are false; any other string, "false" included, is true.
bool PythonTruth(const ConfigValue& value);

// "an integer", "a float", "a boolean", "a string", "a list", "a mapping", "null".
std::string_view TypeDescription(ConfigValue::Type type);

// A key -> value map (heterogeneous lookup by string_view).
using ValueMap = std::map<std::string, ConfigValue, std::less<>>;

// The values a Config holds: its own (the model file's, the overrides', the derived ones) over
// its base.yml chain's, which are shared with every config loaded from the same base and never
// copied (plan loads thousands of configs over one base.yml of about 700 keys; copying them was
// a fifth of its time). Looked up like a map: find() gives the entry or end().
class LayeredValues {
 public:
  using Entry = ValueMap::value_type;
  LayeredValues() = default;
  explicit LayeredValues(std::shared_ptr<const ValueMap> base) : base_(std::move(base)) {}

  const Entry* find(std::string_view key) const;
  const Entry* end() const { return nullptr; }
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  void insert_or_assign(std::string key, ConfigValue value) {
    own_.insert_or_assign(std::move(key), std::move(value));
  }
  // Every entry in key order, a config's own over the base's.
  void ForEach(const std::function<void(const std::string&, const ConfigValue&)>& visit) const;

 private:
  std::shared_ptr<const ValueMap> base_;  // null: none
  ValueMap own_;
};

// pyconfig turns every top-level string spelled "none" (any case) into None.
ConfigValue NoneStringToNull(ConfigValue value);

// `value` converted to the YAML type of `default_value`, as pydantic's lax mode converts it
// for MaxText's typed field: int or bool -> float, integral float or bool -> int, 0/1 ->
// bool, and a string read as the number or boolean it spells (config/lax_scalars.h); a
// number or boolean for a string key is refused. A null default, or a null value for a
// string key, accepts anything. Throws "key: expected an integer, got 'abc'" plus `where`
// (e.g. " (in models/x.yml)") otherwise.
ConfigValue CoerceToDefaultType(std::string_view key, const ConfigValue& value,
                                const ConfigValue& default_value, std::string_view where);

// Typed reads; each throws Error naming the key when it is missing or of another type.
const ConfigValue& LookUp(const ValueMap& values, std::string_view key);
const ConfigValue& LookUp(const LayeredValues& values, std::string_view key);
int64_t ValueAsInt(std::string_view key, const ConfigValue& value);   // integral floats too
double ValueAsFloat(std::string_view key, const ConfigValue& value);  // ints too
bool ValueAsBool(std::string_view key, const ConfigValue& value);
std::string ValueAsString(std::string_view key, const ConfigValue& value);
std::vector<std::string> ValueAsStringList(std::string_view key, const ConfigValue& value);

}  // namespace shardtrace::config_internal
