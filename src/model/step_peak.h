// The step's peak, composed from the parts a fit has built (model/whole_step.cc): which of the
// backward's phases holds the most, what is live there, and memory_analysis()'s fields,
// verdict and headroom from it. Kept apart from the fit's construction so the phase rules,
// each read from the TPU compiler's buffer timelines (docs/fit.md "The backward's phases"),
// sit in one place.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/attention_step.h"
#include "model/whole_step.h"

namespace shardtrace::model_internal {

// temp at the step's peak: the largest of the backward's phases, each with what is live
// there (measured on the TPU fixtures' buffer timelines, docs/fit.md "Phases"):
// - the logits' backward comes first: every stack's kept residuals and cast weights, every
//   inlined stack's gathered weights, and no layer's gradient yet. A looped stack's
//   gradients are its backward loop's accumulators, made when that loop starts
//   (deepseek3-test at batch 20 and 31: the compiler's float32 [58, ...] accumulators appear
//   after the head's cotangent);
// - then each stack's backward, the last stack first. Its own accumulators and those of the
//   stacks after it (done) are live, with the gradients outside the stacks (the head's);
//   the stacks after it have freed their kept residuals and cast weights, their loop their
//   last reader (deepseek3-test at batch 30: 36.6 GiB in the dense layers' backward, where
//   the MoE stack's 3.4 GiB of residuals and 7.1 GiB of cast weights are gone, against
//   46.5 GiB in the MoE layers'). Inlined stacks before it (and itself) still hold their
//   gathered weights, those after it have made their gradients.
// - after the backward, where TPU's compiler peels a stack's loop to none, the optimizer's
//   update in the gradients' layer-major layout (LayerStack::peeled): every such stack's new
//   state and the largest gradient, nothing of the backward (mixtral-8x7b offloaded at 2
//   layers: fit's 9,647,292,416 B against the 9,647,049,664 B the compiler covers there).
// On TPU the logits' cotangent (bf16 where the logits are float32, attention_step.cc) stays live
// through the layers' backward, the output head's weight gradient its last reader, which the
// compiler's scheduler places after the layers' backward; fit drops it where it would take the
// step past the share of HBM where that scheduler trades latency for memory (95%: libtpu's
// flag, in the chip table).
// The fixtures' buffers at the compiler's peak hold one of them (or a piece, or the head's
// gradient) in 22 of the 26 steps that peak in a layer's backward; not mixtral at batch 24
// and sequence 8192 (11.7 GiB of logits, 92% of HBM with them), mixtral under
// save_qkv_proj, deepseek3-test at batch 30 (v5p-8: the head's gradient first), llama4
// peaking where its forward ends. mixtral on v5e-16 at batch 12 and 13 keeps them at 86% and
// 96% of HBM, against the 95% rule (listed with bound 'peak logits'): the limit is not all
// the scheduler weighs.
void ComposePeak(const std::vector<std::string>& order, const BlockFigures& logits, FitResult* r);

// The optimizer's update of a stack whose weight gradients TPU writes in another layout than
// the parameters' (LayerStack::relayout_update_bytes): it reads each such parameter and its
// moments in the gradient's layout and writes the new ones there, copied back after every
// update. `peeled` (LayerStack::peeled): every stacked weight, its gradient layer-major. Else an
// inlined stack of einsum MoE layers (the dense dispatch), whose expert kernels' gradients TPU
// lays out with the reduce-scattered dim minor: the kernels whose parameter keeps another dim
// minor (wi_0 and wi_1, [experts, emb, mlp] sharded on emb), not wo (Llama 4 Scout at 4 layers
// on v5p-8, sparse_matmul=false: its dump copies the eight wi kernels' parameter, mu and nu to
// that layout, 24 f32[16,1,1280,8192] live at once at the compiler's fullest moment, in the
// update; fit had no such phase, -64.7%).
void RelayoutUpdate(const std::vector<const ParamBuffer*>& params, bool peeled,
                    const std::function<int64_t(const ParamBuffer&)>& moments, LayerStack* s);

// memory_analysis()'s fields of a composed step, its verdict and headroom.
void SettleMemory(FitResult* r);

// TPU: which of a gmm block's two backward orders each stack takes (model/block_step.h), as
// TPU's scheduler chooses by the memory it schedules (kWeightsLastUntilHbm, model/whole_step.h),
// with the step composed again (ComposePeak, SettleMemory) and a note where an order changes.
void ChooseBackwardOrder(const std::vector<std::string>& order, const BlockFigures& logits,
                         FitResult* r);

}  // namespace shardtrace::model_internal
