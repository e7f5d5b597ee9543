// MaxText's own debug_sharding dump format (tests/utils/sharding_dump.py writes it as
// input_shardings.json): {"Activation Sharding Dump": [{"moe/gate_logits: bfloat16[..]":
// {"logic_axes": "(...)", "PartitionSpec": "P(...)"}}, ...]} with 2-space indentation.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace shardtrace {

// `maxtext_revision` (MaxTextRevision::Title) goes under a second top-level key,
// "shardtrace", which MaxText's readers of the file (they index "Activation Sharding Dump")
// never look at; empty: no such key.
std::string DumpToMaxtextJson(const std::vector<DumpEntry>& entries,
                              const std::string& maxtext_revision = {});

}  // namespace shardtrace
