// The three config keys that shape sharding, from raw YAML lists to typed values:
// logical_axis_rules (pyconfig's merge-by-name-and-append, and the conversion to
// AxisRules), mesh_axes and data_sharding. Rules are written
// `['activation_batch', ['data', 'fsdp']]`, `['exp', 'expert']` (bare string: one axis)
// or `['qkv', []]` (claims the dim, replicated).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "shard/axis_rules.h"

namespace shardtrace::config_internal {

// Throws unless `rules` is a list of [name, axis | [axes...] | []] pairs. `where` is
// appended to the key in the message, e.g. " (in models/x.yml)", or empty.
void CheckRuleList(const ConfigValue& rules, std::string_view where);

// pyconfig's _merge_logical_axis_rules: drop every base rule whose name appears in
// `new_rules`, then append `new_rules` at the end (so they lose priority against every
// surviving base rule). Both lists must have passed CheckRuleList.
ConfigValue MergeRulesByName(const ConfigValue& base_rules, const ConfigValue& new_rules);

AxisRules ToAxisRules(const ConfigValue& rules);
std::vector<std::string> ToMeshAxes(const ConfigValue& mesh_axes);
// A flat list of axes is one group, as pyconfig wraps `data_sharding: [data, fsdp]`.
std::vector<std::vector<std::string>> ToDataSharding(const ConfigValue& data_sharding);

}  // namespace shardtrace::config_internal
