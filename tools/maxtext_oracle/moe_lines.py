#!/usr/bin/env python3
"""Finds the statements shardtrace cites in each MaxText revision's moe.py and writes the
line table src/config/moe_statements.inc (docs/revisions.md, "Line references").

Line numbers are facts about three files, so they are looked up, not typed: every statement
shardtrace cites has an id (the C++ enum MoeStatement::k<Id>) and a pattern per revision, a
list of regular expressions matched one after the other against the file's lines (leading
whitespace stripped; each step searches from the line after the previous step's match, so
`[r"def dense_matmul\\(", r"named_scope\\(\\"wi_0\\"\\)"]` is dense_matmul's first wi_0 scope),
and optionally an `end` list that is searched the same way from the statement's first line
and gives its last. A revision's pattern of None says the revision has no such statement;
the table then holds 0, 0 and shardtrace prints "(no such statement in MaxText <rev>)".
Only the patterns and the resulting numbers are in the project, no MaxText code.

The seed's lines are also written here (`cites`): they are the numbers shardtrace printed
before the table existed, and the seed's pages must stay byte-identical, so the tool refuses
to write a table whose seed lines differ.

The files (read by hand, never by a test):
  313890777 (the seed): src/MaxText/layers/moe.py at 313890777fc3fd208a1fee7ab15d81c737ee8b23,
    as the project's reference text /work/shared/seeds/maxtext-moe.py.txt (2,276 lines).
  e591f30 (main of 2026-08-22): `git show e591f30:src/maxtext/layers/moe.py` of
    AI-Hypercomputer/maxtext (3,476 lines).
  0.2.5 (the PyPI release): maxtext/layers/moe.py of the installed wheel maxtext==0.2.5
    (4,955 lines), e.g. /work/wt/oracle-venv/lib/python3.12/site-packages/maxtext/layers/moe.py.

Usage:
  python3 tools/maxtext_oracle/moe_lines.py --seed SEED.py --main MAIN.py --release REL.py \\
      [--show] [-o src/config/moe_statements.inc]
--show prints each statement's first line in every revision, to review a changed pattern.
"""

import argparse
import re
import sys

REVISIONS = ("seed", "main", "release")
LENGTHS = {"seed": 2276, "main": 3476, "release": 4955}

# Patterns shared by several statements.
DENSE = r"def dense_matmul\("
SPARSE = r"def sparse_matmul\("
# The shard_map body: the seed's `wrapper`; main and the release split it and name the body
# sparse_matmul_route_and_compute.
RING_GATHER = [r"def roe_ag_and_route\(", r"if self\.config\.moe_quantize_token_all_gather"]
BODY = {"seed": [r"def wrapper\("], "main": [r"def sparse_matmul_route_and_compute\("],
        "release": [r"def sparse_matmul_route_and_compute\("]}


class St:
  """One statement: `find` steps (all revisions, or a dict per revision), `end` steps."""

  def __init__(self, ident, what, cites, find, end=None, **rev):
    self.ident, self.what, self.cites = ident, what, cites
    self.pattern = {}
    for r in REVISIONS:
      f = rev.get(r, find)
      e = rev.get(r + "_end", end)
      self.pattern[r] = None if f is None else (list(f), list(e) if e else None)


def fn(name):
  return r"def " + name + r"\("


def scope(name):
  return r"named_scope\(\"" + name + r"\"\)"


