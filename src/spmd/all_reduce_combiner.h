// XLA's all-reduce combiner, as the SPMD model applies it to the collectives it implies:
// all-reduces over the same devices that do not depend on each other are sent as one
// all-reduce of their operands together (the compiled HLO of the fixtures shows one 2052 B
// all-reduce for the dense combine's 2048 B partial sums and the loss's 4 B scalar, and one
// 3200 B all-reduce for Qwen3-Next's routed, shared and shared-gate outputs). The bytes a
// device sends do not change; the number of collectives does. XLA's size threshold for a
// combined op is not modelled (every combinable group is combined).
#pragma once

#include <vector>

#include "ir/trace.h"
#include "spmd/xla_spmd.h"

namespace shardtrace {

// Sets ImpliedCollective::combined_group on every all-reduce of `implied` (by op id) that
// XLA sends together with another: greedily in program order, an all-reduce joins the first
// group over the same mesh axes whose members neither feed it nor read its result.
void CombineAllReduces(const Trace& trace, std::vector<std::vector<ImpliedCollective>>& implied);

}  // namespace shardtrace
