// The training step of one traced block, symbolic at full size: a result beside the forward
// Trace and its SpmdResult (neither is changed), as a StepResult. It holds the gradient of
// every parameter and of the block input with its sharding (a gradient is sharded like its
// primal and has its dtype), the backward pass's collectives, and the step's per-device
// memory under the remat policy MaxText wraps a decoder layer in (config/remat_policy.h).
//
// Backward collectives (docs/step.md), each marked written (JAX emits it: the transpose of a
// collective moe.py writes, or shard_map's psum of a weight's cotangent over the mesh axes its
// in_spec leaves out) or inserted by XLA (the reduction of an einsum operand's gradient: a
// reduce-scatter over the axes the forward all-gathered the weight on, an all-reduce over axes
// it is replicated on; the transposes of the forward's implied collectives). The transposes:
// all_gather <-> psum_scatter, ragged_all_to_all reversed, psum -> psum, all-to-all and
// collective-permute reversed, a slice -> all-gather, a gather of a value every device then
// computes with whole -> a free slice. Under a remat policy that does not keep a value the
// backward reads, the forward collectives that produce it run again in the backward (marked
// recompute). Every collective states its TPU op and bytes and, beside them, XLA:CPU's
// (16-bit floats widened to float32; a reduce-scatter is an all-reduce and a slice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/remat_policy.h"
#include "ir/trace.h"
#include "shard/mesh.h"
#include "spmd/spmd_result.h"

