#include "emit/explain_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

namespace shardtrace {
namespace {

nlohmann::ordered_json EntryJson(const PartitionSpec::Entry& e) {
  if (e.empty()) return nullptr;
  if (e.size() == 1) return e[0];
  return e;
}

std::string AxesList(const std::vector<std::string>& axes) {
  return axes.empty() ? "[]" : fmt::format("[{}]", fmt::join(axes, ", "));
}

std::string DecisionText(const RuleDecision& d) {
  switch (d.outcome) {
    case RuleDecision::Outcome::kApplied:
      return "applied";
    case RuleDecision::Outcome::kDimAlreadyAssigned:
      return "skipped: dim already assigned by an earlier rule";
    case RuleDecision::Outcome::kMeshAxisUsed:
      return fmt::format("skipped: mesh axis '{}' already used by another dim", d.blocking_axis);
  }
  return "";
}

}  // namespace

std::string ExplainToJson(const AxesExplanation& e) {
  const LogicalAxes& axes = e.axes;
  const Resolution& res = e.resolution;
  const std::optional<Sharding>& sharding = e.sharding;
  nlohmann::ordered_json j;
  nlohmann::ordered_json logical = nlohmann::ordered_json::array();
  for (const auto& a : axes)
    logical.push_back(a ? nlohmann::ordered_json(*a) : nlohmann::ordered_json(nullptr));
  j["logical_axes"] = logical;
  nlohmann::ordered_json spec = nlohmann::ordered_json::array();
  for (const auto& e : res.spec.entries()) spec.push_back(EntryJson(e));
  j["partition_spec"] = spec;
  j["physical"] = res.spec.ToString();
  nlohmann::ordered_json before = nlohmann::ordered_json::array();
  for (const auto& e : res.before_removal.entries()) before.push_back(EntryJson(e));
  j["before_size1_removal"] = before;
  j["mesh"] = e.mesh;
  nlohmann::ordered_json dims = nlohmann::ordered_json::array();
  for (const DimResolution& d : res.dims) {
    nlohmann::ordered_json dj;
    dj["logical"] =
        d.logical ? nlohmann::ordered_json(*d.logical) : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json rules = nlohmann::ordered_json::array();
    for (const RuleDecision& r : d.decisions)
      rules.push_back(
          {{"rule", r.rule_index}, {"mesh_axes", r.mesh_axes}, {"outcome", DecisionText(r)}});
    dj["rules"] = rules;
    dj["removed_axes"] = d.removed;
    dims.push_back(dj);
  }
  j["dims"] = dims;
  if (sharding) {
    j["local_shape"] = sharding->local_shape;
    j["bytes_per_device"] = sharding->bytes_per_device;
    j["warnings"] = sharding->warnings;
  }
  return j.dump(2) + "\n";
}

std::string ExplainToText(const AxesExplanation& e) {
  const LogicalAxes& axes = e.axes;
  const Resolution& res = e.resolution;
  const std::optional<Sharding>& sharding = e.sharding;
  std::string text;
  text += fmt::format("logical   {}\n", LogicalAxesToString(axes));
  text += fmt::format("mesh      {}\n", e.mesh);
  text += fmt::format("flax      {}   (before size-1 removal)\n", res.before_removal.ToString());
  text += fmt::format("physical  {}\n", res.spec.ToString());
  if (sharding) {
    text += fmt::format("local     {} of {} {}, {} bytes per device\n",
                        ShapeToString(sharding->local_shape), ToString(sharding->dtype),
                        ShapeToString(sharding->global_shape), sharding->bytes_per_device);
    for (const std::string& w : sharding->warnings) text += fmt::format("warning   {}\n", w);
  }
  for (size_t i = 0; i < res.dims.size(); ++i) {
    const DimResolution& d = res.dims[i];
    text += fmt::format("\ndim {} {} -> {}\n", i, d.logical ? "'" + *d.logical + "'" : "None",
                        PartitionSpec::EntryToString(res.spec[i]));
    if (!d.logical) {
      text += "  unnamed dim: replicated\n";
      continue;
    }
    if (!d.has_rule) text += "  no rule names it: replicated\n";
    for (const RuleDecision& r : d.decisions)
      text += fmt::format("  rule {:>2} {} {:<40} {}\n", r.rule_index, r.logical,
                          AxesList(r.mesh_axes), DecisionText(r));
    if (!d.removed.empty())
      text += fmt::format("  removed {} (size 1 or not in the mesh)\n", AxesList(d.removed));
  }
  return text;
}

}  // namespace shardtrace
