// libFuzzer target: the logical-axis-rules reader. The first line is a YAML flow value read
// as logical_axis_rules (checked, converted, merged over itself); the second line is a
// logical-axes tuple resolved against those rules on a small mesh.
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "config/sharding_keys.h"
#include "config/yaml_value.h"
#include "shard/axis_rules.h"
#include "shard/mesh.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string rules_text = input.substr(0, newline);
  const std::string axes_text = newline == std::string::npos ? "" : input.substr(newline + 1);
  try {
    const ConfigValue rules =
        config_internal::ParseOverrideValue(rules_text, "logical_axis_rules=" + rules_text);
    config_internal::CheckRuleList(rules, "");
    const AxisRules parsed =
        config_internal::ToAxisRules(config_internal::MergeRulesByName(rules, rules));
    const Mesh mesh = Mesh::Build(
        MeshParallelism{{"data", "fsdp", "expert", "tensor"}, {1, 2, 2, 2}, {1, 1, 1, 1}, 1},
        std::nullopt);
    (void)ResolveLogicalAxes(ParseLogicalAxes(axes_text), parsed, &mesh);
  } catch (const Error&) {
  }
  return 0;
}
