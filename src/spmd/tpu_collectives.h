// The step's collectives as TPU's compiler writes them. The step model (step_model.h) and the
// forward's written and implied collectives say what moves between which devices, as GSPMD
// plans it; libtpu's later passes then rewrite some of those collectives: an all-reduce it
// cannot fuse with its slice stays a whole all-reduce, small all-gathers become all-reduces,
// top_k runs sharded, an einsum's gather over eight devices becomes a windowed loop of
// collective-permutes. LowerForTpu is a pure function from the forward records, the
// StepResult and the mesh to that compiled list, each entry carrying the rule that produced it
// (TpuRule) and why, so `trace --step` can print TPU's view and tests/tpu_block_test.cc can hold
// it against libtpu's own compiles (testdata/maxtext-tpu/blocks). Every rule was measured on
// those compiles' HLO (libtpu 0.0.51, v5p-8 and v5p-16); the .cc cites the fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/trace.h"
#include "shard/mesh.h"
#include "spmd/spmd_result.h"
#include "spmd/step_model.h"

namespace shardtrace {

// What TPU's compiler did to the model's collective.
enum class TpuRule {
  kAsModelled,  // written as the model has it
  // A 16-bit reduce-scatter whose share of the layout's minor dim is under 512 bytes: TPU's
  // all-reduce-scatter fusion refuses it, so the whole block is all-reduced, then sliced.
  kUnfusedMinorDim,
  // A shard_map psum sliced back over a group of 8 (a v5p-16's whole 2x2x2 torus): all-reduced
  // whole, then sliced.
  kUnfusedWholeTorus,
  // An einsum operand's all-gather (or its gradient's reduce-scatter) over a group of 8: GSPMD's
  // windowed einsum, 5 collective-permutes of one device's share.
  kWindowedEinsum,
  // moe.py's tiny all_gather (<= 256 B): TPU's all-gather decomposer writes an all-reduce of
  // the same bytes (a zero-padded buffer).
  kSmallAllGatherAsAllReduce,
  // The gather of top_k's operand: TPU's top_k runs on the batch-sharded logits.
  kShardedTopK,
  // A float32 einsum operand at matmul_precision=default: the MXU reads it as bfloat16 and
  // TPU gathers the rounded copy.
  kBfloat16MatmulOperand,
  // A re-run (remat) of moe.py's tiny integer all_gather: the re-run reads the forward's.
  kNotRecomputed,
  // A float32 all-reduce whose result is only cast to bfloat16: reduced in bfloat16.
  kBfloat16Propagation,
  // Remat's re-run of the routing weights' scatter inside the step: a scatter-add of local
  // updates, reduce-scattered, where the model gathers the updates.
  kScatterAddReduceScatter,
  // The partial sums of one gradient from several VJPs: added first, reduced once.
  kReassociated,
  // The scatter's transpose on a cotangent sharded on the scattered dim: a local gather and an
  // all-reduce of the updates-shaped result, where the model gathers the cotangent.
  kScatterTransposeAllReduce,
  // An expert-sharded einsum weight's gradient (dense_matmul's wi_0, wi_1 under fsdp x expert):
  // its cotangent gathered over the batch axes instead of a reduce-scatter of the gradient; the
  // input's gradient then all-reduced whole.
  kCotangentGatheredOverBatch,
};
std::string ToString(TpuRule rule);  // "as modelled", "unfused minor dim", ...

struct TpuCollective {
  std::string op;            // HLO op as TPU writes it: "all-gather", "reduce-scatter", ...
  int64_t group = 1;         // devices per group (a collective-permute: 2, its source and target)
  int64_t result_bytes = 0;  // the op's result per device (a reduce-scatter: the share)
  bool recompute = false;    // backward: a forward collective remat runs again
  bool argument = false;     // a parameter gathered whole for a VJP, where it enters the step
  int tensor = -1;           // the forward tensor whose data (or cotangent) moves
  int source = -1;           // index of the model's collective it lowers (forward or backward list)
  TpuRule rule = TpuRule::kAsModelled;
  // All-reduces TPU's combiner sends as one tuple all-reduce share this number; -1: alone.
  int combined_group = -1;
  std::string reason;  // why TPU writes it so (empty for kAsModelled)
};

// The model's collective `source` refers to, before lowering: the forward's written and
// implied collectives in program order (a slice and one-device groups left out).
struct ModelForwardCollective {
  int op = -1;
  bool written = false;
  const ImpliedCollective* implied = nullptr;  // null for a written one
};

struct TpuStepCollectives {
  std::vector<TpuCollective> forward;   // the forward pass compiled alone
  std::vector<TpuCollective> backward;  // StepResult::backward, lowered (dropped ones left out)
  std::vector<TpuCollective> dropped;   // model collectives TPU does not write, with the rule
};

struct TpuLoweringOptions {
  bool default_matmul_precision = true;  // matmul_precision: default (one bfloat16 MXU pass)
};

std::vector<ModelForwardCollective> ModelForwardCollectives(const Mesh& mesh, const Trace& trace,
                                                            const SpmdResult& spmd);

// What TPU rewrites, in one line: "2 unfused minor dim, 1 sharded top_k" (counts of the
// forward's and backward's collectives by rule, in TpuRule order); empty when nothing.
std::string RewriteSummary(const TpuStepCollectives& tpu);

// REQUIRES `spmd` is AnalyzeSpmd(mesh, trace, ...); `step` is AnalyzeStep of the same, or null
// for the forward alone.
TpuStepCollectives LowerForTpu(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
                               const StepResult* step, const TpuLoweringOptions& options);

}  // namespace shardtrace
