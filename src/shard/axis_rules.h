// Logical axis rules and their resolution to a mesh PartitionSpec: exactly flax's
// priority algorithm (nn.logical_to_mesh_axes) followed by MaxText's
// remove_size_one_mesh_axis. Rules are walked in list order; a rule applies whole or not at
// all; later rules with the same name are fallbacks; a rule with no mesh axes ([]) still
// claims its dimension; names without a rule replicate; duplicate names are an error; axes
// absent from the mesh or of size 1 are removed after resolution (they still block).
// Example (seed rules): ('exp','embed_moe','mlp_moe') ->
//   ('expert', ('fsdp','tensor_transpose','context'), ('fsdp_transpose','tensor',...)),
//   on mesh fsdp=4 x expert=2 -> P('expert', 'fsdp', None).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "shard/partition_spec.h"

namespace shardtrace {

class Mesh;

struct AxisRule {
  std::string logical;
  std::vector<std::string> mesh_axes;  // empty: claims the dim, replicated
  bool bare_string = false;            // written as 'expert' rather than ['expert']
};
using AxisRules = std::vector<AxisRule>;

// Logical names of a tensor's dims; std::nullopt is an unnamed dim (None).
using LogicalAxes = std::vector<std::optional<std::string>>;

// Logical axes written as in moe.py: LogicalNames({"exp", nullptr, "mlp"}) is
// ('exp', None, 'mlp').
LogicalAxes LogicalNames(std::initializer_list<const char*> names);

// "('activation_batch', None, 'activation_embed')" (Python tuple repr).
std::string LogicalAxesToString(const LogicalAxes& axes);
// Parses "exp,embed_moe,None" (None or empty = unnamed).
LogicalAxes ParseLogicalAxes(const std::string& text);

// Why one rule did or did not shape one dim: for `explain`.
struct RuleDecision {
  int rule_index = -1;
  std::string logical;
  std::vector<std::string> mesh_axes;
  enum class Outcome { kApplied, kDimAlreadyAssigned, kMeshAxisUsed } outcome = Outcome::kApplied;
  std::string blocking_axis;  // for kMeshAxisUsed
};

struct DimResolution {
  std::optional<std::string> logical;
  std::vector<RuleDecision> decisions;      // every rule naming this dim, in order
  std::vector<std::string> before_removal;  // mesh axes from the fired rule
  std::vector<std::string> removed;         // dropped: size 1 or not in the mesh
  bool has_rule = false;
};

struct Resolution {
  PartitionSpec before_removal;  // flax's result
  PartitionSpec spec;            // after size-1 / absent axis removal (what MaxText uses)
  std::vector<DimResolution> dims;
};

// REQUIRES nothing; throws Error on duplicate logical names. `mesh` may be null: then no
// removal happens (spec == before_removal).
Resolution ResolveLogicalAxes(const LogicalAxes& axes, const AxisRules& rules, const Mesh* mesh);
// ResolveLogicalAxes(...).spec without the records of why: for the callers that resolve every
// parameter of every config (fit, plan, the tracer).
PartitionSpec ResolveSpec(const LogicalAxes& axes, const AxisRules& rules, const Mesh* mesh);

}  // namespace shardtrace
