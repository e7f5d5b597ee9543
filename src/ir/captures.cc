#include "ir/captures.h"

#include <array>
#include <stdexcept>
#include <string>
#include <utility>

namespace shardtrace {
namespace {

// One row per Capture, in enum order (CaptureName checks the order).
constexpr std::pair<Capture, std::string_view> kNames[] = {
    {Capture::kOutput, "output"},
    {Capture::kGateLogits, "gate_logits"},
    {Capture::kPreBiasLogits, "pre_bias_logits"},
    {Capture::kTopKWeights, "top_k_weights"},
    {Capture::kTopKIndices, "top_k_indices"},
    {Capture::kGroupSizes, "group_sizes"},
    {Capture::kDispatchMask, "dispatch_mask"},
    {Capture::kCombineMask, "combine_mask"},
    {Capture::kLbLoss, "lb_loss"},
    {Capture::kBiasUpdates, "bias_updates"},
    {Capture::kSoftmaxProbs, "softmax_probs"},
    {Capture::kGroupScores, "group_scores"},
    {Capture::kGroupMask, "group_mask"},
    {Capture::kRouterScores, "router_scores"},
    {Capture::kWeights, "weights"},
    {Capture::kDispatchMaskSubgroups, "dispatch_mask subgroups"},
    {Capture::kCombineMaskSubgroups, "combine_mask subgroups"},
    {Capture::kRoutedExpertsOutput, "routed_experts output"},
    {Capture::kSharedExpertsOutput, "shared_experts output"},
    {Capture::kSharedExpertOutput, "shared_expert output"},
    {Capture::kSharedExpertGateOutput, "shared_expert_gate output"},
    {Capture::kSortedSelectedExpertsPerDevice, "sorted_selected_experts per device"},
    {Capture::kSortedExpertsPerDevice, "sorted_experts per device"},
    {Capture::kTopKIndicesPerDevice, "top_k_indices per device"},
    {Capture::kXRowSourcesPerDevice, "x row sources per device"},
    {Capture::kWeightSumWeightsPerDevice, "weight_sum weights per device"},
    {Capture::kOutputPerDevice, "output per device"},
    {Capture::kLocalPermuteSortedIndicesPerDevice, "local_permute sorted_indices per device"},
    {Capture::kLocalPermuteSortedExpertsIdsPerDevice,
     "local_permute sorted_experts_ids per device"},
    {Capture::kLocalGroupSizePerDevice, "local_group_size per device"},
    {Capture::kExpertShardIdPerDevice, "expert_shard_id per device"},
    {Capture::kIntermediateOutputRowSourcesPerDevice, "intermediate_output row sources per device"},
    {Capture::kXInputOffsetsPerDevice, "x input_offsets per device"},
    {Capture::kXSendSizesPerDevice, "x send_sizes per device"},
    {Capture::kXOutputOffsetsPerDevice, "x output_offsets per device"},
    {Capture::kXRecvSizesPerDevice, "x recv_sizes per device"},
    {Capture::kIntermediateOutputInputOffsetsPerDevice,
     "intermediate_output input_offsets per device"},
    {Capture::kIntermediateOutputSendSizesPerDevice, "intermediate_output send_sizes per device"},
    {Capture::kIntermediateOutputOutputOffsetsPerDevice,
     "intermediate_output output_offsets per device"},
    {Capture::kIntermediateOutputRecvSizesPerDevice, "intermediate_output recv_sizes per device"},
    {Capture::kRingSortedSelectedExpertsPerDevice, "ring sorted_selected_experts per device"},
    {Capture::kRingSortedExpertsPerDevice, "ring sorted_experts per device"},
    {Capture::kRingRollToExpertIdPerDevice, "ring roll_to_expert_id per device"},
    {Capture::kRingGroupSizesPerDevice, "ring group_sizes per device"},
    {Capture::kRingTokenSourcesPerDevice, "ring token sources per device"},
    {Capture::kRingIntermediateOutputRowMaxPerDevice,
     "ring intermediate_output row max|x| per device"},
};

constexpr bool InEnumOrder() {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (static_cast<size_t>(kNames[i].first) != i) return false;
  return static_cast<size_t>(Capture::kRingIntermediateOutputRowMaxPerDevice) + 1 ==
         std::size(kNames);
}
static_assert(InEnumOrder(), "kNames must list every Capture once, in enum order");

}  // namespace

std::string_view CaptureName(Capture id) { return kNames[static_cast<size_t>(id)].second; }

std::optional<Capture> CaptureByName(std::string_view name) {
  for (const auto& [id, n] : kNames)
    if (n == name) return id;
  return std::nullopt;
}

std::string_view ExchangeOperand(Exchange e) {
  return e == Exchange::kDispatch ? "x" : "intermediate_output";
}

std::array<Capture, 4> AllToAllParamCaptures(Exchange e) {
  if (e == Exchange::kDispatch)
    return {Capture::kXInputOffsetsPerDevice, Capture::kXSendSizesPerDevice,
            Capture::kXOutputOffsetsPerDevice, Capture::kXRecvSizesPerDevice};
  return {Capture::kIntermediateOutputInputOffsetsPerDevice,
          Capture::kIntermediateOutputSendSizesPerDevice,
          Capture::kIntermediateOutputOutputOffsetsPerDevice,
          Capture::kIntermediateOutputRecvSizesPerDevice};
}

const std::vector<Capture>& GoldenCaptures() {
  static const std::vector<Capture> golden = {
      Capture::kOutput,      Capture::kGateLogits, Capture::kPreBiasLogits, Capture::kTopKWeights,
      Capture::kTopKIndices, Capture::kGroupSizes, Capture::kDispatchMask,  Capture::kCombineMask,
      Capture::kLbLoss,      Capture::kBiasUpdates};
  return golden;
}

const Array* Captures::Find(Capture id) const {
  const auto found = arrays_.find(id);
  return found == arrays_.end() ? nullptr : &found->second;
}

Array& Captures::Mutable(Capture id) {
  const auto found = arrays_.find(id);
  if (found == arrays_.end())
    throw std::logic_error("internal check failed: the run captured no '" +
                           std::string(CaptureName(id)) + "'");
  return found->second;
}

const Array& Captures::At(Capture id) const {
  const Array* a = Find(id);
  if (!a)
    throw std::logic_error("internal check failed: the run captured no '" +
                           std::string(CaptureName(id)) + "'");
  return *a;
}

}  // namespace shardtrace
