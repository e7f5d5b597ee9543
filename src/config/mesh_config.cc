#include "config/mesh_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "util/error.h"

namespace shardtrace {
namespace {

// The parallelism key for a mesh axis: MaxText names the stage axis "pipeline" and maps the
// legacy "model" axis onto tensor.
std::string ParallelismKey(std::string_view prefix, const std::string& axis) {
  std::string name = axis;
  if (axis == "stage") name = "pipeline";
  if (axis == "model") name = "tensor";
  return fmt::format("{}_{}_parallelism", prefix, name);
}

// A size > 1 in an ici_/dcn_<axis>_parallelism key whose axis the config's mesh_axes lack:
// MaxText builds the mesh from mesh_axes only (types.py _resolve_parallelism) and ignores the
// key without a word, so `ici_tensor_parallelism=4` with a model file whose mesh has no
// 'tensor' axis traces without tensor parallelism.
void WarnUnusedParallelism(const Config& config, const std::vector<std::string>& axes,
                           std::vector<Warning>& warnings) {
  constexpr std::string_view kSuffix = "_parallelism";
  config.ForEachValue([&](const std::string& key, const ConfigValue& value) {
    if (value.type != ConfigValue::Type::kInt || value.i <= 1) return;
    const bool ici = key.starts_with("ici_"), dcn = key.starts_with("dcn_");
    if ((!ici && !dcn) || !key.ends_with(kSuffix) || key.size() <= 4 + kSuffix.size()) return;
    bool used = false;
    for (const std::string& axis : axes)
      used = used || ParallelismKey(ici ? "ici" : "dcn", axis) == key;
    if (used) return;
    std::string axis = key.substr(4, key.size() - 4 - kSuffix.size());
    if (axis == "pipeline") axis = "stage";  // ParallelismKey's one renamed axis
    AddWarning(warnings, {WarningKind::kUnusedParallelism, key,
                          fmt::format("{}={} has no effect: mesh_axes [{}] has no '{}' axis, "
                                      "and MaxText builds the mesh from mesh_axes only",
                                      key, value.i, fmt::join(axes, ", "), axis)});
  });
}

// A logical rule naming a mesh axis the config's mesh_axes lack: MaxText drops that axis from
// the rule without a word (flax's logical_to_mesh_axes finds no such axis), so a typo such as
// `['exp', 'expertt']` leaves 'exp' unsharded and surfaces only where something needs it
// sharded. Said once per rule, naming it.
void WarnUnknownRuleAxes(const Config& config, const std::vector<std::string>& axes,
                         std::vector<Warning>& warnings) {
  for (const AxisRule& rule : config.logical_axis_rules())
    for (const std::string& axis : rule.mesh_axes)
      if (std::find(axes.begin(), axes.end(), axis) == axes.end())
        AddWarning(warnings,
                   {WarningKind::kUnknownRuleAxis, "logical_axis_rules",
                    fmt::format("logical_axis_rules: the rule for '{}' names mesh axis '{}', "
                                "which mesh_axes [{}] lacks; MaxText drops it, so '{}' is not "
                                "sharded over it",
                                rule.logical, axis, fmt::join(axes, ", "), rule.logical)});
}

}  // namespace

MeshParallelism ReadMeshParallelism(const Config& config) {
  MeshParallelism p;
  p.axes = config.mesh_axes();
  auto read = [&](std::string_view prefix) {
    std::vector<int64_t> sizes;
    for (const std::string& axis : p.axes) {
      const std::string key = ParallelismKey(prefix, axis);
      sizes.push_back(config.Has(key) ? config.Int(key) : 1);
    }
    return sizes;
  };
  p.ici = read("ici");
  p.dcn = read("dcn");
  p.num_slices = config.Has("num_slices") ? config.Int("num_slices") : 1;
  // -1 (base.yml's default) means automatic: one slice here, as on a single host.
  if (p.num_slices == 0 || p.num_slices < -1)
    Fail("num_slices: expected -1 (automatic) or a positive slice count, got {}", p.num_slices);
  return p;
}

Mesh MeshFromConfig(const Config& config, std::optional<int64_t> devices) {
  const MeshParallelism parallelism = ReadMeshParallelism(config);
  return Mesh::Build(parallelism, devices);
}

std::vector<Warning> MeshWarnings(const Config& config) {
  std::vector<Warning> warnings;
  WarnUnusedParallelism(config, config.mesh_axes(), warnings);
  WarnUnknownRuleAxes(config, config.mesh_axes(), warnings);
  return warnings;
}

}  // namespace shardtrace
