// Captures: the global numeric arrays a run records beside its Trace, for the golden checks
// (testdata/golden-format.md names them) and for the pages' trees (what each simulated device
// held inside shard_map, stacked as [devices, ...]). Each array has a `Capture` id, so a path
// that records one and a check or tree that reads it name the same thing and a typo is a
// compile error; `CaptureName` is the name the golden format and the tests print. A symbolic
// run records none.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "numeric/array.h"

namespace shardtrace {

enum class Capture : uint8_t {
  // Golden-format arrays (GoldenCaptures() lists them in the order check reports them).
  kOutput,
  kGateLogits,
  kPreBiasLogits,
  kTopKWeights,
  kTopKIndices,
  kGroupSizes,
  kDispatchMask,
  kCombineMask,
  kLbLoss,
  kBiasUpdates,
  // Routing intermediates the trees and invariants read.
  kSoftmaxProbs,
  kGroupScores,
  kGroupMask,
  kRouterScores,           // per-choice score where the path combines by sigmoid(logit) (Llama 4)
  kWeights,                // dropless [B,S,E] combine weights
  kDispatchMaskSubgroups,  // inference masks per context subgroup [B,N,S,E,C]
  kCombineMaskSubgroups,
  // The parts of a block with shared experts.
  kRoutedExpertsOutput,
  kSharedExpertsOutput,     // RoutedAndSharedMoE's shared MlpBlock
  kSharedExpertOutput,      // Qwen3NextSparseMoeBlock's shared MlpBlock
  kSharedExpertGateOutput,  // Qwen3NextSparseMoeBlock's sigmoid gate
  // Per device [D, ...]: the sparse path's permute.
  kSortedSelectedExpertsPerDevice,
  kSortedExpertsPerDevice,
  kTopKIndicesPerDevice,
  kXRowSourcesPerDevice,
  kWeightSumWeightsPerDevice,
  kOutputPerDevice,
  // Per device: local_permute after the ragged all-to-all.
  kLocalPermuteSortedIndicesPerDevice,
  kLocalPermuteSortedExpertsIdsPerDevice,
  kLocalGroupSizePerDevice,
  kExpertShardIdPerDevice,
  kIntermediateOutputRowSourcesPerDevice,
  // Per device: the ragged all-to-all parameters, dispatch ("x") and return.
  kXInputOffsetsPerDevice,
  kXSendSizesPerDevice,
  kXOutputOffsetsPerDevice,
  kXRecvSizesPerDevice,
  kIntermediateOutputInputOffsetsPerDevice,
  kIntermediateOutputSendSizesPerDevice,
  kIntermediateOutputOutputOffsetsPerDevice,
  kIntermediateOutputRecvSizesPerDevice,
  // Per device: the ring of experts.
  kRingSortedSelectedExpertsPerDevice,
  kRingSortedExpertsPerDevice,
  kRingRollToExpertIdPerDevice,
  kRingGroupSizesPerDevice,
  kRingTokenSourcesPerDevice,
  kRingIntermediateOutputRowMaxPerDevice,
};

// The two ragged all-to-all exchanges of the sparse path: the dispatch of the sorted rows
// `x` and the return of `intermediate_output`.
enum class Exchange : uint8_t { kDispatch, kReturn };
// "x" or "intermediate_output": the array the exchange moves, as moe.py names it.
std::string_view ExchangeOperand(Exchange e);
// The exchange's input_offsets, send_sizes, output_offsets and recv_sizes per device, in that
// order (the order of ragged_all_to_all's arguments).
std::array<Capture, 4> AllToAllParamCaptures(Exchange e);

// The name a golden case, a test and a report use ("top_k_indices", "ring token sources per
// device").
std::string_view CaptureName(Capture id);
// The capture a golden-format name denotes, or nullopt.
std::optional<Capture> CaptureByName(std::string_view name);
// The golden-format output arrays `check` compares, in report order.
const std::vector<Capture>& GoldenCaptures();

// The arrays of one run, by id. A value type: copies share the arrays' buffers.
class Captures {
 public:
  void Put(Capture id, Array value) { arrays_.insert_or_assign(id, std::move(value)); }
  // Keeps an array already recorded under `id` (the first writer wins).
  void PutIfAbsent(Capture id, Array value) { arrays_.try_emplace(id, std::move(value)); }
  bool Has(Capture id) const { return arrays_.count(id) > 0; }
  // nullptr when the run did not record `id`.
  const Array* Find(Capture id) const;
  // The array; an internal error when the run did not record it (a caller that needs it
  // checked the path first).
  const Array& At(Capture id) const;
  // For tests that corrupt a run's own copy to see an invariant fire.
  Array& Mutable(Capture id);
  bool empty() const { return arrays_.empty(); }
  const std::map<Capture, Array>& all() const { return arrays_; }

 private:
  std::map<Capture, Array> arrays_;
};

}  // namespace shardtrace
