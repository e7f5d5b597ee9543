// Routing, exactly as moe.py does it: GateLogit (kernel, score_func, deepseek3 pre-bias
// logits, bias), get_topk with every variant (default top-k + softmax over the k, deepseek3
// grouped routing, DeepSeek weight scaling, llama4, gemma4, norm_topk_prob, random routing
// in symbolic mode), load_balance_loss, calculate_load_balance_updates and
// apply_ffn_activation (the GLU, including gpt_oss's clipped variant).
#pragma once

#include <optional>

#include "paths/moe_context.h"

namespace shardtrace {

struct GateOutput {
  Value gate_logits;                     // [B,S,E] gate dtype
  std::optional<Value> pre_bias_logits;  // deepseek3 with a score func
};

struct TopKOutput {
  Value weights;  // [B,S,K]
  Value indices;  // [B,S,K] int32
};

GateOutput GateLogit(const MoeContext& ctx, const Value& routing_inputs, const Value& kernel,
                     const std::optional<Value>& bias);
TopKOutput GetTopK(const MoeContext& ctx, const Value& gate_logits,
                   const std::optional<Value>& pre_bias_logits);
// load_balance_loss(top_k_indices, softmax_probs): scalar.
Value LoadBalanceLoss(const MoeContext& ctx, const Value& top_k_indices,
                      const Value& softmax_probs);
// load_balance_loss(top_k_indices, None, density_prob): the per-sequence mean probabilities
// [B, E] given (the release's moe_topk_before_ep_all_gather gathers them over the ring).
Value LoadBalanceLossFromDensityProb(const MoeContext& ctx, const Value& top_k_indices,
                                     const Value& density_prob);
// softmax(gate_logits in f32).astype(dtype), the probabilities the loss uses.
Value RouterProbs(const MoeContext& ctx, const Value& gate_logits);
// calculate_load_balance_updates: sign(mean load - count) * rate per expert, the counts
// psummed over `count_axes` first where moe.py passes it mesh axes (the release's sparse path).
Value LoadBalanceUpdates(const MoeContext& ctx, const Value& top_k_indices,
                         const std::vector<std::string>& count_axes = {});
// Its two halves: calculate_expert_counts (psummed over `count_axes` when given; `rows` is
// how many (token, k) rows the counts cover) and load_balance_updates_from_counts.
struct ExpertCounts {
  Value counts;
  int64_t rows = 0;
};
ExpertCounts CountExperts(const MoeContext& ctx, const Value& top_k_indices,
                          const std::vector<std::string>& count_axes = {});
Value BiasUpdatesFromCounts(const MoeContext& ctx, const Value& counts, int64_t rows);
// act(layer_w0) * layer_w1 cast to the compute dtype. Takes its inputs by value so a caller
// that moves them in lets each buffer go after its last reader: the peak then holds two of
// the [rows, H] activations besides the product, not four.
Value ApplyFfnActivation(const MoeContext& ctx, Value layer_w0, Value layer_w1);

}  // namespace shardtrace