namespace shardtrace {

// The gradient of one parameter (kernel_axes record) or of the block input.
struct StepGradient {
  int tensor = -1;  // the primal: a kParam output or Trace::input
  PartitionSpec spec;
  Shape local_shape;
  DType dtype = DType::kFloat32;
  int64_t bytes_per_device = 0;
};

struct StepCollective {
  CollectiveKind kind = CollectiveKind::kPsum;  // as TPU runs it
  bool written = false;    // JAX emits it (false: XLA's SPMD partitioner inserts it)
  bool recompute = false;  // a forward collective run again by the backward (remat)
  // A parameter gathered for a backward einsum: XLA reshards a step argument once, where it
  // enters the step (its HLO op_name is the argument's), so its compiled step counts it forward.
  bool argument = false;
  int forward_op = -1;  // the forward op it transposes, or re-runs
  int tensor = -1;      // the forward tensor whose cotangent (or value) moves
  std::vector<std::string> axes;
  int64_t participants = 1;
  int64_t groups = 1;
  int64_t bytes_per_device = 0;  // sent by each device, as ImpliedCollective counts it
  DType dtype = DType::kFloat32;
  // As XLA:CPU compiles it on fake devices: the HLO op ("all-reduce" for a reduce-scatter),
  // the bytes each device sends and the op's result bytes per device, in float32 for 16-bit
  // floats.
  std::string xla_cpu_op;
  int64_t xla_cpu_bytes_per_device = 0;
  int64_t xla_cpu_result_bytes = 0;
  // The moved block's per-device shape before and after (a reduce-scatter: the whole block of
  // partial sums, then the device's share), which the TPU lowering reads (tpu_collectives.h).
  Shape local_before, local_after;
  std::string reason;
};

// A buffer the forward keeps for the backward.
struct SavedResidual {
  int tensor = -1;
  int64_t bytes = 0;
  std::string name;  // the checkpoint name that keeps it; empty: not wrapped (all kept)
  bool offloaded = false;
};

// A buffer live at the backward's peak: a residual of the forward or a cotangent.
struct StepBuffer {
  int tensor = -1;
  int64_t bytes = 0;
  bool cotangent = false;
};

// A buffer of the backward's schedule, live while the VJPs of forward ops lo..hi run (the
// backward runs hi first). Facts of its place in the graph let a reader that knows its
// compiler drop, shorten or lengthen it (model/block_step.cc, TPU):
struct StepRange {
  StepBuffer buffer;
  int lo = 0, hi = 0;
  // A recomputed residual an activation writes from another residual, read only by
  // elementwise ops: a fusing compiler computes it inside its readers and their VJPs.
  bool fusible_activation = false;
  // A residual whose last VJP reader is a dot that also writes its cotangent: that VJP can
  // compute the other operand's gradient first and free it before writing its own.
  bool freed_before_cotangent = false;
  // A gmm's activation operand or its output's cotangent: what the gmm's weight gradient (a
  // tgmm) reads. A compiler that runs every gmm's activation gradient first and the tgmms
  // after them holds it down to the VJP of the block's first gmm (StepMemory::first_gmm).
  bool read_by_weight_gradient = false;
  // A cotangent summed from several gmms' activation gradients (the sorted tokens read by wi_0
  // and wi_1): at the VJP of op summed_at the last partial and the sum are written beside the
  // accumulated one, custom calls no add fuses into. -1: none.
  int summed_at = -1;
  // A gmm's kernel, where that gmm's token operand is read by several gmms whose activation
  // gradients are summed (wi_0's and wi_1's): the op of that sum (StepRange::summed_at). -1:
  // none.
  int kernel_summed_at = -1;
};

struct StepMemory {
  int64_t parameter_bytes = 0;
  int64_t input_bytes = 0;
  int64_t gradient_bytes = 0;        // every parameter's gradient, sharded like it
  int64_t input_gradient_bytes = 0;  // the block input's
  // What the forward keeps on the device for the backward (per layer), and what it moves to
  // pinned_host; the residuals the backward reads and does not find kept are recomputed.
  int64_t saved_bytes = 0;
  int64_t offloaded_bytes = 0;
  int64_t residual_bytes = 0;    // every buffer the backward reads (kept or recomputed)
  int64_t recomputed_bytes = 0;  // of those, what the backward computes again
  std::vector<SavedResidual> saved;
  int64_t forward_temporary_bytes = 0;   // the forward's peak plus what it keeps past its use
  int64_t backward_temporary_bytes = 0;  // residuals and cotangents live, at their peak
  int backward_peak_op = -1;             // the forward op whose transpose runs at that peak
  std::vector<StepBuffer> at_peak;       // what is live there, largest first
  // The backward's schedule, for a reader that drops buffers a compiler never writes and
  // takes the peak again (model/block_step.cc, TPU): its buffers, and by forward op what its
  // VJP adds for itself alone (a gathered weight's cotangent, reshard copies).
  std::vector<StepRange> backward_ranges;
  std::vector<int64_t> backward_transient;
  int first_gmm = -1;  // the first gmm op with a weight operand, -1: none
  std::vector<int> gmm_kernels;  // the weights gmms read (their tgmms write the gradients)
  // The ragged all-to-all that brings the experts' outputs back (the block's last), and its
  // output per device (the device's routed rows); -1 / 0: none.
  int combine_all_to_all = -1;
  int64_t combine_bytes = 0;
  // How XLA:CPU's memory_analysis() on fake devices differs from these TPU figures (what it
  // allocates that this model does not count, or counts wider).
  std::vector<std::string> xla_cpu_notes;
  int64_t peak_temporary_bytes() const {
    return std::max(forward_temporary_bytes, backward_temporary_bytes);
  }
  int64_t peak_bytes() const {
    return parameter_bytes + input_bytes + gradient_bytes + input_gradient_bytes +
           peak_temporary_bytes();
  }
};

struct StepResult {
  RematPolicy policy;
  std::vector<StepGradient> gradients;  // parameters in program order, then the input
  // In the order the backward runs them: remat's re-run forward collectives first (program
  // order), then the transposes from the last forward op back to the first.
  std::vector<StepCollective> backward;
  StepMemory memory;
  int64_t forward_bytes_per_device = 0;    // the forward's written + implied (TraceTotals)
  int64_t backward_bytes_per_device = 0;   // every backward collective, recompute included
  int64_t recompute_bytes_per_device = 0;  // of which forward collectives run again
  int64_t step_bytes_per_device() const {
    return forward_bytes_per_device + backward_bytes_per_device;
  }
};

// REQUIRES `spmd` is AnalyzeSpmd(mesh, trace, ...).
StepResult AnalyzeStep(const Mesh& mesh, const Trace& trace, const SpmdResult& spmd,
                       const RematPolicy& policy);

}  // namespace shardtrace
