#include "emit/tensor_glossary.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "config/moe_lines.h"

namespace shardtrace {
namespace {

using Entry = std::pair<std::string_view, std::string_view>;

// moe.py's variables and parameters (seed revision 313890777), alphabetically.
constexpr std::array<Entry, 101> kMeanings = {{
    {"all_shard_local_sizes", "rows each batch shard routed to each of this shard's experts"},
    {"all_shards_group_sizes", "rows every device sends to every expert shard [src, dst]"},
    {"all_shards_group_sizes_T", "the same matrix transposed: what comes back [dst, src]"},
    {"base_indices", "local expert id of each (batch shard, local expert) slot"},
    {"bias", "the gate's routing bias after the cast (DeepSeek's load-balancing bias)"},
    {"bias_updates", "the loss-free load-balancing update of the routing bias"},
    {"chunk_indices", "the embedding columns of one chunk"},
    {"combine_mask", "routing weight of each (token, expert, slot); 0 where not kept"},
    {"combined_expert_mask", "1 where a token's choice of an expert was kept"},
    {"combined_expert_token_position", "1-based slot of each kept (token, expert); 0 if dropped"},
    {"density_prob", "mean router probability per expert (load-balance loss)"},
    {"dispatch", "the tokens gathered into each expert's capacity slots"},
    {"dispatch_mask", "1 where a token occupies an expert's slot"},
    {"expert_capacity_per_batch", "C: slots per expert per batch row"},
    {"expert_indices", "expert id of each row before sorting"},
    {"expert_mask", "one-hot of each token's k-th choice"},
    {"expert_mask_fused", "expert_mask with (S, K) fused into one row axis"},
    {"expert_output", "one expert's output on every token (masked loop)"},
    {"expert_shard_id", "this device's index along the expert axis"},
    {"expert_token_count", "running count of each expert's assignments, in token order"},
    {"expert_token_count_fused", "the running count over the fused (S, K) rows"},
    {"expert_token_position", "arrival position of each choice at its expert"},
    {"expert_token_position_fused", "arrival position over the fused (S, K) rows"},
    {"expert_token_position_in_capacity", "one-hot of the slot (C+1 wide: slot 0 = dropped)"},
    {"final_output", "the sum of the masked expert outputs (masked loop)"},
    {"flatten_selected_experts", "every (token, k) choice's expert, flattened"},
    {"gate.bias", "routing bias per expert (DeepSeek-V3), added before top-k"},
    {"gate.kernel", "router weight: embed -> expert logits"},
    {"gate_logits", "router scores per token and expert"},
    {"global_group_sizes", "rows per expert on every device (all-gathered)"},
    {"group_idx", "the routing groups each token keeps"},
    {"group_mask", "1 for the experts of a kept routing group"},
    {"group_scores", "each routing group's score (sum of its top-2 experts)"},
    {"group_size", "rows routed to each expert (bincount)"},
    {"group_sizes", "rows per local expert: the gmm's group sizes"},
    {"group_vals", "the kept groups' scores"},
    {"index_batch", "batch index broadcast over the scatter"},
    {"index_length", "sequence index broadcast over the scatter"},
    {"input_offsets", "where each peer's rows start in this device's send buffer"},
    {"inputs", "the layer's input activations"},
    {"inputs_2d", "the inputs as (tokens, embed)"},
    {"intermediate_layer", "activation(layer_w0) * layer_w1: the expert hidden state"},
    {"intermediate_output", "the experts' outputs (wo) per row"},
    {"kernel", "the gate kernel after the cast"},
    {"lb_loss", "the load-balancing auxiliary loss"},
    {"layer_act", "activation(layer_w0)"},
    {"layer_multiply", "activation(layer_w0) * layer_w1"},
    {"layer_w0", "the gated up-projection (wi_0) per row or slot"},
    {"layer_w0_partial", "layer_w0 over one embedding chunk (summed over chunks)"},
    {"layer_w1", "the linear up-projection (wi_1) per row or slot"},
    {"layer_w1_partial", "layer_w1 over one embedding chunk (summed over chunks)"},
    {"local_group_size", "rows this device's experts receive, per local expert"},
    {"local_output", "the expert outputs back in receive order"},
    {"local_sizes", "all_shard_local_sizes flattened"},
    {"logits", "gate_logits inside shard_map (this device's tokens)"},
    {"mask", "1 where a token chose this expert (masked loop)"},
    {"masked_logits", "group-masked scores: experts outside kept groups at -inf"},
    {"masked_output", "an expert's output weighted by its routing weight (masked loop)"},
    {"output", "the layer's output (or a step towards it)"},
    {"output_offsets", "where this device's rows land in each peer's receive buffer"},
    {"output_shape", "the empty receive buffer of the all-to-all"},
    {"pre_bias_logits", "router scores before the routing bias (weights come from these)"},
    {"recv_sizes", "rows this device receives from each peer"},
    {"replicated_inputs_2d", "each token's row repeated K times, once per choice"},
    {"reshaped_group_sizes", "group_size summed per expert shard"},
    {"reshaped_intermediate", "expert outputs as (token, k, embed)"},
    {"reshaped_weights", "routing weights as (token, k)"},
    {"roll_to_expert_id", "first expert of this device's ring position"},
    {"routed_scaling_factor", "DeepSeek's scale on the normalized weights"},
    {"router_scores", "sigmoid of the chosen logit (Llama 4), applied to the inputs"},
    {"score_mask", "1 for experts inside the kept routing groups"},
    {"scores_grouped", "scores as (token, group, experts per group)"},
    {"send_sizes", "rows this device sends to each peer"},
    {"shared_experts", "the shared-expert MLP's output"},
    {"softmax_probs", "softmax of gate_logits over experts"},
    {"sorted_experts", "expert id of each sorted row"},
    {"sorted_experts_ids", "local expert id of each locally sorted row"},
    {"sorted_indices", "permutation sorting received rows by local expert"},
    {"sorted_inputs", "the (token, k) rows grouped by expert: the gmm's input"},
    {"sorted_selected_experts", "permutation sorting the (token, k) rows by expert"},
    {"top2_in_group_idx", "the two best experts of each routing group"},
    {"top2_in_group_vals", "their scores"},
    {"top_k_indices", "the K experts each token chose"},
    {"top_k_values", "biased scores of the chosen experts (used only to choose)"},
    {"top_k_weights", "routing weight of each choice"},
    {"trunc_expert_mask", "expert_mask with choices beyond capacity removed"},
    {"unsort_indices", "inverse permutation back to the original row order"},
    {"unsort_intermediate", "expert outputs back in (token, k) order"},
    {"update_weights", "zeros [B,S,E] the top-k weights are scattered into"},
    {"w0", "wi_0 as this device holds it inside shard_map"},
    {"w0_bias", "wi_0's bias"},
    {"w0_chunk", "one embedding chunk of wi_0"},
    {"w0_kernel", "wi_0 in the compute dtype, as the einsum/gmm reads it"},
    {"w1", "wi_1 as this device holds it inside shard_map"},
    {"w1_chunk", "one embedding chunk of wi_1"},
    {"w1_kernel", "wi_1 in the compute dtype"},
    {"weights", "top-k weights scattered to [B,S,E] (0 for unchosen experts)"},
    {"weights_sum", "per-token sum of the top-k weights (normalization)"},
    {"within_capacity",
     "1 where a choice's arrival position fits the capacity (unnamed in moe.py: "
     "less_equal(expert_token_count, expert_capacity_per_batch), {})"},
    {"wo", "expert down-projection: hidden -> embed, per expert"},
    {"wo_kernel", "wo in the compute dtype"},
}};

constexpr std::array<Entry, 6> kMoreMeanings = {{
    {"wi_0", "expert gated up-projection: embed -> hidden, per expert"},
    {"wi_1", "expert linear up-projection: embed -> hidden, per expert"},
    {"x", "the rows this device holds inside shard_map"},
    {"x_chunk", "one embedding chunk of the rows"},
    {"shared_mlp", "the shared experts' MLP"},
    {"wo_bias", "wo's bias"},
}};

// The statement where each traced function or named scope starts, and how its line is
// written (`{}` takes the lines in order); dense_matmul opens wi_0/wi_1/wo twice (dropping,
// dropless). weight_sum, both unpermute's and dense_matmul's, is told apart by its parent scope.
using S = MoeStatement;
struct ScopeLine {
  std::string_view scope, format;
  std::array<MoeStatement, 2> statements;
  int count = 1;
};
constexpr std::array<ScopeLine, 28> kLines = {{
    {"sort_activations", "{}", {S::kSortActivationsScope}},
    {"calculate_load_balance_updates", "{}", {S::kCalculateLoadBalanceUpdates}},
    {"gate", "{} GateLogit.__call__", {S::kGateLogitCall}},
    {"RoutedMoE", "{} RoutedMoE.__call__", {S::kRoutedMoeCall}},
    {"RoutedAndSharedMoE", "{} RoutedAndSharedMoE.__call__", {S::kRoutedAndSharedMoeCall}},
    {"get_topk", "{}", {S::kGetTopk}},
    {"deepseek_scale_weights", "{}", {S::kDeepseekScaleWeights}},
    {"expert_group_mask", "{}", {S::kExpertGroupMask}},
    {"deepseek_routing", "{}", {S::kDeepseekRouting}},
    {"ffn_act", "{} (apply_ffn_activation)", {S::kFfnActScope}},
    {"permute", "{}", {S::kPermute}},
    {"unpermute", "{}", {S::kUnpermute}},
    {"local_permute", "{}", {S::kLocalPermute}},
    {"get_all_to_all_params", "{}", {S::kGetAllToAllParams}},
    {"sparse_matmul", "{}", {S::kSparseMatmul}},
    {"wrapper", "{} (shard_map body)", {S::kShardMapBody}},
    {"gmm_wi_0", "{} (gmm of wi_0)", {S::kGmmWi0}},
    {"gmm_wi_1", "{} (gmm of wi_1)", {S::kGmmWi1}},
    {"gmm_wo", "{} (gmm of wo)", {S::kGmmWo}},
    {"reshape_and_update_weights", "{}", {S::kReshapeAndUpdateWeights}},
    {"generate_masks_subgroup", "{}", {S::kGenerateMasksSubgroup}},
    {"generate_masks", "{}", {S::kGenerateMasks}},
    {"dense_matmul", "{}", {S::kDenseMatmul}},
    {"dispatch", "{}", {S::kDispatchScope}},
    {"wi_0", "{} (dropping) / {} (dropless)", {S::kWi0ScopeDropping, S::kWi0ScopeDropless}, 2},
    {"wi_1", "{} (dropping) / {} (dropless)", {S::kWi1ScopeDropping, S::kWi1ScopeDropless}, 2},
    {"wo", "{} (dropping) / {} (dropless)", {S::kWoScopeDropping, S::kWoScopeDropless}, 2},
    {"combine", "{}", {S::kCombineScope}},
}};

// "moe.py:<format with each statement's first line>"; a statement the revision lacks reads
// "none", and when it lacks them all the reference says so.
std::string FormatLines(RevisionId revision, std::string_view format,
                        const std::array<MoeStatement, 2>& statements, int count) {
  std::array<std::string, 2> lines;
  bool any = false;
  for (int i = 0; i < count; ++i) {
    lines.at(i) = MoeLines(revision, statements.at(i), /*first_only=*/true);
    any = any || !lines.at(i).empty();
    if (lines.at(i).empty()) lines.at(i) = "none";
  }
  if (!any) return fmt::format("moe.py {}", NoSuchStatement(revision));
  return "moe.py:" + fmt::format(fmt::runtime(format), lines[0], lines[1]);
}

}  // namespace

std::string_view TensorMeaning(std::string_view name) {
  for (const auto& [n, meaning] : kMeanings)
    if (n == name) return meaning;
  for (const auto& [n, meaning] : kMoreMeanings)
    if (n == name) return meaning;
  return "";
}

std::string TensorMeaning(const TensorRecord& t, RevisionId revision) {
  const bool experts = t.dims.find('E') != std::string::npos;
  const bool rows = !t.dims.empty() && (t.dims[0] == 'R' || t.dims[0] == 'U');
  if (t.name == "x") {
    if (t.dims.find('F') != std::string::npos)
      return "the MLP's hidden state, activation(inputs · wi_0) * (inputs · wi_1): wo's input";
    if (rows) return "the routed rows this device holds, grouped by expert";
    if (t.in_shard_map) return "the tokens this device holds inside shard_map";
  }
  if (!experts && t.dims.size() == 2) {  // MlpBlock's 2-D kernels (linears.py), no expert dim
    if (t.name == "wi_0") return "MLP gated up-projection: embed -> hidden";
    if (t.name == "wi_1") return "MLP linear up-projection: embed -> hidden";
    if (t.name == "wo") return "MLP down-projection: hidden -> embed";
  }
  if (t.name == "output" && t.scope.ends_with("/gate"))
    return "the gate's logits per token and expert";
  if (t.name == "intermediate_layer" && t.dims.find('M') != std::string::npos)
    return "each expert's output (wo), before the weighted sum";
  if (t.name == "softmax_probs" && t.scope.ends_with("/generate_masks"))
    return "the masks' weight of each (token, expert)";
  if (t.name == "within_capacity")  // its statement's line, in the trace's revision
    return fmt::format(fmt::runtime(TensorMeaning(t.name)),
                       MoeLines(revision, MoeStatement::kMasksTrunc));
  return std::string(TensorMeaning(t.name));
}

std::string ScopeText(std::string_view scope) {
  static constexpr std::array<std::string_view, 3> kSynthetic = {"gmm_wi_0", "gmm_wi_1", "gmm_wo"};
  std::string out;
  for (size_t start = 0; start <= scope.size();) {
    const size_t end = std::min(scope.find('/', start), scope.size());
    const std::string_view segment = scope.substr(start, end - start);
    const bool synthetic =
        std::find(kSynthetic.begin(), kSynthetic.end(), segment) != kSynthetic.end();
    out += fmt::format("{}{}{}{}", start == 0 ? "" : "/", synthetic ? "[" : "", segment,
                       synthetic ? "]" : "");
    start = end + 1;
  }
  return out;
}

std::string MoeLineRef(RevisionId revision, std::string_view scope) {
  const size_t slash = scope.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? scope : scope.substr(slash + 1);
  const auto has_segment = [&](std::string_view segment) {
    for (size_t from = 0; from <= scope.size();) {
      const size_t end = std::min(scope.find('/', from), scope.size());
      if (scope.substr(from, end - from) == segment) return true;
      from = end + 1;
    }
    return false;
  };
  // The shared experts are linears.MlpBlock: moe.py only builds and calls it,
  // and its wi_0/wi_1/wo are linears.py's, not dense_matmul's scopes of the same names.
  if (last == "shared_experts")
    return FormatLines(revision, "{} (calls linears.MlpBlock)", {S::kSharedExpertsCall}, 1);
  if (has_segment("shared_experts") || has_segment("MlpBlock")) return "";
  if ((last == "wi_0" || last == "wi_1" || last == "wo") && !has_segment("dense_matmul")) return "";
  if (last == "weight_sum")
    return FormatLines(revision, "{}",
                       {scope.find("unpermute") != std::string_view::npos ? S::kWeightSumUnpermute
                                                                          : S::kWeightSumDense},
                       1);
  for (const ScopeLine& e : kLines)
    if (e.scope == last) return FormatLines(revision, e.format, e.statements, e.count);
  return "";
}

namespace {

// moe.py's constraint statements: (scope's last segment, tensor, statement kind or "" for
// any) -> the statements and how their lines are written. sparse_matmul's kernels are
// constrained by logical names only under moe_fsdp_use_two_stage_all_gather, by PartitionSpec
// otherwise.
struct StatementLine {
  std::string_view scope, tensor, constraint, format;
  std::array<MoeStatement, 2> statements;
  int count = 1;
};
constexpr std::string_view kGathered =
    "{} (maybe_all_gather_kernel_weight_in_expert_parallelism, {})";
constexpr std::array<StatementLine, 30> kStatementLines = {{
    {"dense_matmul", "gate_logits", "", "{}", {S::kDenseGateLogitsShard}},
    {"dense_matmul", "pre_bias_logits", "", "{}", {S::kDensePreBiasLogitsShard}},
    {"dense_matmul",
     "inputs",
     "",
     "{} (dropping, inference only) / {} (dropless)",
     {S::kDenseInputsShardDropping, S::kDenseInputsShardDropless},
     2},
    {"dense_matmul", "dispatch_mask", "", "{}", {S::kDispatchMaskShard}},
    {"dense_matmul", "combine_mask", "", "{}", {S::kCombineMaskShard}},
    {"dispatch", "dispatch", "", "{} (cp > 1) / {}", {S::kDispatchShardCp, S::kDispatchShard}, 2},
    {"wi_0", "w0_kernel", "", kGathered, {S::kW0KernelDense, S::kAllGatherKernelShard}, 2},
    {"wi_0", "layer_w0", "", "{}", {S::kLayerW0Shard}},
    {"wi_1", "w1_kernel", "", kGathered, {S::kW1KernelDense, S::kAllGatherKernelShard}, 2},
    {"wi_1", "layer_w1", "", "{}", {S::kLayerW1Shard}},
    {"wo", "wo_kernel", "", kGathered, {S::kWoKernelDense, S::kAllGatherKernelShard}, 2},
    {"wo", "intermediate_layer", "", "{}", {S::kIntermediateLayerShard}},
    {"generate_masks", "expert_mask_fused", "", "{}", {S::kMasksExpertMaskFusedShard}},
    {"generate_masks", "expert_token_count", "", "{}", {S::kMasksExpertTokenCountShard}},
    {"generate_masks_subgroup", "expert_mask_fused", "", "{}", {S::kSubgroupExpertMaskFusedShard}},
    {"generate_masks_subgroup",
     "expert_token_count",
     "",
     "{}",
     {S::kSubgroupExpertTokenCountShard}},
    {"reshape_and_update_weights", "index_batch", "", "{}", {S::kIndexBatchShard}},
    {"reshape_and_update_weights", "index_length", "", "{}", {S::kIndexLengthShard}},
    {"sparse_matmul", "inputs", "", "{}", {S::kSparseInputsShard}},
    {"sparse_matmul", "gate_logits", "", "{}", {S::kSparseGateLogitsShard}},
    {"sparse_matmul", "pre_bias_logits", "", "{}", {S::kSparsePreBiasLogitsShard}},
    {"sparse_matmul", "w0_kernel", "maybe_shard_with_pspec", "{}", {S::kSparseW0Pspec}},
    {"sparse_matmul", "w1_kernel", "maybe_shard_with_pspec", "{}", {S::kSparseW1Pspec}},
    {"sparse_matmul", "wo_kernel", "maybe_shard_with_pspec", "{}", {S::kSparseWoPspec}},
    {"sparse_matmul",
     "w0_kernel",
     "maybe_shard_with_logical",
     "{} / {}",
     {S::kSparseW0Logical, S::kSparseW0LogicalNoFsdp},
     2},
    {"sparse_matmul",
     "w1_kernel",
     "maybe_shard_with_logical",
     "{} / {}",
     {S::kSparseW1Logical, S::kSparseW1LogicalNoFsdp},
     2},
    {"sparse_matmul",
     "wo_kernel",
     "maybe_shard_with_logical",
     "{} / {}",
     {S::kSparseWoLogical, S::kSparseWoLogicalNoFsdp},
     2},
    {"sparse_matmul", "w0_bias", "", "{}", {S::kSparseW0BiasPspec}},
    {"sparse_matmul", "w1_bias", "", "{}", {S::kSparseW1BiasPspec}},
    {"sparse_matmul", "wo_bias", "", "{}", {S::kSparseWoBiasPspec}},
}};

}  // namespace

std::string MoeStatementLine(RevisionId revision, std::string_view scope, std::string_view tensor,
                             std::string_view constraint) {
  const size_t slash = scope.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? scope : scope.substr(slash + 1);
  for (const StatementLine& e : kStatementLines)
    if (e.scope == last && e.tensor == tensor &&
        (e.constraint.empty() || e.constraint == constraint))
      return FormatLines(revision, e.format, e.statements, e.count);
  return "";
}

}  // namespace shardtrace
