// The phases a MoE layer's flow reads in: inputs and weights (placed, cast, handed to
// shard_map), routing (gate, top-k, permute/masks), dispatch (all-to-all parameters,
// local_permute, dispatch einsums), experts (the gmms or expert einsums and the
// activation), combine (unpermute, weight sum, combine einsums) and, beside them, the shared
// experts. The pages split the flow by phase so each part reads on one screen: the
// overview box per phase (flow_overview.h) and one Mermaid graph per phase
// (mermaid_flow.h). A tensor's phase comes from the scopes moe.py names (a `[gmm_wo]`
// bracket counts as its name); a record in a scope that names no phase (RoutedMoE,
// sparse_matmul, wrapper) stays in the phase before it, except a weight, which belongs to
// the inputs and weights. A record after the expert matmuls in a scope that is not an
// expert's is the combine's (the wrapper's unsort, the return all-to-all and its
// parameters) without ending the experts (a masked loop accumulates between two experts).
// Otherwise phases only move forward along the program.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace shardtrace {

enum class FlowPhase { kInputs, kRouting, kDispatch, kExperts, kCombine, kShared };

// "inputs and weights", "routing", "dispatch", "experts", "combine", "shared experts".
std::string ToString(FlowPhase phase);

// The phase of every tensor of the trace, by tensor id.
std::vector<FlowPhase> TensorPhases(const Trace& trace);

// The phases the trace has, in order.
std::vector<FlowPhase> PhasesOf(const std::vector<FlowPhase>& tensor_phases);

}  // namespace shardtrace
