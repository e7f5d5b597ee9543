#include "check/trace_invariants.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include "check/invariant_support.h"

namespace shardtrace {

std::string ToString(InvariantKind kind) {
  switch (kind) {
    case InvariantKind::kOutputShape:
      return "output_shape";
    case InvariantKind::kPlacedBytes:
      return "placed_bytes";
    case InvariantKind::kTokensRouted:
      return "tokens_routed";
    case InvariantKind::kDistinctChoices:
      return "distinct_choices";
    case InvariantKind::kNonNegativeWeights:
      return "non_negative_weights";
    case InvariantKind::kChoicesInKeptGroups:
      return "choices_in_kept_groups";
    case InvariantKind::kDispatchIsCombineNonzero:
      return "dispatch_is_combine_nonzero";
    case InvariantKind::kCapacityIsMaskDim:
      return "capacity_is_mask_dim";
    case InvariantKind::kKeptIsRoutedMinusDropped:
      return "kept_is_routed_minus_dropped";
    case InvariantKind::kOneTokenPerSlot:
      return "one_token_per_slot";
    case InvariantKind::kSlotsInArrivalOrder:
      return "slots_in_arrival_order";
    case InvariantKind::kCombineHoldsTopKWeights:
      return "combine_holds_top_k_weights";
    case InvariantKind::kChunksRouteAlike:
      return "chunks_route_alike";
    case InvariantKind::kSentEqualsBufferFill:
      return "sent_equals_buffer_fill";
    case InvariantKind::kBufferFillIsReceived:
      return "buffer_fill_is_received";
    case InvariantKind::kBufferFillWithinRows:
      return "buffer_fill_within_rows";
    case InvariantKind::kGroupSizesSumToFill:
      return "group_sizes_sum_to_fill";
    case InvariantKind::kSentBackEqualsSent:
      return "sent_back_equals_sent";
    case InvariantKind::kSentBackIsFill:
      return "sent_back_is_fill";
    case InvariantKind::kSentBackIsTranspose:
      return "sent_back_is_transpose";
    case InvariantKind::kMlpHiddenConstrained:
      return "mlp_hidden_constrained";
    case InvariantKind::kMlpContractionAllReduce:
      return "mlp_contraction_all_reduce";
    case InvariantKind::kDroplessWeightSum:
      return "dropless_weight_sum";
    case InvariantKind::kDroplessUnchosenZero:
      return "dropless_unchosen_zero";
    case InvariantKind::kDroplessEveryExpert:
      return "dropless_every_expert";
    case InvariantKind::kSubgroupPositions:
      return "subgroup_positions";
    case InvariantKind::kSubgroupCombineSoftmax:
      return "subgroup_combine_softmax";
    case InvariantKind::kSubgroupOutputReshape:
      return "subgroup_output_reshape";
    case InvariantKind::kSortedExpertsNonDecreasing:
      return "sorted_experts_non_decreasing";
    case InvariantKind::kGroupSizesCoverRows:
      return "group_sizes_cover_rows";
    case InvariantKind::kUnsortInvertsSort:
      return "unsort_inverts_sort";
    case InvariantKind::kNoRowsLeaveDevice:
      return "no_rows_leave_device";
    case InvariantKind::kDecodeReceivesAllRows:
      return "decode_receives_all_rows";
    case InvariantKind::kDecodeSendSizesBroadcast:
      return "decode_send_sizes_broadcast";
    case InvariantKind::kDecodeOutputReplicated:
      return "decode_output_replicated";
    case InvariantKind::kTensorScatteredOutput:
      return "tensor_scattered_output";
    case InvariantKind::kTensorOutSpecMatches:
      return "tensor_out_spec_matches";
    case InvariantKind::kTensorTransposePsum:
      return "tensor_transpose_psum";
    case InvariantKind::kRingMaskKeepsLocalExperts:
      return "ring_mask_keeps_local_experts";
    case InvariantKind::kRingGroupSizesCoverGroup:
      return "ring_group_sizes_cover_group";
    case InvariantKind::kRingMatchesAllToAll:
      return "ring_matches_all_to_all";
    case InvariantKind::kScaledWeightSum:
      return "scaled_weight_sum";
    case InvariantKind::kBiasedSelection:
      return "biased_selection";
    case InvariantKind::kUnitCombineWeights:
      return "unit_combine_weights";
    case InvariantKind::kNormalizedWeights:
      return "normalized_weights";
    case InvariantKind::kRoutedPlusShared:
      return "routed_plus_shared";
    case InvariantKind::kMaskedLoopMatchesDropless:
      return "masked_loop_matches_dropless";
  }
  return "unknown";
}

namespace {

using invariant_internal::Builder;
namespace inv = invariant_internal;

// What one check group reads.
struct CheckInput {
  const Trace& trace;
  const SpmdResult& spmd;
  const Captures* captures;
  const ReferenceRun* reference;
};

// One row per check group, in the order a page lists them. A group appends nothing when its
// trace does not hold what it checks (no routing facts, no shard_map, ...).
struct CheckGroup {
  const char* covers;
  void (*check)(const CheckInput& in, Builder& b);
};

constexpr CheckGroup kCheckGroups[] = {
    {"output shape", [](const CheckInput& in, Builder& b) { inv::ShapeInvariant(in.trace, b); }},
    {"bytes per device",
     [](const CheckInput& in, Builder& b) { inv::BytesInvariant(in.trace, in.spmd, b); }},
    {"tokens routed", [](const CheckInput& in, Builder& b) { inv::RoutingInvariant(in.trace, b); }},
    {"top-k choices",
     [](const CheckInput& in, Builder& b) { inv::ChoiceInvariants(in.trace, in.captures, b); }},
    {"capacity masks",
     [](const CheckInput& in, Builder& b) { inv::CapacityInvariants(in.trace, in.captures, b); }},
    {"training combine",
     [](const CheckInput& in, Builder& b) {
       inv::TrainingCombineInvariant(in.trace, in.captures, b);
     }},
    {"ragged all-to-all",
     [](const CheckInput& in, Builder& b) { inv::AllToAllInvariants(in.trace, b); }},
    {"MlpBlock",
     [](const CheckInput& in, Builder& b) { inv::MlpInvariants(in.trace, in.spmd, b); }},
    {"dropless weights",
     [](const CheckInput& in, Builder& b) { inv::DroplessInvariants(in.trace, in.captures, b); }},
    {"inference subgroups",
     [](const CheckInput& in, Builder& b) { inv::SubgroupInvariants(in.trace, in.captures, b); }},
    {"per-device sort",
     [](const CheckInput& in, Builder& b) { inv::SparseSortInvariants(in.trace, in.captures, b); }},
    {"decode",
     [](const CheckInput& in, Builder& b) { inv::DecodeInvariants(in.trace, in.captures, b); }},
    {"tensor parallelism",
     [](const CheckInput& in, Builder& b) { inv::TensorParallelInvariants(in.trace, in.spmd, b); }},
    {"tensor_transpose",
     [](const CheckInput& in, Builder& b) { inv::TensorTransposeInvariants(in.trace, b); }},
    {"ring of experts",
     [](const CheckInput& in, Builder& b) { inv::RingInvariants(in.trace, in.captures, b); }},
    {"ring vs all-to-all",
     [](const CheckInput& in, Builder& b) {
       inv::RingReferenceInvariant(in.trace, in.captures, in.reference, b);
     }},
    {"routing variants",
     [](const CheckInput& in, Builder& b) {
       inv::RoutingVariantInvariants(in.trace, in.captures, b);
     }},
    {"shared experts",
     [](const CheckInput& in, Builder& b) { inv::SharedInvariants(in.trace, in.captures, b); }},
    {"masked loop",
     [](const CheckInput& in, Builder& b) {
       inv::MaskedLoopInvariants(in.trace, in.captures, in.reference, b);
     }},
};

}  // namespace

std::vector<Invariant> TraceInvariants(const Trace& trace, const SpmdResult& spmd,
                                       const Captures* captures, const ReferenceRun* reference) {
  std::vector<Invariant> out;
  Builder b(out);
  const CheckInput in{trace, spmd, captures, reference};
  for (const CheckGroup& group : kCheckGroups) group.check(in, b);
  return out;
}

std::vector<Invariant> SectionInvariants(const Trace& trace, const Captures& captures,
                                         const std::string& run, bool routing) {
  std::vector<Invariant> all;
  Builder b(all);
  if (routing) {
    inv::RoutingInvariant(trace, b);
    inv::ChoiceInvariants(trace, &captures, b);
    inv::RoutingVariantInvariants(trace, &captures, b);
  }
  inv::TensorTransposeInvariants(trace, b);
  for (Invariant& inv : all) inv.run = run;
  return all;
}

}  // namespace shardtrace