STATEMENTS = [
    # --- Where each traced function or named scope starts (the pages' algorithm headers).
    St("SortActivationsScope", "named scope sort_activations", "65", [scope("sort_activations")]),
    St("CalculateLoadBalanceUpdates", "calculate_load_balance_updates", "119",
       [fn("calculate_load_balance_updates")]),
    St("GateLogitCall", "GateLogit.__call__", "230", [r"class GateLogit\(", fn("__call__")]),
    St("RoutedMoeCall", "RoutedMoE.__call__", "2044",
       [r"class RoutedMoE\(", r"def retrieve_quantized_weight\(", fn("__call__")]),
    St("RoutedAndSharedMoeCall", "RoutedAndSharedMoE.__call__", "2169",
       [r"class RoutedAndSharedMoE\(", fn("__call__")]),
    St("GetTopk", "get_topk", "530", [fn("get_topk")]),
    St("GetTopkBody", "get_topk whole", "530-556", [fn("get_topk")],
       [r"if self\.config\.norm_topk_prob", r"^return top_k_weights, top_k_indices"]),
    St("DeepseekScaleWeights", "deepseek_scale_weights", "558-564", [fn("deepseek_scale_weights")],
       [r"^return weights$"]),
    St("ExpertGroupMask", "expert_group_mask", "566", [fn("expert_group_mask")]),
    St("DeepseekRouting", "deepseek_routing", "599", [fn("deepseek_routing")]),
    St("FfnActScope", "named scope ffn_act (apply_ffn_activation)", "625", [scope("ffn_act")]),
    St("Permute", "permute", "637", [fn("permute")]),
    St("Unpermute", "unpermute", "686", [fn("unpermute")]),
    St("LocalPermute", "local_permute", "723", [fn("local_permute")]),
    St("GetAllToAllParams", "get_all_to_all_params", "802-885", [fn("get_all_to_all_params")],
       [r"^return input_offsets, send_sizes, output_offsets, recv_sizes"]),
    St("SparseMatmul", "sparse_matmul", "922", [SPARSE]),
    St("ShardMapBody", "the shard_map body", "1161", None, seed=BODY["seed"], main=BODY["main"],
       release=BODY["release"]),
    St("GmmWi0", "gmm of wi_0", "1291", None, seed=BODY["seed"] + [r"^layer_w0 = gmm_fn\("],
       main=[r"def gmm_up\(", r"^layer_w0 = gmm_fn\("], release=[r"def gmm_up\(", r"^layer_w0 = gmm_fn\("]),
    St("GmmWi1", "gmm of wi_1", "1302", None, seed=BODY["seed"] + [r"^layer_w1 = gmm_fn\("],
       main=[r"def gmm_up\(", r"^layer_w1 = gmm_fn\("], release=[r"def gmm_up\(", r"^layer_w1 = gmm_fn\("]),
    St("GmmWo", "gmm of wo", "1314", None, seed=BODY["seed"] + [r"^intermediate_output = gmm_fn\("],
       main=[r"def _moe_body\(", r"^intermediate_output = gmm_fn\("],
       release=[r"def _moe_body\(", r"^intermediate_output = gmm_fn\("]),
    St("ReshapeAndUpdateWeights", "reshape_and_update_weights", "1447-1463",
       [fn("reshape_and_update_weights")], [r"^return update_weights"]),
    St("GenerateMasksSubgroup", "generate_masks_subgroup", "1472-1555", [fn("generate_masks_subgroup")],
       [r"^return dispatch_mask, combine_mask"]),
    St("GenerateMasks", "generate_masks", "1557", [fn("generate_masks")]),
    St("DenseMatmul", "dense_matmul", "1675", [DENSE]),
    St("DispatchScope", "named scope dispatch", "1814", [DENSE, scope("dispatch")]),
    St("Wi0ScopeDropping", "dense_matmul's wi_0 scope with capacity", "1834", [DENSE, scope("wi_0")]),
    St("Wi1ScopeDropping", "dense_matmul's wi_1 scope with capacity", "1850", [DENSE, scope("wi_1")]),
    St("WoScopeDropping", "dense_matmul's wo scope with capacity", "1867", [DENSE, scope("wo")]),
    St("CombineScope", "named scope combine", "1892", [DENSE, scope("combine")]),
    St("Wi0ScopeDropless", "dense_matmul's dropless wi_0 scope", "1914",
       [DENSE, scope("combine"), scope("wi_0")]),
    St("Wi1ScopeDropless", "dense_matmul's dropless wi_1 scope", "1923",
       [DENSE, scope("combine"), scope("wi_1")]),
    St("WoScopeDropless", "dense_matmul's dropless wo scope", "1933",
       [DENSE, scope("combine"), scope("wo")]),
    St("WeightSumUnpermute", "unpermute's weight_sum scope", "706", [fn("unpermute"), scope("weight_sum")]),
    St("WeightSumDense", "dense_matmul's weight_sum scope", "1945", [DENSE, scope("weight_sum")]),
    St("SharedExpertsCall", "RoutedAndSharedMoE calls its shared MlpBlock", "2180",
       [r"class RoutedAndSharedMoE\(", fn("__call__"), r"^shared_experts = self\.shared_experts\("]),
    # --- The constraint statements (the algorithm's steps).
    St("DenseGateLogitsShard", "dense_matmul constrains gate_logits", "1689",
       [DENSE, r"^gate_logits = self\._maybe_shard_with_logical\("]),
    St("DensePreBiasLogitsShard", "dense_matmul constrains pre_bias_logits", "1692",
       [DENSE, r"^pre_bias_logits = self\._maybe_shard_with_logical\("]),
    St("DenseInputsShardDropping", "dense_matmul constrains inputs (capacity)", "1811",
       [DENSE, r"^inputs = self\._maybe_shard_with_logical\(inputs, input_axis\)"]),
    St("DenseInputsShardDropless", "dense_matmul constrains inputs (dropless)", "1911",
       [DENSE, scope("combine"), r"^inputs = self\._maybe_shard_with_logical\("]),
    St("DispatchMaskShard", "dense_matmul constrains dispatch_mask", "1812",
       [DENSE, r"^dispatch_mask = self\._maybe_shard_with_logical\("]),
    St("CombineMaskShard", "dense_matmul constrains combine_mask", "1813",
       [DENSE, r"^combine_mask = self\._maybe_shard_with_logical\("]),
    St("DispatchShardCp", "dispatch constrained with context parallelism", "1820",
       [DENSE, scope("dispatch"), r"^dispatch = self\._maybe_shard_with_logical\("]),
    St("DispatchShard", "dispatch constrained", "1830",
       [DENSE, scope("dispatch"), r"^dispatch = self\._maybe_shard_with_logical\(",
        r"^dispatch = self\._maybe_shard_(with_logical|moe_dispatch)\("]),
    St("AllGatherKernelShard", "maybe_all_gather_kernel_weight_in_expert_parallelism constrains the kernel",
       "1672", [fn("maybe_all_gather_kernel_weight_in_expert_parallelism"),
                r"^kernel = self\._maybe_shard_with_logical\("]),
    St("W0KernelDense", "dense_matmul gathers w0_kernel", "1836",
       [DENSE, r"^w0_kernel = self\.maybe_all_gather_kernel_weight_in_expert_parallelism\("]),
    St("W1KernelDense", "dense_matmul gathers w1_kernel", "1852",
       [DENSE, r"^w1_kernel = self\.maybe_all_gather_kernel_weight_in_expert_parallelism\("]),
    St("WoKernelDense", "dense_matmul gathers wo_kernel", "1869",
       [DENSE, r"^wo_kernel = self\.maybe_all_gather_kernel_weight_in_expert_parallelism\("]),
    St("LayerW0Shard", "dense_matmul constrains layer_w0", "1845",
       [DENSE, scope("wi_0"), r"^layer_w0 = self\._maybe_shard_(with_logical|moe_dispatch)\("]),
    St("LayerW1Shard", "dense_matmul constrains layer_w1", "1861",
       [DENSE, scope("wi_1"), r"^layer_w1 = self\._maybe_shard_(with_logical|moe_dispatch)\("]),
    St("IntermediateLayerShard", "dense_matmul constrains intermediate_layer", "1882",
       [DENSE, scope("wo"), r"^intermediate_layer = self\._maybe_shard_with_logical\("]),
    St("MasksExpertMaskFusedShard", "generate_masks constrains expert_mask_fused", "1591",
       [fn("generate_masks"), r"^expert_mask_fused = self\._maybe_shard_with_logical\("]),
    St("MasksExpertTokenCountShard", "generate_masks constrains expert_token_count", "1597",
       [fn("generate_masks"), r"^expert_token_count = self\._maybe_shard_with_logical\("]),
    St("SubgroupExpertMaskFusedShard", "generate_masks_subgroup constrains expert_mask_fused", "1510",
       [fn("generate_masks_subgroup"), r"^expert_mask_fused = self\._maybe_shard_with_logical\("]),
    St("SubgroupExpertTokenCountShard", "generate_masks_subgroup constrains expert_token_count", "1516",
       [fn("generate_masks_subgroup"), r"^expert_token_count = self\._maybe_shard_with_logical\("]),
    St("IndexBatchShard", "reshape_and_update_weights constrains the batch index", "1453",
       [fn("reshape_and_update_weights"), r"_maybe_shard_with_logical\("]),
    St("IndexLengthShard", "reshape_and_update_weights constrains the length index", "1454",
       [fn("reshape_and_update_weights"), r"_maybe_shard_with_logical\(", r"_maybe_shard_with_logical\("]),
    St("SparseInputsShard", "sparse_matmul constrains inputs", "1431",
       [SPARSE, r"^inputs = self\._maybe_shard_with_(logical|pspec)\(inputs, input_"]),
    St("SparseGateLogitsShard", "sparse_matmul constrains gate_logits", "1432",
       [SPARSE, r"^gate_logits = self\._maybe_shard_with_(logical|pspec)\("]),
    St("SparsePreBiasLogitsShard", "sparse_matmul constrains pre_bias_logits", "1433",
       [SPARSE, r"^pre_bias_logits = self\._maybe_shard_with_(logical|pspec)\("]),
    # The release constrains kernels and biases in a local _fsdp_all_gather(w, pspec).
    St("SparseW0Pspec", "sparse_matmul constrains w0_kernel by its pspec", "1434",
       [SPARSE, r"^w0_kernel = (self\._maybe_shard_with_pspec|_fsdp_all_gather)\(w0_kernel, w0_pspec\)"]),
    St("SparseW1Pspec", "sparse_matmul constrains w1_kernel by its pspec", "1435",
       [SPARSE, r"^w1_kernel = (self\._maybe_shard_with_pspec|_fsdp_all_gather)\(w1_kernel, w1_pspec\)"]),
    St("SparseWoPspec", "sparse_matmul constrains wo_kernel by its pspec", "1436",
       [SPARSE, r"^wo_kernel = (self\._maybe_shard_with_pspec|_fsdp_all_gather)\(wo_kernel, wo_pspec\)"]),
    St("SparseW0Logical", "w0_kernel by logical names (two-stage all-gather)", "1409",
       [SPARSE, r"^w0_kernel = self\._maybe_shard_with_logical\("]),
    St("SparseW1Logical", "w1_kernel by logical names (two-stage all-gather)", "1410",
       [SPARSE, r"^w1_kernel = self\._maybe_shard_with_logical\("]),
    St("SparseWoLogical", "wo_kernel by logical names (two-stage all-gather)", "1412",
       [SPARSE, r"^wo_kernel = self\._maybe_shard_with_logical\("]),
    St("SparseW0LogicalNoFsdp", "w0_kernel by logical names, mlp_no_fsdp", "1419",
       [SPARSE, r"^w0_kernel = self\._maybe_shard_with_logical\(", r"^w0_kernel = self\._maybe_shard_with_logical\("]),
    St("SparseW1LogicalNoFsdp", "w1_kernel by logical names, mlp_no_fsdp", "1420",
       [SPARSE, r"^w1_kernel = self\._maybe_shard_with_logical\(", r"^w1_kernel = self\._maybe_shard_with_logical\("]),
    St("SparseWoLogicalNoFsdp", "wo_kernel by logical names, mlp_no_fsdp", "1421",
       [SPARSE, r"^wo_kernel = self\._maybe_shard_with_logical\(", r"^wo_kernel = self\._maybe_shard_with_logical\("]),
    St("SparseW0BiasPspec", "sparse_matmul constrains w0_bias", "1438",
       [SPARSE, r"^w0_bias = (self\._maybe_shard_with_pspec|_fsdp_all_gather)\(w0_bias, w0_bias_pspec\)"]),
    St("SparseW1BiasPspec", "sparse_matmul constrains w1_bias", "1440",
       [SPARSE, r"^w1_bias = (self\._maybe_shard_with_pspec|_fsdp_all_gather)\(w1_bias, w1_bias_pspec\)"]),
    St("SparseWoBiasPspec", "sparse_matmul constrains wo_bias", "1442",
       [SPARSE, r"^wo_bias = (self\._maybe_shard_with_pspec|_fsdp_all_gather)\(wo_bias, wo_bias_pspec\)"]),
    # --- Routing (get_topk, deepseek_routing, expert_group_mask).
    St("GateScoreFunc", "GateLogit applies routed_score_func", "256-257",
       [r"class GateLogit\(", fn("__call__"), r"if self\.score_func"],
       [r"_convert_to_activation_function\(self\.score_func\)"]),
    St("GateBias", "GateLogit adds the routing bias", "260-262",
       [r"class GateLogit\(", fn("__call__"), r"if self\.use_bias"], [r"output \+= bias"]),
    St("RandomRouting", "get_topk's random routing", "534-540",
       [fn("get_topk"), r"if self\.config\.use_random_routing"], [r"^return top_k_weights, top_k_indices"]),
    St("DeepseekRoutingCall", "get_topk calls deepseek_routing", "541-542",
       [fn("get_topk"), r"model_name\.startswith\("], [r"self\.deepseek_routing\("]),
    St("DeepseekRoutingBody", "deepseek_routing whole", "599-621",
       [fn("deepseek_routing")], [r"^return top_k_weights, top_k_indices"]),
    St("ExpertMaskCall", "deepseek_routing calls expert_group_mask", "615",
       [fn("deepseek_routing"), r"expert_mask = 1 if self\.config\.n_routing_groups == -1"]),
    St("ExpertGroupMaskBody", "expert_group_mask whole", "566-597",
       [fn("expert_group_mask")], [r"^return jnp\.reshape\(", r"^\)$"]),
    St("TopkPlain", "get_topk's top_k over the gate logits", "548",
       [fn("get_topk"), r"^top_k_weights, top_k_indices = jax\.lax\.top_k\(gate_logits, self\.num_experts_per_tok\)"]),
    St("DeepseekScaleCall", "get_topk calls deepseek_scale_weights", "549-550",
       [fn("get_topk"), r"DecoderBlockType\.DEEPSEEK\b"], [r"self\.deepseek_scale_weights\("]),
    St("TopkSoftmaxBranch", "get_topk's softmax over the K chosen logits", "551-552",
       [fn("get_topk"), r"not in \(ctypes\.DecoderBlockType\.LLAMA4, ctypes\.DecoderBlockType\.GEMMA4\)"],
       [r"top_k_weights = jax\.nn\.softmax\(top_k_weights"]),
    St("TopkSoftmaxCall", "get_topk's softmax call over the K chosen logits", "552",
       [fn("get_topk"), r"top_k_weights = jax\.nn\.softmax\(top_k_weights"]),
    St("Gemma4Routing", "get_topk's Gemma 4 branch (softmax, then top-k)", "543-546",
       [fn("get_topk"), r"DecoderBlockType\.GEMMA4:$"], [r"take_along_axis\(router_probs"]),
    St("TopkSoftmax", "get_topk's softmax over the top-k (not Llama 4, Gemma 4)", "551",
       [fn("get_topk"), r"not in \(ctypes\.DecoderBlockType\.LLAMA4, ctypes\.DecoderBlockType\.GEMMA4\)"]),
    St("NormTopkProb", "get_topk normalizes the weights (norm_topk_prob)", "554-555",
       [fn("get_topk"), r"if self\.config\.norm_topk_prob"], [r"top_k_weights /= (top_k_weights\.sum|weight_sum)"]),
    St("GroupScores", "expert_group_mask: group scores to the experts' mask", "579-597",
       [fn("expert_group_mask"), r"^scores_grouped = jnp\.reshape\("], [r"^return jnp\.reshape\(", r"^\)$"]),
    St("Top2InGroup", "expert_group_mask: the 2 best experts of each group", "583",
       [fn("expert_group_mask"), r"top_?2_in_group"]),
    St("GroupTopk", "expert_group_mask: the topk_routing_group best groups", "585",
       [fn("expert_group_mask"), r"group_idx = jax\.lax\.top_k\(group_scores"]),
    St("BiasedTopk", "deepseek_routing: top-k over the biased, masked scores", "616-618",
       [fn("deepseek_routing"), r"top_k_indices = jax\.lax\.top_k\("], [r"k=self\.num_experts_per_tok"]),
    St("BiasedTopkWeights", "deepseek_routing: top-k by biased scores, weights unbiased", "616-620",
       [fn("deepseek_routing"), r"top_k_indices = jax\.lax\.top_k\("],
       [r"top_k_weights = jnp\.take_along_axis\(pre_bias_logits"]),
    St("UnbiasedWeights", "deepseek_routing: the weights from the unbiased scores", "620",
       [fn("deepseek_routing"), r"top_k_weights = jnp\.take_along_axis\(pre_bias_logits"]),
    # --- permute / unpermute / local_permute / get_all_to_all_params.
    St("Llama4InputScaleSparse", "permute scales the inputs by the router scores (Llama 4)", "654-658",
       [fn("permute"), r"DecoderBlockType\.LLAMA4"], [r"inputs_2d = inputs_2d \* router_scores"]),
    St("PermuteSort", "permute sorts the rows by expert and counts them", "659-675",
       [fn("permute"), r"^flatten_selected_experts = jnp\.ravel\("],
       [r"^sorted_experts = jnp\.repeat\(", r"^\)$"]),
    St("ArgsortExperts", "permute's argsort of the experts", "662",
       [fn("permute"), r"sorted_selected_experts = jnp\.argsort\(flatten_selected_experts"]),
    St("GroupSizeBincount", "permute's group sizes (bincount)", "668",
       [fn("permute"), r"group_size = jnp\.bincount\(flatten_selected_experts"]),
    St("UnsortArgsort", "unpermute's inverse sort", "698", [fn("unpermute"), r"jnp\.argsort\(sorted_selected_experts\)"]),
    St("Llama4UnitWeightsSparse", "unpermute's unit weights (Llama 4)", "708-710",
       [fn("unpermute"), r"DecoderBlockType\.LLAMA4"], [r"reshaped_weights = jnp\.ones_like\(reshaped_weights\)"]),
    St("LocalSizesReshape", "local_permute's (peer, local expert) slots", "768",
       [fn("local_permute"), r"local_sizes = all_shard_local_sizes\.reshape\(-1\)"]),
    St("SendSizeStrategy", "get_all_to_all_params: SEND_SIZE repeats a device's own count", "845-848",
       [fn("get_all_to_all_params"), r"strategy == TransformStrategy\.SEND_SIZE", r"strategy == TransformStrategy\.SEND_SIZE"],
       [r"jnp\.repeat\(input_array\[shard_id\], num_expert_parallelism\)"]),
    St("RecvSizeStrategy", "get_all_to_all_params: RECV_SIZE returns the whole array", "856-858",
       [fn("get_all_to_all_params"), r"strategy == TransformStrategy\.RECV_SIZE", r"strategy == TransformStrategy\.RECV_SIZE"], [r"^return input_array$"]),
    St("GetRaggedBufferSize", "get_ragged_buffer_size", "888", [fn("get_ragged_buffer_size")]),
    # --- sparse_matmul and its shard_map body.
    St("DecodeBatchAxis", "get_routed_moe_shardings: the decode batch axis", "1070",
       [fn("get_routed_moe_shardings"), r"batch_logical_axis = \"decode_batch_moe\""]),
    St("ShardMapOutSpecs", "the shard_map's out_specs (the output's)", "1154-1155",
       [SPARSE, r"jax\.shard_map,", r"out_specs=\("], [r"out_specs=\(", r"\S"]),
    St("WrapperBatchShape", "the shard_map body reads its batch and sequence", "1162",
       None, seed=BODY["seed"] + [r"batch_size, sequence_length, _ = x\.shape"],
       main=[fn("_moe_body"), r"batch_size, sequence_length, embed_dim = x\.shape"],
       release=[fn("_moe_body"), r"batch_size, sequence_length, embed_dim = x\.shape"]),
    # Main and the release moved the ring into roe_ag_and_route, and the row masks into
    # _moe_body (valid_token_count); the release gathers x and the logits in separate statements.
    St("RingGather", "ring of experts: all-gather of x and the logits", "1173-1176",
       None, [r"^\)$"], seed=BODY["seed"] + [r"x, logits, pre_bias_logits = tuple\("],
       main=[fn("roe_ag_and_route"), r"x, logits, pre_bias_logits = tuple\("],
       release=RING_GATHER, release_end=[r"_ep_all_gather\(z\) if z is not None else None for z in \(logits"]),
    St("RingRoute", "ring of experts: gather, route, keep the local experts' group sizes", "1173-1189",
       None, [r"^group_sizes = group_sizes\[:num_experts_per_shard\]"],
       seed=BODY["seed"] + [r"x, logits, pre_bias_logits = tuple\("],
       main=[fn("roe_ag_and_route"), r"x, logits, pre_bias_logits = tuple\("],
       main_end=[r"roll_to_expert_id=", r"^\)$"], release=RING_GATHER,
       release_end=[r"roll_to_expert_id=", r"^\)$"]),
    St("RingRouteMasked", "ring of experts: gather, route, mask the other experts' rows", "1173-1191",
       None, [r"^x = jnp\.where\(mask\[:, None\], x, 0\)"],
       seed=BODY["seed"] + [r"x, logits, pre_bias_logits = tuple\("],
       main=[fn("roe_ag_and_route"), r"x, logits, pre_bias_logits = tuple\("],
       main_end=[r"roll_to_expert_id=", r"^\)$"], release=RING_GATHER,
       release_end=[r"roll_to_expert_id=", r"^\)$"]),
    St("RingLocalMask", "ring of experts: the local experts' group sizes and row mask", "1189-1191",
       None, [r"^x = jnp\.where\(mask\[:, None\], x, 0\)"],
       seed=BODY["seed"] + [r"^group_sizes = group_sizes\[:num_experts_per_shard\]"],
       main=[fn("_moe_body"), r"^mask = jnp\.arange\(x\.shape\[0\]\) < valid_token_count\("], main_end=[],
       release=[fn("_moe_body"), r"^mask = jnp\.arange\(x\.shape\[0\]\) < valid_token_count\("],
       release_end=[]),
    St("PermuteNoEp", "permute on the device's own tokens, then the EP test", "1193-1196",
       None, [r"if num_expert_parallelism > 1"],
       seed=BODY["seed"] + [r"= self\.permute\(", r"= self\.permute\("],
       main=[fn("ra2a_and_route"), r"= self\.permute\("], main_end=[r"^\)$"],
       release=[fn("ra2a_and_route"), r"= self\.permute\("], release_end=[r"^\)$"]),
    St("BufferSizeCall", "the ragged buffer's size", "1209",
       None, seed=BODY["seed"] + [r"buffer_size = self\.get_ragged_buffer_size\("],
       main=[fn("ra2a_and_route"), r"buffer_size = self\.get_ragged_buffer_size\("],
       release=[fn("ra2a_and_route"), r"buffer_size = self\.get_ragged_buffer_size\("]),
    St("RaggedAllToAll", "the dispatch ragged_all_to_all", "1217",
       None, seed=BODY["seed"] + [r"x = jax\.lax\.ragged_all_to_all\("],
       main=[fn("ra2a_and_route"), r"x = jax\.lax\.ragged_all_to_all\("],
       release=[fn("ra2a_and_route"), r"x = jax\.lax\.ragged_all_to_all\("]),
    St("LocalPermuteCall", "local_permute after the all-to-all", "1227",
       None, seed=BODY["seed"] + [r"= RoutedMoE\.local_permute\("],
       main=[fn("ra2a_and_route"), r"= RoutedMoE\.local_permute\("],
       release=[fn("ra2a_and_route"), r"= RoutedMoE\.local_permute\("]),
    St("GlobalGroupSizesBatch", "local_permute's global_group_sizes[None, :] (one batch shard)", "1237",
       None, seed=BODY["seed"] + [r"global_group_sizes\[None, :\]"],
       main=[fn("ra2a_and_route"), r"global_group_sizes\[None, :\]"],
       release=[fn("ra2a_and_route"), r"global_group_sizes\[None, :\]"]),
    St("Wi0TensorTransposePsum", "layer_w0 psum over tensor_transpose", "1297-1298",
       None, [r"psum\(layer_w0, \"tensor_transpose\"\)"],
       seed=BODY["seed"] + [r"^layer_w0 = gmm_fn\(", r"get_tensor_transpose_parallelism_size\(\) > 1"],
       main=None, release=None),
    St("Wi1TensorTransposePsum", "layer_w1 psum over tensor_transpose", "1308-1309",
       None, [r"psum\(layer_w1, \"tensor_transpose\"\)"],
       seed=BODY["seed"] + [r"^layer_w1 = gmm_fn\(", r"get_tensor_transpose_parallelism_size\(\) > 1"],
       main=None, release=None),
    St("WoTensorPsumScatter", "wo's output psum_scatter over tensor", "1320-1323",
       None, [r"psum_scatter\(", r"^\)$"],
       seed=BODY["seed"] + [r"^intermediate_output = gmm_fn\(", r"if self\.get_tensor_parallelism_size\(\) > 1"],
       main=[fn("_moe_body"), r"^intermediate_output = gmm_fn\(", r"if self\.get_tensor_parallelism_size\(\) > 1"],
       release=[fn("_moe_body"), r"^intermediate_output = gmm_fn\(", r"if self\.get_tensor_parallelism_size\(\) > 1"]),
    St("RingOutputMask", "ring of experts: zero the rows of other experts after wo", "1329-1330",
       None, [r"intermediate_output = jnp\.where\(mask\[:, None\], intermediate_output, 0\)"],
       seed=BODY["seed"] + [r"mask = jnp\.arange\(intermediate_output\.shape\[0\]\) < jnp\.sum\(group_sizes\)"],
       main=[fn("_moe_body"), r"mask = jnp\.arange\(intermediate_output\.shape\[0\]\)"],
       release=[fn("_moe_body"), r"mask = jnp\.arange\(intermediate_output\.shape\[0\]\)"]),
    St("RingUnfold", "ring of experts: the output unfolded to the gathered batch", "1341-1343",
       None, [r"^\)$"], seed=BODY["seed"] + [r"^output = jnp\.reshape\("],
       main=[fn("_moe_body"), r"^output = jnp\.reshape\("], release=[fn("_moe_body"), r"^output = jnp\.reshape\("]),
    St("RingPsumScatter", "ring of experts: unfold, then psum_scatter over expert", "1341-1344",
       None, [r"psum_scatter\("], seed=BODY["seed"] + [r"^output = jnp\.reshape\("],
       main=[fn("_moe_body"), r"^output = jnp\.reshape\("], release=[fn("_moe_body"), r"^output = jnp\.reshape\("]),
    St("ReturnAllToAll", "the return trip: all-to-all parameters and ragged_all_to_all", "1364-1369",
       None, [r"ragged_all_to_all\("],
       seed=BODY["seed"] + [r"= RoutedMoE\.get_all_to_all_params\(", r"= RoutedMoE\.get_all_to_all_params\("],
       main=[fn("unsort_output_and_ra2a"), r"= RoutedMoE\.get_all_to_all_params\("],
       release=[fn("unsort_output_and_ra2a"), r"= RoutedMoE\.get_all_to_all_params\("]),
    St("ReturnRaggedAllToAll", "the return ragged_all_to_all", "1369",
       None, seed=BODY["seed"] + [r"= RoutedMoE\.get_all_to_all_params\(", r"= RoutedMoE\.get_all_to_all_params\(",
                                  r"ragged_all_to_all\("],
       main=[fn("unsort_output_and_ra2a"), r"ragged_all_to_all\("],
       release=[fn("unsort_output_and_ra2a"), r"ragged_all_to_all\("]),
    St("DecodeReturnRaggedAllToAll", "the decode return ragged_all_to_all", "1389",
       None, seed=BODY["seed"] + [r"= RoutedMoE\.get_all_to_all_params\("] * 3 + [r"ragged_all_to_all\("],
       main=[fn("unsort_output_and_ra2a"), r"ragged_all_to_all\(", r"ragged_all_to_all\("],
       release=[fn("unsort_output_and_ra2a"), r"ragged_all_to_all\(", r"ragged_all_to_all\("]),
    # --- dense_matmul and its masks.
    St("UpdateWeightsZeros", "reshape_and_update_weights allocates [B, S, E] zeros", "1451",
       [fn("reshape_and_update_weights"), r"update_weights = jnp\.zeros\("]),
    St("UpdateWeightsSet", "reshape_and_update_weights scatters the weights", "1462",
       [fn("reshape_and_update_weights"), r"update_weights = update_weights\.at\["]),
    St("SubgroupCapacity", "generate_masks_subgroup's capacity C", "1483",
       [fn("generate_masks_subgroup"), r"expert_capacity_per_batch = int\("]),
    St("SubgroupCumsum", "generate_masks_subgroup's arrival positions", "1511",
       [fn("generate_masks_subgroup"), r"expert_token_count_fused = jnp\.cumsum\("]),
    St("SubgroupTrunc", "generate_masks_subgroup drops what exceeds C", "1520",
       [fn("generate_masks_subgroup"), r"trunc_expert_mask = expert_mask \* jnp\.less_equal\("]),
    St("SubgroupSoftmaxMul", "generate_masks_subgroup zeroes dropped weights", "1527",
       [fn("generate_masks_subgroup"), r"softmax_probs \*= combined_expert_mask"]),
    St("MasksCapacity", "generate_masks's capacity C", "1564",
       [fn("generate_masks"), r"expert_capacity_per_batch = int\("]),
    St("MasksTrunc", "generate_masks drops what exceeds C", "1601",
       [fn("generate_masks"), r"trunc_expert_mask = expert_mask \* jnp\.less_equal\("]),
    St("MasksSoftmaxMul", "generate_masks zeroes dropped weights", "1603",
       [fn("generate_masks"), r"softmax_probs \*= combined_expert_mask"]),
    St("CombineMaskCut", "generate_masks cuts slot 0 off the combine mask", "1620",
       [fn("generate_masks"), r"combine_mask = combine_mask\[\.\.\., 1:\]"]),
    St("Llama4InputScaleDense", "dense_matmul scales the inputs by the router scores (Llama 4)", "1697-1699",
       [DENSE, r"if is_llama4_decoder_layer:"], [r"inputs = inputs \* router_scores"]),
    St("DenseReshapeWeights", "dense_matmul's weights [B, S, E]", "1701",
       [DENSE, r"weights = self\.reshape_and_update_weights\("]),
    St("TrainSoftmax", "dense_matmul's softmax over all experts outside inference", "1704-1705",
       [DENSE, r"model_call_mode != \"inference\""], [r"softmax_probs = jax\.nn\.softmax\("]),
    St("LbLoss", "dense_matmul's load_balance_loss", "1706-1707",
       [DENSE, r"^lb_loss = \($"], [r"self\.load_balance_loss\("]),
    St("LbLossCall", "dense_matmul calls load_balance_loss", "1707",
       [DENSE, r"^lb_loss = \($", r"self\.load_balance_loss\("]),
    St("GenerateMasksCall", "dense_matmul passes the weights to generate_masks", "1725-1726",
       [DENSE, r"= self\.generate_masks\($"], [r"top_k_indices, weights"]),
    St("InferenceSoftmax", "inference: the softmax over all experts for the masks", "1748",
       [DENSE, r"dispatch_eimsum = \"BSM,BSEC -> EBCM\"", r"^softmax_probs = jax\.nn\.softmax\("]),
    St("InferenceSubgroupMasks", "inference: softmax over all experts, generate_masks_subgroup", "1748-1749",
       [DENSE, r"dispatch_eimsum = \"BSM,BSEC -> EBCM\"", r"^softmax_probs = jax\.nn\.softmax\("],
       [r"= self\.generate_masks_subgroup\(top_k_indices, softmax_probs\)"]),
    St("InferenceMasksCall", "inference: generate_masks_subgroup(top_k_indices, softmax_probs)", "1749",
       [DENSE, r"= self\.generate_masks_subgroup\(top_k_indices, softmax_probs\)"]),
    St("ContextAutoregressiveAxes", "the context-autoregressive branch's mask and input axes", "1750-1763",
       [DENSE, r"get_context_autoregressive_parallelism_size\(\) > 0 and cp == 1"],
       [r"^input_axis = \(", r"^\)$"]),
    St("DispatchEinsumSubgroup", "the dispatch einsum with subgroups", "1806",
       [DENSE, r"dispatch_eimsum = \"BNSM,BNSEC -> EBNCM\""]),
    St("SubgroupOutputReshape", "dense_matmul folds the subgroups back", "1900-1908",
       [DENSE, scope("combine"), r"if output\.ndim == 4"], [r"^\)$"]),
    St("DroplessWi0Wi1", "dropless: wi_0 and wi_1 over every expert", "1914-1925",
       [DENSE, scope("combine"), scope("wi_0")], [scope("wi_1"), r"\"BSM,EMH -> BSEH\""]),
    St("DroplessBody", "dropless: wi_0, wi_1, wo and the weighted sum", "1914-1948",
       [DENSE, scope("combine"), scope("wi_0")], [scope("weight_sum"), r"float32_weight_sum"]),
    St("Llama4UnitWeightsDense", "dense_matmul's unit weights (Llama 4)", "1946-1947",
       [DENSE, scope("weight_sum"), r"if is_llama4_decoder_layer"],
       [r"jnp\.ones_like\(top_k_weights\)"]),
    St("SharedExpertsSum", "RoutedAndSharedMoE adds the shared experts' output", "2180-2181",
       [r"class RoutedAndSharedMoE\(", fn("__call__"), r"^shared_experts = self\.shared_experts\("],
       [r"return routed_experts \+ shared_experts"]),
    St("RoutedAndSharedMoeBody", "RoutedAndSharedMoE.__call__ whole", "2169-2181",
       [r"class RoutedAndSharedMoE\(", fn("__call__")], [r"return routed_experts \+ shared_experts"]),
    # --- Keys the seed's moe.py does not read (main and the release).
    St("DispatchPeelExpert", "dense_matmul reads moe_dispatch_no_expert_sharding (training, capacity)", "-",
       [DENSE, r"moe_peel_expert = self\.config\.moe_dispatch_no_expert_sharding"], seed=None),
    St("MaybeShardMoeDispatch", "_maybe_shard_moe_dispatch: 'expert' peeled off the batch dim", "-",
       [fn("_maybe_shard_moe_dispatch")], [r"return self\._maybe_shard_with_pspec\(inputs, pspec\)"], seed=None),
    St("TokenChunkLoop", "the chunked ring: each sequence chunk through _moe_body, outputs concatenated", "-",
       [r"chunk = seq_len // n_chunks"], [r"output = jnp\.concatenate\(outs, axis=1\)"], seed=None),
    St("DeferSmallAllReduces", "defer_small_all_reduces: local expert counts out of the ring's shard_map", "-",
       [r"defer_small_ars = bool\(getattr\(self\.config, \"defer_small_all_reduces\""], seed=None, main=None),
]


