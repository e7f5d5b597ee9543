// One attention layer and the logits, in a whole-model training step: what the forward keeps
// for the backward under the remat policy, the backward's temporaries at their peak, and the
// weight collectives, per device, from shapes and the config's logical axis rules alone (no
// numerics: outside the MoE and MLP blocks `fit` is shapes, shardings and bytes). Attention
// activations are sharded as MaxText's attention constrains them (activation_batch,
// activation_length, activation_heads / activation_kv_heads, activation_kv); the kernel is
// MaxText's choice for `attention` (autoselected: TPU splash attention from length 128 on,
// keeping O(length) residuals; dot_product: the [batch, heads, length, length] float32
// logits and their cotangent live in the backward).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/remat_policy.h"
#include "model/whole_step.h"
#include "shard/mesh.h"

namespace shardtrace::model_internal {

// The parameters of one layer of a stack, for its weight gathers and gradient reductions.
struct LayerWeights {
  std::vector<const ParamBuffer*> params;  // the stack's arrays of that role (stacked)
  int64_t layers = 1;                      // the stack's length (to take one layer's share)
};

struct BlockFigures {
  std::vector<MemoryItem> kept;  // per layer, on the device
  int64_t offloaded_bytes = 0;   // per layer, on the host
  int64_t backward_peak_bytes = 0;
  std::string backward_peak_where;
  // A gmm or MLP block's forward temporaries at their peak (TPU): composed in the step's
  // forward, where no gradient is live yet (model/step_peak.cc), not in its backward.
  int64_t forward_peak_bytes = 0;
  // A gmm block's backward peak in the order TPU's scheduler takes where memory is not ample
  // (model/block_step.h, TpuBackwardOrder); unset: backward_peak_bytes in either order.
  std::optional<int64_t> lean_backward_peak_bytes;
  // What stays live from this part's backward through the layers' backward after it (TPU):
  // the logits, whose last reader, the output head's weight gradient, its scheduler places
  // after the layers' backward.
  int64_t residue_bytes = 0;
  // The residue stays whatever the memory: its reader is a loop the scheduler does not move.
  bool residue_pinned = false;
  // What this part's backward reads that the layer's rematerialized forward writes again and
  // the policy does not keep: live from that forward through the backward of the parts after
  // this one in the layer, which runs first.
  int64_t recomputed_bytes = 0;
  // What the rematerialized forward of a gmm or MLP block holds once it has run, before the
  // block's backward reads it, as a fusing compiler writes it (model/block_step.cc): each
  // matmul's activations (a gmm's token operand and output), the combine's float32 input; not
  // the elementwise ops between them. Unset (other parts): recomputed_bytes.
  std::optional<int64_t> rematerialized_bytes;
  // A MoE block of the sparse dispatch (its gmms inside shard_map); false: an einsum block.
  bool grouped = false;
  std::vector<StepCollectiveTotal> collectives;  // per layer (forward and backward)
};

// The attention kernel MaxText runs for this config on `platform` ("dot_product" or "flash").
std::string AttentionKernel(const Config& config, const std::string& platform);

// `tpu`: the projections' head dim, their minor dim, takes whole 128-lane tiles (MLA's 192
// holds 256, gpt-oss's 64 holds 128), as TPU lays them out.
BlockFigures AttentionLayer(const Config& config, const Mesh& mesh, const RematPolicy& policy,
                            const std::string& kernel, const LayerWeights& weights, int64_t batch,
                            bool tpu);

// The output head and cross-entropy: logits [batch, length, vocab] in the config's dtype
// (float32 with logits_dot_in_fp32) and their cotangent, and the head kernel gathered for its
// matmul. `tpu`: its gradient is reduced inside its dot (all-reduce-scatter), never whole.
BlockFigures LogitsStep(const Config& config, const Mesh& mesh, const LayerWeights& head,
                        int64_t batch, bool tpu);

// The collectives XLA inserts for weights sharded over the axes activations split the batch
// on: one all-gather per use (again in the backward when the policy re-runs the layer), one
// reduce-scatter of the gradient over the same axes and an all-reduce over the batch axes
// the weight is replicated on. Per layer.
std::vector<StepCollectiveTotal> WeightCollectives(const Config& config, const Mesh& mesh,
                                                   const LayerWeights& weights, bool gathered_again,
                                                   const std::string& from);

// The token embedding's collectives per step: where only its embed dim is sharded, over axes
// that split the batch, two all-to-alls of the embedded tokens (the lookup's and its
// cotangent's) and no gather or reduction of the table; else as WeightCollectives, or none
// for a table `tied` to the output head (logits_via_embedding), which the head gathers and
// reduces. A tied table's lookup keeps its all-to-alls beside the head's gather (gemma4-26b
// on v5e-16: two bf16[1,2048,2816] all-to-alls and the table's bf16[262144,2816] gather).
std::vector<StepCollectiveTotal> EmbeddingCollectives(const Config& config, const Mesh& mesh,
                                                      const LayerWeights& table, int64_t batch,
                                                      bool tied);

// Bytes per device of an activation of `shape` constrained to `names` by the config's rules.
int64_t LocalBytes(const Config& config, const Mesh& mesh, const Shape& shape,
                   const LogicalAxes& names, DType dtype, const std::string& what);

// Whether TPU gathers `p` in windowed einsums (loops of collective-permutes over the gather's
// group, spmd/tpu_collectives.h) rather than with one all-gather: over a group of 8 or 16
// devices, as every dumped step does, not over 4 (v5p-8) or 128 (v5p-256).
bool WindowedGather(const Config& config, const Mesh& mesh, const ParamBuffer& p);

// The config's `dtype`: the activations'.
DType ActivationDType(const Config& config);

// `dim` as TPU lays out a minor dim, in whole 128-lane tiles (`tpu`), or as it is.
inline int64_t Lanes(int64_t dim, bool tpu) { return tpu ? (dim + 127) / 128 * 128 : dim; }

// The weights' bytes per device gathered whole over those axes, in the activation dtype.
int64_t GatheredWeightBytes(const Config& config, const Mesh& mesh, const LayerWeights& weights);

// `bytes` of an expert kernel gathered for a gmm, as TPU holds it: megablox's gmm is a Pallas
// custom call whose kernel operand has its output dim (the kernel's minor) on the 128 lanes,
// so that dim takes whole lanes (the fixtures' buffers: gemma4-26b's wi_0 and wi_1 gathered as
// bf16[1,128,2816,704] in 528 MiB, 704 on 768 lanes, its wo [1,128,704,2816] in 484 MiB;
// gpt-oss's bf16[128,1,2880,2880] in 2070 MiB, 2880 on 2944). `minor` is that dim on the
// device; as it is off TPU or where it fills its lanes.
inline int64_t GmmKernelBytes(int64_t bytes, int64_t minor, bool tpu) {
  return minor > 0 ? bytes / minor * Lanes(minor, tpu) : bytes;
}

// An expert kernel of the config's gmm path (sparse_matmul: wi_0, wi_1, wo; not the router),
// gathered over the batch axes: its minor dim on the device, or 0 for any other weight.
int64_t GmmKernelMinor(const Config& config, const Mesh& mesh, const ParamBuffer& p);

}  // namespace shardtrace::model_internal
