// MaxText's own debug_sharding dump format (tests/utils/sharding_dump.py writes it as
// input_shardings.json): {"Activation Sharding Dump": [{"moe/gate_logits: bfloat16[..]":
// {"logic_axes": "(...)", "PartitionSpec": "P(...)"}}, ...]} with 2-space indentation.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace shardtrace {

std::string DumpToMaxtextJson(const std::vector<DumpEntry>& entries);

}  // namespace shardtrace