def find(lines, steps, start=0):
  """Index of the line the steps end on (searching from `start`), or None."""
  at = start - 1
  for step in steps:
    rx = re.compile(step)
    at = next((i for i in range(at + 1, len(lines)) if rx.search(lines[i])), None)
    if at is None:
      return None
  return at


def locate(lines, pattern):
  if pattern is None:
    return None
  steps, end = pattern
  first = find(lines, steps)
  if first is None:
    raise LookupError(f"steps {steps} do not match")
  last = first
  if end:
    # The end steps start at the statement's own line.
    last = find(lines, end, first)
    if last is None:
      raise LookupError(f"end steps {end} do not match after line {first + 1}")
  return first + 1, last + 1


def text(span):
  if span is None:
    return "-"
  return str(span[0]) if span[0] == span[1] else f"{span[0]}-{span[1]}"


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--seed", required=True)
  ap.add_argument("--main", required=True)
  ap.add_argument("--release", required=True)
  ap.add_argument("--show", action="store_true")
  ap.add_argument("-o", "--output")
  args = ap.parse_args()
  files = {"seed": args.seed, "main": args.main, "release": args.release}
  lines = {}
  for r, path in files.items():
    with open(path, encoding="utf-8") as f:
      content = f.read()
    lines[r] = [l.strip() for l in content.splitlines()]
    # Counted as `wc -l` does (the seed's text has no final newline).
    if content.count("\n") != LENGTHS[r]:
      sys.exit(f"{path}: {content.count(chr(10))} lines, expected {LENGTHS[r]} (the {r} revision's moe.py)")
  errors = []
  rows = []
  seen = set()
  for s in STATEMENTS:
    if s.ident in seen:
      errors.append(f"{s.ident}: duplicate id")
    seen.add(s.ident)
    spans = {}
    for r in REVISIONS:
      try:
        spans[r] = locate(lines[r], s.pattern[r])
      except LookupError as e:
        errors.append(f"{s.ident} in {r}: {e}")
        spans[r] = None
    if text(spans["seed"]) != s.cites:
      errors.append(f"{s.ident}: seed lines {text(spans['seed'])}, shardtrace cites {s.cites}")
    rows.append((s, spans))
    if args.show:
      print(f"{s.ident}: {s.what}")
      for r in REVISIONS:
        sp = spans[r]
        line = lines[r][sp[0] - 1][:100] if sp else ""
        print(f"  {r:8} {text(sp):>10}  {line}")
  if errors:
    sys.exit("\n".join(errors))
  if args.output:
    out = ["// Generated by tools/maxtext_oracle/moe_lines.py from each revision's moe.py; do not",
           "// edit: change a pattern there and rerun it (docs/revisions.md, \"Line references\").",
           "// MOE_STATEMENT(Id, what it is, seed first, last, e591f30 first, last, 0.2.5 first, last):",
           "// the statement's lines in each revision's moe.py; 0, 0: the revision has no such statement.",
           "// clang-format off"]
    for s, spans in rows:
      nums = ", ".join(f"{sp[0]}, {sp[1]}" if sp else "0, 0" for sp in (spans[r] for r in REVISIONS))
      what = s.what.replace("\\", "\\\\").replace('"', '\\"')
      out.append(f'MOE_STATEMENT({s.ident}, "{what}", {nums})')
    out.append("// clang-format on")
    with open(args.output, "w", encoding="utf-8") as f:
      f.write("\n".join(out) + "\n")


if __name__ == "__main__":
  main()
