#include "emit/flow_phases.h"

#include <algorithm>
#include <optional>
#include <string_view>

namespace shardtrace {
namespace {

// The phase a scope segment names, if any ("[gmm_wo]" counts as "gmm_wo").
std::optional<FlowPhase> SegmentPhase(std::string_view s) {
  if (s.size() > 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  const auto any = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), s) != names.end();
  };
  if (s == "shared_experts") return FlowPhase::kShared;
  if (any({"gmm_wi_0", "gmm_wi_1", "gmm_wo", "gmm_up", "gmm_down", "ffn_act", "wi_0", "wi_1", "wo",
           "maybe_tp_reduce"}) ||
      s.starts_with("expert_"))
    return FlowPhase::kExperts;
  if (any({"unpermute", "weight_sum", "combine"})) return FlowPhase::kCombine;
  if (any({"get_all_to_all_params", "local_permute", "dispatch"})) return FlowPhase::kDispatch;
  if (any({"gate", "get_topk", "permute", "route", "deepseek_routing", "deepseek_scale_weights",
           "reshape_and_update_weights", "generate_masks", "generate_masks_subgroup",
           "expert_group_mask"}))
    return FlowPhase::kRouting;
  return std::nullopt;
}

// The deepest segment of the scope that names a phase.
std::optional<FlowPhase> ScopePhase(const std::string& scope) {
  std::optional<FlowPhase> phase;
  size_t start = 0;
  while (start <= scope.size()) {
    const size_t end = std::min(scope.find('/', start), scope.size());
    if (const auto p = SegmentPhase(std::string_view(scope).substr(start, end - start)))
      phase = p == FlowPhase::kShared || phase != FlowPhase::kShared ? p : phase;
    start = end + 1;
  }
  return phase;
}

}  // namespace

std::string ToString(FlowPhase phase) {
  switch (phase) {
    case FlowPhase::kInputs:
      return "inputs and weights";
    case FlowPhase::kRouting:
      return "routing";
    case FlowPhase::kDispatch:
      return "dispatch";
    case FlowPhase::kExperts:
      return "experts";
    case FlowPhase::kCombine:
      return "combine";
    case FlowPhase::kShared:
      return "shared experts";
  }
  return "";
}

std::vector<FlowPhase> TensorPhases(const Trace& trace) {
  std::vector<FlowPhase> out(trace.tensors.size(), FlowPhase::kInputs);
  FlowPhase current = FlowPhase::kInputs;
  for (const TensorRecord& t : trace.tensors) {
    const std::optional<FlowPhase> named = ScopePhase(t.scope);
    if (named == FlowPhase::kShared) {
      out[t.id] = FlowPhase::kShared;  // a branch beside the routed experts
      continue;
    }
    if (named && *named > current) current = *named;
    if (!named && t.kind == TensorKind::kWeight)
      out[t.id] = FlowPhase::kInputs;
    else if (current == FlowPhase::kExperts && named != FlowPhase::kExperts)
      out[t.id] = FlowPhase::kCombine;  // after the expert matmuls: putting rows back
    else
      out[t.id] = current;
  }
  return out;
}

std::vector<FlowPhase> PhasesOf(const std::vector<FlowPhase>& tensor_phases) {
  std::vector<FlowPhase> out;
  for (const FlowPhase p : tensor_phases)
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace shardtrace
