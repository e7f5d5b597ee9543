// The invariants a visualization's formal specification lists: properties of the traced
// path that always hold, each evaluated on the Trace at hand and the numeric captures of
// its run. Which ones apply follows from what the trace holds: every trace gets the shape
// and bytes checks; routing facts give the token counts; an MlpBlock its wo contraction;
// dense_matmul's [B,S,E] weights the dropless checks; the 5-D subgroup masks the inference
// checks; the sparse per-device sorts, the ragged send matrices, the tensor-parallel
// psum_scatter, the ring's rolled ids, DeepSeek's scaling and the shared experts each their
// own. Every invariant is a typed record (InvariantKind) naming the source line it comes
// from, so tests and renderers select by kind, never by matching its prose. A violated
// invariant is reported, not thrown: the document then shows the bug instead of hiding it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/captures.h"
#include "ir/trace.h"
#include "numeric/array.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

enum class InvariantKind {
  // Every trace.
  kOutputShape,      // output.shape == inputs.shape
  kPlacedBytes,      // bytes_per_device == prod(local_shape) * sizeof(dtype)
  kTokensRouted,     // sum(tokens per expert) == B*S*K
  kDistinctChoices,  // each token's K choices are distinct experts
  kNonNegativeWeights,
  kChoicesInKeptGroups,  // DeepSeek group-limited routing
  // dense_matmul with capacity.
  kDispatchIsCombineNonzero,
  kCapacityIsMaskDim,
  kKeptIsRoutedMinusDropped,
  kOneTokenPerSlot,
  kSlotsInArrivalOrder,
  kCombineHoldsTopKWeights,  // training: a kept choice's slot holds its top-k weight
  // ragged_all_to_all.
  kChunksRouteAlike,
  kSentEqualsBufferFill,
  kBufferFillIsReceived,
  kBufferFillWithinRows,
  kGroupSizesSumToFill,
  kSentBackEqualsSent,
  kSentBackIsFill,
  kSentBackIsTranspose,
  // MlpBlock (linears.py), also the shared experts.
  kMlpHiddenConstrained,     // x before wo constrained with wo's F sharding
  kMlpContractionAllReduce,  // the F-sharded wo contraction needs an all-reduce
  // dense_matmul dropless.
  kDroplessWeightSum,     // sum_E weights == sum_K top_k_weights
  kDroplessUnchosenZero,  // weights[b,s,e] == 0 unless e was chosen
  kDroplessEveryExpert,   // layer_w0 is [B,S,E,H]: every expert on every token
  // dense_matmul dropping in inference (generate_masks_subgroup).
  kSubgroupPositions,       // slots counted per (b, n) group, from 0, capped at C
  kSubgroupCombineSoftmax,  // combine_mask holds the full softmax of the kept experts
  kSubgroupOutputReshape,   // [B,N,S,M] -> [B,N*S,M]
  // sparse_matmul (per device, inside shard_map).
  kSortedExpertsNonDecreasing,
  kGroupSizesCoverRows,
  kUnsortInvertsSort,
  kNoRowsLeaveDevice,  // EP = 1
  // sparse_matmul with the batch replicated (decode).
  kDecodeReceivesAllRows,
  kDecodeSendSizesBroadcast,
  kDecodeOutputReplicated,
  // sparse_matmul with tensor parallelism.
  kTensorScatteredOutput,
  kTensorOutSpecMatches,
  kTensorTransposePsum,  // each wi gmm's M-sliced partial sums psum'ed
  // ring of experts.
  kRingMaskKeepsLocalExperts,
  kRingGroupSizesCoverGroup,
  kRingMatchesAllToAll,  // against a reference run of the all-to-all path
  // routing variants.
  kScaledWeightSum,     // DeepSeek: sum_k top_k_weights == routed_scaling_factor
  kBiasedSelection,     // DeepSeek: chosen by biased score, weighted by pre-bias
  kUnitCombineWeights,  // Llama 4: the weight-sum uses weight 1
  kNormalizedWeights,   // norm_topk_prob: sum_k top_k_weights == 1
  // RoutedAndSharedMoE.
  kRoutedPlusShared,
  // The masked-loop reference.
  kMaskedLoopMatchesDropless,
};

// "output_shape", "dropless_weight_sum", ...: a stable key (JSON, tests).
std::string ToString(InvariantKind kind);

struct Invariant {
  InvariantKind kind = InvariantKind::kOutputShape;
  std::string statement;  // "sum(tokens per expert) == B*S*K"
  std::string reason;     // why it always holds, one line
  std::string result;     // "holds: 32 == 4*4*2", "VIOLATED: ...", "not evaluated: ..."
  bool violated = false;
  // Where it comes from: "moe.py:1451, 1462", "linears.py MlpBlock"; empty for shardtrace's
  // own bookkeeping (bytes per device).
  std::string source;
  // The run it was evaluated on when not the page's own trace ("Llama 4 run"), so a property
  // of one section is never read as one of another.
  std::string run;
};

// A second run of the same inputs and weights whose output an invariant compares with: the
// masked loop's dense dropless run, the ring's all-to-all run.
struct ReferenceRun {
  std::string label;  // "dense_matmul dropless (sparse_matmul=false capacity_factor=-1)"
  const Captures* captures = nullptr;
};

// `spmd` is the SPMD result of `trace` (RunResult::spmd). `captures` (RunResult::captures) may
// be null; the value checks then say so. `reference`, when given, is the run the masked loop
// (dense dropless) or the ring (all-to-all) must match.
std::vector<Invariant> TraceInvariants(const Trace& trace, const SpmdResult& spmd,
                                       const Captures* captures = nullptr,
                                       const ReferenceRun* reference = nullptr);

// The invariants a page section traced from another config adds, labeled with `run` so they
// are listed as that run's and not the page trace's: with `routing`, the routing ones (token
// counts, distinct choices, each variant's weights: Llama 4, norm_topk_prob); always the
// tensor_transpose psums of the wi gmms.
std::vector<Invariant> SectionInvariants(const Trace& trace,
                                         const Captures& captures,
                                         const std::string& run, bool routing);

}  // namespace shardtrace
