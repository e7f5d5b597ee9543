#include "config/sharding_keys.h"

#include <set>

#include "config/config_value.h"
#include "util/error.h"

namespace shardtrace::config_internal {
namespace {

using Type = ConfigValue::Type;

bool IsRuleShape(const ConfigValue& rule) {
  if (rule.type != Type::kList || rule.list.size() != 2) return false;
  if (rule.list[0].type != Type::kString) return false;
  const ConfigValue& axes = rule.list[1];
  if (axes.type == Type::kString || axes.type == Type::kNull) return true;
  if (axes.type != Type::kList) return false;
  for (const ConfigValue& axis : axes.list) {
    if (axis.type != Type::kString) return false;
  }
  return true;
}

}  // namespace

void CheckRuleList(const ConfigValue& rules, std::string_view where) {
  if (rules.type != Type::kList) {
    Fail("logical_axis_rules{}: expected a list of [name, axes] rules, got {}", where,
         rules.ToString());
  }
  for (size_t k = 0; k < rules.list.size(); ++k) {
    if (!IsRuleShape(rules.list[k])) {
      Fail("logical_axis_rules[{}]{}: expected [name, 'axis'] or [name, [axes...]], got {}", k,
           where, rules.list[k].ToString());
    }
  }
}

ConfigValue MergeRulesByName(const ConfigValue& base_rules, const ConfigValue& new_rules) {
  // pyconfig returns the base list untouched when there is nothing to merge.
  if (new_rules.list.empty()) return base_rules;
  std::set<std::string, std::less<>> new_names;
  for (const ConfigValue& rule : new_rules.list) new_names.insert(rule.list[0].s);
  ConfigValue merged;
  merged.type = Type::kList;
  for (const ConfigValue& rule : base_rules.list) {
    if (!new_names.contains(rule.list[0].s)) merged.list.push_back(rule);
  }
  merged.list.insert(merged.list.end(), new_rules.list.begin(), new_rules.list.end());
  return merged;
}

AxisRules ToAxisRules(const ConfigValue& rules) {
  CheckRuleList(rules, "");
  AxisRules out;
  out.reserve(rules.list.size());
  for (const ConfigValue& rule : rules.list) {
    AxisRule axis_rule;
    axis_rule.logical = rule.list[0].s;
    const ConfigValue& axes = rule.list[1];
    if (axes.type == Type::kString) {
      axis_rule.mesh_axes.push_back(axes.s);
      axis_rule.bare_string = true;
    } else if (axes.type == Type::kList) {
      for (const ConfigValue& axis : axes.list) axis_rule.mesh_axes.push_back(axis.s);
    }  // null: like [], claims the dim and replicates it
    out.push_back(std::move(axis_rule));
  }
  return out;
}

std::vector<std::string> ToMeshAxes(const ConfigValue& mesh_axes) {
  return ValueAsStringList("mesh_axes", mesh_axes);
}

std::vector<std::vector<std::string>> ToDataSharding(const ConfigValue& data_sharding) {
  if (data_sharding.type != Type::kList) {
    Fail("data_sharding: expected a list of lists of mesh axes, got {}", data_sharding.ToString());
  }
  if (!data_sharding.list.empty() && data_sharding.list[0].type == Type::kString) {
    return {ValueAsStringList("data_sharding", data_sharding)};
  }
  std::vector<std::vector<std::string>> out;
  for (const ConfigValue& group : data_sharding.list) {
    out.push_back(ValueAsStringList("data_sharding", group));
  }
  return out;
}

}  // namespace shardtrace::config_internal
