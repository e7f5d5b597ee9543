#include "shard/axis_rules.h"

#include <algorithm>
#include <set>

#include "shard/mesh.h"
#include "util/error.h"

namespace shardtrace {

LogicalAxes LogicalNames(std::initializer_list<const char*> names) {
  LogicalAxes axes;
  for (const char* n : names) axes.push_back(n ? std::optional<std::string>(n) : std::nullopt);
  return axes;
}

std::string LogicalAxesToString(const LogicalAxes& axes) {
  std::string out = "(";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) out += ", ";
    out += axes[i] ? "'" + *axes[i] + "'" : "None";
  }
  if (axes.size() == 1) out += ",";
  return out + ")";
}

LogicalAxes ParseLogicalAxes(const std::string& text_in) {
  // Accepts "exp,embed_moe,None" as well as Python's "('exp', None)" and "('exp',)".
  std::string text = text_in;
  text.erase(0, text.find_first_not_of(" ("));
  text.erase(text.find_last_not_of(" )") + 1);
  if (!text.empty() && text.back() == ',') text.pop_back();  // a 1-tuple's trailing comma
  LogicalAxes axes;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(" '\""));
    item.erase(item.find_last_not_of(" '\"") + 1);
    if (item.empty() || item == "None" || item == "none" || item == "null")
      axes.push_back(std::nullopt);
    else
      axes.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return axes;
}

namespace {

// The one resolution both entry points run: `dims` null computes the spec alone (fit and plan
// resolve every parameter of every config: the per-rule records were a tenth of plan's time);
// otherwise every rule's decision is recorded there for `explain`.
PartitionSpec Resolve(const LogicalAxes& axes, const AxisRules& rules, const Mesh* mesh,
                      std::vector<DimResolution>* dims, PartitionSpec* before_removal) {
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (axes[i] && axes[j] && *axes[i] == *axes[j])
        Fail("logical axes {}: name '{}' appears twice", LogicalAxesToString(axes), *axes[i]);
  if (dims) {
    dims->assign(axes.size(), {});
    for (size_t d = 0; d < axes.size(); ++d) (*dims)[d].logical = axes[d];
  }
  std::vector<bool> assigned(axes.size(), false);
  std::vector<PartitionSpec::Entry> entries(axes.size());
  std::vector<const std::string*> used;  // mesh axes a fired rule took

  // flax walks the rule list (not the tensor's dims) so list order is priority.
  for (size_t r = 0; r < rules.size(); ++r) {
    const AxisRule& rule = rules[r];
    const auto it = std::find_if(axes.begin(), axes.end(), [&](const std::optional<std::string>& a) {
      return a && *a == rule.logical;
    });
    if (it == axes.end()) continue;
    const size_t d = static_cast<size_t>(it - axes.begin());
    RuleDecision decision;
    if (assigned[d]) {
      decision.outcome = RuleDecision::Outcome::kDimAlreadyAssigned;
    } else {
      const auto blocking =
          std::find_if(rule.mesh_axes.begin(), rule.mesh_axes.end(), [&](const std::string& a) {
            return std::any_of(used.begin(), used.end(), [&](const std::string* u) { return *u == a; });
          });
      if (blocking != rule.mesh_axes.end()) {
        decision.outcome = RuleDecision::Outcome::kMeshAxisUsed;
        if (dims) decision.blocking_axis = *blocking;
      } else {
        assigned[d] = true;
        entries[d] = rule.mesh_axes;
        for (const std::string& a : rule.mesh_axes) used.push_back(&a);
        if (dims) (*dims)[d].before_removal = rule.mesh_axes;
      }
    }
    if (dims) {
      DimResolution& dim = (*dims)[d];
      dim.has_rule = true;
      decision.rule_index = static_cast<int>(r);
      decision.logical = rule.logical;
      decision.mesh_axes = rule.mesh_axes;
      dim.decisions.push_back(std::move(decision));
    }
  }
  if (before_removal) *before_removal = PartitionSpec(entries);
  if (mesh) {
    for (size_t d = 0; d < entries.size(); ++d) {
      PartitionSpec::Entry kept;
      for (const std::string& axis : entries[d]) {
        if (mesh->Size(axis) > 1)
          kept.push_back(axis);
        else if (dims)
          (*dims)[d].removed.push_back(axis);
      }
      entries[d] = std::move(kept);
    }
  }
  return PartitionSpec(std::move(entries));
}

}  // namespace

Resolution ResolveLogicalAxes(const LogicalAxes& axes, const AxisRules& rules, const Mesh* mesh) {
  Resolution result;
  result.spec = Resolve(axes, rules, mesh, &result.dims, &result.before_removal);
  return result;
}

PartitionSpec ResolveSpec(const LogicalAxes& axes, const AxisRules& rules, const Mesh* mesh) {
  return Resolve(axes, rules, mesh, nullptr, nullptr);
}

}  // namespace shardtrace
