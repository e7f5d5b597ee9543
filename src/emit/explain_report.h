// What `shardtrace explain` prints: one logical-axes tuple resolved against the config's
// logical_axis_rules rule by rule (which rule each dim takes, which it skips and why, the
// size-1 axes removed), the PartitionSpec flax gives before that removal and the physical one
// after, and for a given shape the per-device block and bytes; as text or JSON.
#pragma once

#include <optional>
#include <string>

#include "shard/axis_rules.h"
#include "shard/sharding.h"

namespace shardtrace {

struct AxesExplanation {
  LogicalAxes axes;
  Resolution resolution;
  std::string mesh;                  // Mesh::ToString()
  std::optional<Sharding> sharding;  // with --shape
};

std::string ExplainToText(const AxesExplanation& e);
std::string ExplainToJson(const AxesExplanation& e);

}  // namespace shardtrace
