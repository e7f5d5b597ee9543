"""The declared matrix of oracle cases: which MaxText block runs, on how many CPU devices, with
which pyconfig overrides over the release's base.yml, and what each case proves.

Every case keeps dims tiny (M=16, H=32, E=8, K=2, S=8; the "stepgen" step variants other small
dims) so the fixtures stay small and all of them export in a few minutes. megablox/tokamax are Pallas TPU kernels: every sparse case but
the ring ones runs with megablox=false, i.e. jax.lax.ragged_dot, the CPU-capable grouped
matmul MaxText offers (the release runs megablox in Pallas interpret mode on a CPU mesh).
"""

import importlib.metadata
import os

SEED = 20261123

SMALL = {
    # Run-time keys only: no checkpoint directory and no distributed start-up on a CPU host.
    "enable_checkpointing": False,
    "skip_jax_distributed_system": True,
    # MaxText records every activation sharding constraint it applies (sharding_info dumps).
    "debug_sharding": True,
    "dtype": "float32",
    "weight_dtype": "float32",
    "matmul_precision": "highest",
    "base_emb_dim": 16,
    "base_mlp_dim": 32,
    "base_moe_mlp_dim": 32,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "max_target_length": 8,
    "per_device_batch_size": 2,
    "decoder_block": "mixtral",
    "mlp_activations": ["silu", "linear"],
    "megablox": False,
    "use_tokamax_gmm": False,
    "sparse_matmul": True,
    "capacity_factor": -1.0,
    "load_balance_loss_weight": 0.01,
}


def case(name, devices, what, block="moe", mesh=None, **overrides):
  over = dict(SMALL)
  for k, v in (mesh or {}).items():
    over[f"ici_{k}_parallelism"] = v
  over.update(overrides)
  over = {k: v for k, v in over.items() if v is not None}  # None: the model file's value
  return {"name": name, "devices": devices, "what": what, "block": block, "overrides": over}


def bf16(c):
  """The same case in bfloat16 activations (weights stay float32, as MaxText's default)."""
  d = dict(c)
  d["name"] = c["name"] + "_bf16"
  d["what"] = c["what"] + " (bfloat16 activations)"
  d["overrides"] = dict(c["overrides"], dtype="bfloat16")
  return d


def model(name):
  """A MaxText model file's routing and block, with the small dims above over it."""
  return {"model_name": name, "override_model_config": True, "decoder_block": None, "mlp_activations": None}


CASES = [
    # --- one device: every path's numbers, no communication.
    case("mlp_dense", 1, "the dense MlpBlock (wi_0, wi_1, wo) of a dense model", block="mlp",
         num_experts=1, num_experts_per_tok=1, decoder_block="llama2"),
    case("dense_dropless", 1, "dense_matmul dropless (capacity_factor=-1)", sparse_matmul=False),
    case("dense_drop_train", 1, "dense_matmul token dropping in training (capacity_factor=1)",
         sparse_matmul=False, capacity_factor=1.0),
    case("dense_drop_train_cf05", 1, "dense_matmul dropping with capacity_factor=0.5 (drops tokens)",
         sparse_matmul=False, capacity_factor=0.5),
    case("dense_drop_inference", 1, "dense_matmul dropping in inference (generate_masks_subgroup)",
         sparse_matmul=False, capacity_factor=1.0, model_call_mode="inference"),
    case("sparse_ep1", 1, "sparse_matmul without expert parallelism, ragged_dot"),
    case("sparse_ep1_norm_topk", 1, "sparse_matmul, softmax top-k with norm_topk_prob (qwen3 routing)",
         norm_topk_prob=True),
    case("shared_deepseek3", 1, "RoutedAndSharedMoE of deepseek3-tiny: grouped routing with bias and scaling",
         block="shared", **model("deepseek3-tiny"), n_routing_groups=4, topk_routing_group=2,
         num_experts=16, num_experts_per_tok=4),
    case("shared_deepseek3_dense", 1,
         "deepseek3-tiny routing through dense_matmul (dropless), with loss-free bias updates",
         block="shared", **model("deepseek3-tiny"), n_routing_groups=4, topk_routing_group=2,
         num_experts=16, num_experts_per_tok=4, sparse_matmul=False, routed_bias_update_rate=0.01),
    case("shared_kimi_k2", 1,
         "RoutedAndSharedMoE of kimi-k2-1t: the release's deepseek_routing (experts by the biased "
         "sigmoid scores, weights from the unbiased ones), no routing groups",
         block="shared", **model("kimi-k2-1t"), num_experts=16, num_experts_per_tok=4),
    case("moe_gpt_oss", 1, "RoutedMoE of gpt-oss-20b: expert biases, clamped SwiGLU",
         **model("gpt-oss-20b"), num_experts=8, num_experts_per_tok=2),
    case("shared_deepseek2", 1, "RoutedAndSharedMoE of deepseek2-16b: softmax scores, no bias",
         block="shared", **model("deepseek2-16b"), num_experts=16, num_experts_per_tok=4),
    case("moe_envy", 1, "RoutedMoE of envy-switch-base", **model("envy-switch-base"),
         num_experts=8, num_experts_per_tok=1),
    case("qwen3_5_shared", 1, "Qwen3NextSparseMoeBlock of qwen3.5-35b-a3b", block="qwen3_next",
         **model("qwen3.5-35b-a3b")),
    case("shared_deepseek4", 1,
         "RoutedAndSharedMoE of deepseek4-tiny past its hash layers: sqrtsoftplus scores, biased "
         "top-k, weights from the unbiased scores, clamped SwiGLU, bias updates",
         block="shared", **model("deepseek4-tiny"), attention="dot_product"),
    case("shared_llama4", 1, "RoutedAndSharedMoE of llama4-17b-16e (sigmoid top-1 on the inputs)",
         block="shared", **model("llama4-17b-16e"), num_experts_per_tok=1),
    case("shared_gemma4", 1, "RoutedAndSharedMoE of gemma4-26b (softmax top-k, norm_topk_prob)",
         block="shared", **model("gemma4-26b")),
    case("qwen3_next_shared", 1,
         "Qwen3NextSparseMoeBlock of qwen3-next-80b-a3b: routed + sigmoid(gate) * shared expert",
         block="qwen3_next", **model("qwen3-next-80b-a3b")),
    # --- two devices.
    case("dense_drop_train_fsdp2", 2, "dense_matmul dropping (capacity_factor=1) in training, fsdp=2",
         mesh={"fsdp": 2}, sparse_matmul=False, capacity_factor=1.0),
    case("dense_dropless_ep2", 2, "dense_matmul dropless with expert=2 (GSPMD moves the tokens)",
         mesh={"expert": 2}, sparse_matmul=False),
    case("dense_drop_train_ep2", 2, "dense_matmul dropping with expert=2", mesh={"expert": 2},
         sparse_matmul=False, capacity_factor=1.0),
    case("sparse_fsdp2", 2, "sparse_matmul, fsdp=2: weights all-gathered into shard_map", mesh={"fsdp": 2}),
    case("sparse_tp2", 2, "sparse_matmul with tensor parallelism 2", mesh={"tensor": 2}),
    case("sparse_ep2", 2, "sparse_matmul EP=2, batch sharded by expert: ragged_all_to_all",
         mesh={"expert": 2}),
    case("sparse_ep2_decode", 2, "sparse_matmul EP=2 with global batch 1 (decode: batch replicated)",
         mesh={"expert": 2}, per_device_batch_size=0.5),
    case("shared_deepseek3_ep2", 2,
         "deepseek3-tiny routing on the sparse path with EP=2 and loss-free bias updates (counts psummed over EP)",
         block="shared", mesh={"expert": 2}, **model("deepseek3-tiny"), n_routing_groups=4, topk_routing_group=2,
         num_experts=16, num_experts_per_tok=4, routed_bias_update_rate=0.01),
    case("sparse_ep2_rbf1", 2,
         "sparse_matmul EP=2, ragged_buffer_factor=1: the receive buffer (balanced size) drops overflow rows",
         mesh={"expert": 2}, ragged_buffer_factor=1.0),
    # megablox: the ring hands the grouped matmul all E group sizes and the offset of its local
    # experts, which jax.lax.ragged_dot (megablox=false) has no argument for; the release runs
    # the megablox Pallas kernel in interpret mode when the mesh is not a TPU.
    case("sparse_ep2_ring", 2,
         "sparse_matmul EP=2, ring of experts: tokens all-gathered, psum_scatter back (megablox, Pallas interpret)",
         mesh={"expert": 2}, use_ring_of_experts=True, megablox=True),
    case("sparse_ep2_ring_decode", 2,
         "sparse_matmul EP=2, ring of experts with global batch 1: the gather holds 2 copies of the sequence",
         mesh={"expert": 2}, use_ring_of_experts=True, megablox=True, per_device_batch_size=0.5),
    # The release's MoE knobs (issue 22): each changes what the forward pass moves or computes.
    case("sparse_ep2_direct_gather", 2,
         "sparse_matmul EP=2 with moe_use_direct_token_gather: rows gathered from the tokens in "
         "expert order, no top-k copies materialised",
         mesh={"expert": 2}, moe_use_direct_token_gather=True),
    case("sparse_ep2_ring_topk_first", 2,
         "ring of experts EP=2 with moe_topk_before_ep_all_gather: top-k on the local tokens, the "
         "top-k weights and ids (and per-sequence router probs) all-gathered instead of the logits",
         mesh={"expert": 2}, use_ring_of_experts=True, megablox=True, moe_topk_before_ep_all_gather=True),
    case("sparse_ep2_ring_emb_chunks", 2,
         "ring of experts EP=2 with the release's num_moe_emb_chunks=2: the token all-gather in "
         "chunks of the embed dim, each chunk's wi gmm accumulated (gmm v2 emulated: gmm_v2_emulation.py)",
         mesh={"expert": 2}, use_ring_of_experts=True, megablox=True, use_tokamax_gmm=True, use_gmm_v2=True,
         num_moe_emb_chunks=2),
    case("sparse_ep2_ring_token_chunks", 2,
         "ring of experts EP=2 with num_moe_token_chunks=2: each half of the sequence gathered, routed, "
         "computed and reduce-scattered on its own; the load-balance loss is the chunks' mean",
         mesh={"expert": 2}, use_ring_of_experts=True, megablox=True, num_moe_token_chunks=2),
    case("shared_deepseek3_ep2_ring_token_chunks", 2,
         "deepseek3-tiny routing on the ring EP=2 with num_moe_token_chunks=2 and loss-free bias updates: "
         "the chunks' expert counts summed, one sign",
         block="shared", mesh={"expert": 2}, **model("deepseek3-tiny"), n_routing_groups=4, topk_routing_group=2,
         num_experts=16, num_experts_per_tok=4, routed_bias_update_rate=0.01, use_ring_of_experts=True,
         megablox=True, num_moe_token_chunks=2),
    # --- four devices.
    case("shared_deepseek3_fsdp2_ep2_ring_defer", 4,
         "deepseek3-tiny routing on the ring, fsdp=2 x EP=2, loss-free bias updates with defer_small_all_reduces: "
         "the layer returns each fsdp shard's local expert counts (no all-reduce); the step reduces them once",
         block="shared", mesh={"fsdp": 2, "expert": 2}, **model("deepseek3-tiny"), n_routing_groups=4,
         topk_routing_group=2, num_experts=16, num_experts_per_tok=4, routed_bias_update_rate=0.01,
         use_ring_of_experts=True, megablox=True, defer_small_all_reduces=True),
    case("shared_deepseek3_fsdp2_ep2_ring", 4,
         "deepseek3-tiny routing on the ring, fsdp=2 x EP=2, loss-free bias updates: the expert counts psummed over fsdp",
         block="shared", mesh={"fsdp": 2, "expert": 2}, **model("deepseek3-tiny"), n_routing_groups=4,
         topk_routing_group=2, num_experts=16, num_experts_per_tok=4, routed_bias_update_rate=0.01,
         use_ring_of_experts=True, megablox=True),
    case("sparse_fsdp2_tp2", 4, "sparse_matmul, fsdp=2 x tensor=2", mesh={"fsdp": 2, "tensor": 2}),
    case("sparse_ep4", 4, "sparse_matmul EP=4, batch sharded: ragged_all_to_all", mesh={"expert": 4}),
    case("sparse_ep2_tp2", 4, "sparse_matmul EP=2 x TP=2", mesh={"expert": 2, "tensor": 2}),
    case("sparse_ep2_fsdp2", 4, "sparse_matmul EP=2 x fsdp=2: ragged_all_to_all, weights gathered over fsdp",
         mesh={"fsdp": 2, "expert": 2}),
    case("sparse_ep4_rbf1", 4,
         "sparse_matmul EP=4, ragged_buffer_factor=1: the receive buffer (balanced size) drops overflow rows",
         mesh={"expert": 4}, ragged_buffer_factor=1.0),
    case("sparse_ep4_decode", 4, "sparse_matmul EP=4 with global batch 1 (decode)", mesh={"expert": 4},
         per_device_batch_size=0.25),
    case("dense_drop_inference_ep2", 4, "dense_matmul dropping in inference, fsdp=2 x expert=2",
         mesh={"fsdp": 2, "expert": 2}, sparse_matmul=False, capacity_factor=1.0, model_call_mode="inference"),
    case("sparse_shard_exp_on_fsdp", 4, "sparse_matmul with shard_exp_on_fsdp (fsdp=4)", mesh={"fsdp": 4},
         shard_exp_on_fsdp=True),
    case("sparse_rule_shard_exp_on_fsdp_ep2", 4,
         "custom_mesh_and_rule shard-exp-on-fsdp with EP=2 x fsdp=2 (runs in the release; the key "
         "shard_exp_on_fsdp=true with EP=2 fails in ragged_dot, and shardtrace refuses it)",
         custom_mesh_and_rule="shard-exp-on-fsdp", mesh={"fsdp": 2, "expert": 2}),
    case("dense_shard_exp_on_fsdp_ep2", 4, "dense_matmul with shard_exp_on_fsdp=true, EP=2 x fsdp=2",
         mesh={"fsdp": 2, "expert": 2}, shard_exp_on_fsdp=True, sparse_matmul=False),
    case("sparse_2d_fsdp", 4, "sparse_matmul with use_2d_fsdp_sharding (fsdp=2 x fsdp_transpose=2)",
         mesh={"fsdp": 2, "fsdp_transpose": 2}, use_2d_fsdp_sharding=True),
    case("dense_drop_train_fsdp2_ep2", 4, "dense_matmul dropping, fsdp=2 x expert=2",
         mesh={"fsdp": 2, "expert": 2}, sparse_matmul=False, capacity_factor=1.0),
    case("dense_drop_train_fsdp2_ep2_no_expert_dispatch", 4,
         "dense_matmul dropping, fsdp=2 x expert=2, moe_dispatch_no_expert_sharding: 'expert' peeled "
         "off the batch dim of dispatch, layer_w0 and layer_w1 (the expert dim keeps it)",
         mesh={"fsdp": 2, "expert": 2}, sparse_matmul=False, capacity_factor=1.0,
         moe_dispatch_no_expert_sharding=True),
    case("rule_pure_fsdp", 4, "custom_mesh_and_rule pure-fsdp, sparse_matmul", custom_mesh_and_rule="pure-fsdp",
         mesh={"fsdp": 4}),
    case("qwen3_next_shared_fsdp2_tp2", 4,
         "Qwen3NextSparseMoeBlock of qwen3-next-80b-a3b on fsdp=2 x tensor=2",
         block="qwen3_next", mesh={"fsdp": 2, "tensor": 2}, **model("qwen3-next-80b-a3b")),
    case("rule_shard_exp_on_fsdp", 4, "custom_mesh_and_rule shard-exp-on-fsdp", mesh={"fsdp": 4},
         custom_mesh_and_rule="shard-exp-on-fsdp"),
    # deepseek3-671b-2dfsdp's own logical rules (no 'exp' rule) under expert parallelism (issue 27,
    # D1): the experts reach shard_map replicated and megablox reads the first E/EP of them on
    # every shard (replicated_experts.py measures what that computes against one device).
    case("shared_2dfsdp_fsdp2_ep2", 4,
         "RoutedAndSharedMoE of deepseek3-671b-2dfsdp (its logical rules map no mesh axis to 'exp') on "
         "fsdp=2 x expert=2: every EP shard gets all experts, megablox (Pallas interpret) reads groups "
         "0..E/EP-1",
         block="shared", mesh={"fsdp": 2, "expert": 2}, **model("deepseek3-671b-2dfsdp"), megablox=True),
    # --- eight devices.
    case("sparse_fsdp4_tp2", 8, "sparse_matmul, fsdp=4 x tensor=2", mesh={"fsdp": 4, "tensor": 2}),
    case("sparse_ep2_tp4", 8, "sparse_matmul EP=2 x TP=4 (the shape of MaxText PR 4910's CPU test)",
         mesh={"expert": 2, "tensor": 4}),
    case("dense_drop_train_fsdp8", 8, "dense_matmul dropping, fsdp=8", mesh={"fsdp": 8}, sparse_matmul=False,
         capacity_factor=1.0),
    case("shared_2dfsdp_fsdp2_ep4", 8,
         "RoutedAndSharedMoE of deepseek3-671b-2dfsdp on fsdp=2 x expert=4 (the sweep's fsdp2_ep4 mesh, "
         "tiny dims): every EP shard gets all experts, megablox (Pallas interpret) reads groups 0..E/EP-1",
         block="shared", mesh={"fsdp": 2, "expert": 4}, **model("deepseek3-671b-2dfsdp"), megablox=True),
]
CASES += [bf16(c) for c in CASES if c["name"] in ("sparse_ep1", "dense_dropless", "dense_drop_train_fsdp2",
                                                   "mlp_dense", "sparse_ep2")]
# cleanup (session 33): the two ring chunkings together, which the release's config validation accepts.
CASES.append(
    case("sparse_ep2_ring_token_emb_chunks", 2,
         "ring of experts EP=2 with num_moe_token_chunks=2 and num_moe_emb_chunks=2: each half of the "
         "sequence runs _moe_body on its own, and each body gathers and routes its tokens in embed-dim "
         "chunks (gmm v2 emulated: gmm_v2_emulation.py)",
         mesh={"expert": 2}, use_ring_of_experts=True, megablox=True, use_tokamax_gmm=True, use_gmm_v2=True,
         num_moe_emb_chunks=2, num_moe_token_chunks=2))

# Declared but not exportable on CPU with this release; listed in testdata/maxtext/README.md.
NOT_EXPORTABLE = [
    ("tensor_transpose in the sparse path",
     "the release has no tensor_transpose mesh axis (removed after the seed, MaxText faaa424d0)"),
    ("ring of experts with megablox=false",
     "moe.py's ring path hands jax.lax.ragged_dot the group sizes of all experts (8) against the "
     "local experts' kernel (E/EP): 'expected rhs group dimension size to be 8, got 4'; "
     "the sparse_ep2_ring cases run it with megablox (Pallas interpret mode on CPU)"),
    ("megablox / tokamax grouped matmul elsewhere",
     "Pallas TPU kernels (megablox interpreted on CPU): every sparse case but the ring ones runs "
     "megablox=false (jax.lax.ragged_dot)"),
]


def pyconfig_overrides(c):
  """key, value pairs in the order given to pyconfig (and written to config.yml)."""
  return list(c["overrides"].items())


def maxtext_version():
  return importlib.metadata.version("maxtext")


def release_base_yml():
  import maxtext  # pylint: disable=import-outside-toplevel
  return os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml")


def step(forward_name, what, suffix="", remat_policy=None, **remat_keys):
  """A training-step case (export_step.py) of the forward case `forward_name`: the same block,
  config, mesh and seed, differentiated; with remat_policy, wrapped as MaxText wraps an unscanned
  decoder layer (scan_layers=false, which is also what makes MaxText's prevent_cse true)."""
  c = next(c for c in CASES if c["name"] == forward_name)
  d = dict(c, name=f"step_{forward_name}{suffix}", what=what, forward=forward_name, remat=remat_policy is not None)
  if remat_policy is not None:
    # remat_keys: the per-tensor keys a `custom` policy reads (moe_x_sorted: device, ...).
    d["overrides"] = dict(c["overrides"], remat_policy=remat_policy, scan_layers=False, **remat_keys)
  return d


# The training-step cases (testdata/maxtext/cases/step_*): the backward of every path but decode.
STEP_CASES = [
    step("mlp_dense", "the dense MlpBlock's step"),
    step("dense_dropless", "dense_matmul dropless step"),
    step("sparse_ep1", "sparse_matmul (ragged_dot) step without expert parallelism"),
    step("dense_drop_train_fsdp2", "dense_matmul token dropping step, fsdp=2"),
    step("sparse_fsdp2", "sparse_matmul step, fsdp=2 only: weight gradients reduce-scattered"),
    step("sparse_tp2", "sparse_matmul step with tensor parallelism 2"),
    step("sparse_ep2", "sparse_matmul EP=2 step: ragged_all_to_all and its transpose"),
    step("dense_dropless_ep2", "dense_matmul dropless step with expert=2"),
    step("sparse_ep2_ring", "ring-of-experts step, EP=2 (megablox, Pallas interpret)"),
    step("shared_deepseek3", "RoutedAndSharedMoE (deepseek3-tiny routing) step: shared experts"),
    step("sparse_ep1_bf16", "sparse_matmul step in bfloat16 activations"),
    step("sparse_ep2_fsdp2", "sparse_matmul EP=2 x fsdp=2 step"),
    step("sparse_ep4", "sparse_matmul EP=4 step"),
    step("dense_dropless", "dense_matmul dropless step wrapped in jax.checkpoint, remat_policy=full",
         suffix="_remat_full", remat_policy="full"),
    step("dense_dropless", "dense_matmul dropless step wrapped in jax.checkpoint, remat_policy=minimal",
         suffix="_remat_minimal", remat_policy="minimal"),
    step("dense_dropless", "dense_matmul dropless step wrapped in jax.checkpoint, remat_policy=save_dot_except_mlpwi "
         "(keeps only mlpwo)", suffix="_remat_save_dot_except_mlpwi", remat_policy="save_dot_except_mlpwi"),
    step("sparse_ep2", "sparse_matmul EP=2 step wrapped in jax.checkpoint, remat_policy=full: the backward re-runs "
         "the ragged all-to-alls", suffix="_remat_full", remat_policy="full"),
    step("sparse_ep2", "sparse_matmul EP=2 step wrapped in jax.checkpoint, remat_policy=custom keeping moe_x_sorted "
         "and moe_routing_maps on the device", suffix="_remat_custom", remat_policy="custom", moe_x_sorted="device",
         moe_routing_maps="device"),
    step("sparse_ep2_bf16", "sparse_matmul EP=2 step in bfloat16 activations"),
    step("dense_drop_train_fsdp2_bf16", "dense_matmul token dropping step, fsdp=2, bfloat16 activations"),
    step("shared_deepseek3_ep2", "deepseek3-tiny routing, shared experts, EP=2 and loss-free bias updates: the "
         "step differentiates the loss, not the bias update"),
    step("sparse_fsdp2", "sparse_matmul fsdp=2 step wrapped in jax.checkpoint, remat_policy=full",
         suffix="_remat_full", remat_policy="full"),
    step("sparse_fsdp2", "sparse_matmul fsdp=2 step wrapped in jax.checkpoint, remat_policy=minimal",
         suffix="_remat_minimal", remat_policy="minimal"),
]

# --- stepmodels (issue 25): the release's model families (their forward cases above), differentiated:
# gpt-oss's biases and clamped SwiGLU, llama4's sigmoid top-1 on the inputs, qwen3-next's shared
# expert gate, deepseek2/4 and kimi-k2 routing, gemma4's per-expert scale, envy's top-1 (stepgen has
# norm_topk_prob). At the small dims the wi outputs stay within +-1, far below the model files'
# limits (7 and 10): the _limit05 cases set mlp_activations_limit 0.5, which clamps about half of
# them, so the clamps' subgradients are checked (a variant as stepgen's step_variant marks one).
def _limited(forward_name, what):
  d = step(forward_name, what, suffix="_limit05")
  return dict(d, overrides=dict(d["overrides"], mlp_activations_limit=0.5), variant=True)


def _on_mesh(forward_name, suffix, what, mesh):
  """The family's step on a mesh its forward case does not run on (a variant, as _limited)."""
  d = step(forward_name, what, suffix=suffix)
  over = dict(d["overrides"], **{f"ici_{k}_parallelism": v for k, v in mesh.items()})
  devices = 1
  for v in mesh.values():
    devices *= v
  return dict(d, devices=devices, overrides=over, variant=True)


STEP_CASES += [
    step("moe_gpt_oss", "RoutedMoE of gpt-oss-20b step: expert biases, clamped SwiGLU (alpha, limit)"),
    step("shared_llama4", "RoutedAndSharedMoE of llama4-17b-16e step: sigmoid top-1 applied to the inputs"),
    step("qwen3_next_shared", "Qwen3NextSparseMoeBlock of qwen3-next-80b-a3b step: sigmoid(gate) * shared expert"),
    step("qwen3_5_shared", "Qwen3NextSparseMoeBlock of qwen3.5-35b-a3b step"),
    step("shared_deepseek2", "RoutedAndSharedMoE of deepseek2-16b step: softmax scores, no bias"),
    step("shared_deepseek4", "RoutedAndSharedMoE of deepseek4-tiny step: sqrtsoftplus scores, biased top-k, "
         "clamped SwiGLU"),
    step("shared_gemma4", "RoutedAndSharedMoE of gemma4-26b step: softmax top-k, norm_topk_prob, per-expert scale"),
    step("shared_kimi_k2", "RoutedAndSharedMoE of kimi-k2-1t step: deepseek_routing without groups"),
    step("moe_envy", "RoutedMoE of envy-switch-base step: top-1"),
    _limited("moe_gpt_oss", "RoutedMoE of gpt-oss-20b step with mlp_activations_limit=0.5: the clamped SwiGLU "
             "clamps (moe_gpt_oss's keys otherwise)"),
    _limited("shared_deepseek4", "RoutedAndSharedMoE of deepseek4-tiny step with mlp_activations_limit=0.5: the "
             "SwiGLU clamps (shared_deepseek4's keys otherwise)"),
    step("qwen3_next_shared_fsdp2_tp2", "Qwen3NextSparseMoeBlock of qwen3-next-80b-a3b step on fsdp=2 x tensor=2"),
    _on_mesh("moe_gpt_oss", "_ep2", "RoutedMoE of gpt-oss-20b step on expert=2: expert-sharded biases under "
             "ragged_all_to_all", {"expert": 2}),
    _on_mesh("shared_llama4", "_ep2", "RoutedAndSharedMoE of llama4-17b-16e step on expert=2: sigmoid top-1 on "
             "the inputs before the all-to-all", {"expert": 2}),
    _on_mesh("shared_gemma4", "_ep2", "RoutedAndSharedMoE of gemma4-26b step on expert=2: the expert-sharded "
             "per_expert_scale", {"expert": 2}),
    _on_mesh("qwen3_next_shared", "_ep2", "Qwen3NextSparseMoeBlock of qwen3-next-80b-a3b step on expert=2: "
             "the shared expert and its gate beside ragged_all_to_all", {"expert": 2}),
    _on_mesh("shared_deepseek4", "_ep2", "RoutedAndSharedMoE of deepseek4-tiny step on expert=2: sqrtsoftplus, "
             "biased top-k, bias updates with counts psummed over expert", {"expert": 2}),
]

# --- steprelease (issue 25): the step of a model file with fp8 weight storage. qwen3.5-35b-a3b-fp8's
# block on the small dims with its weight_dtype (float8_e4m3fn) and unquantized_modules, blocks of 8
# (M=16: 2 blocks, H=32: 4), fsdp=2. MaxText's training forward dequantizes each kernel with plain jnp
# ops (quantizations.dequantize_weight: a cast and a multiply by the scale, no custom VJP), so the
# step is JAX's own transpose of those: no forward fixture of its own (the step case carries the
# forward arrays).
FP8_STEP_FORWARD = case("qwen3_5_fp8_fsdp2", 2,
                        "Qwen3NextSparseMoeBlock of qwen3.5-35b-a3b-fp8 (float8_e4m3fn kernels, 8x8 blocks), fsdp=2",
                        block="qwen3_next", mesh={"fsdp": 2}, **model("qwen3.5-35b-a3b-fp8"),
                        weight_dtype="float8_e4m3fn", weight_block_size=8)
STEP_CASES.append(dict(FP8_STEP_FORWARD, name="step_qwen3_5_fp8_fsdp2", forward="qwen3_5_fp8_fsdp2", remat=False,
                       what="qwen3.5-35b-a3b-fp8's block step on fsdp=2: gradients through dequantize_weight"))
# MaxText's remat wrapper calls the layer with the input alone, which Qwen3NextSparseMoeBlock does not
# take: the remat case is the RoutedMoE block (mixtral routing) with the same fp8 storage, its gate
# kernel stored in fp8 too (base.yml's unquantized_modules is empty).
FP8_MOE_FORWARD = case("sparse_fp8_fsdp2", 2, "RoutedMoE with float8_e4m3fn kernels (8x8 blocks), fsdp=2",
                       mesh={"fsdp": 2}, weight_dtype="float8_e4m3fn", weight_block_size=8)
STEP_CASES.append(dict(FP8_MOE_FORWARD, name="step_sparse_fp8_fsdp2_remat_minimal", forward="sparse_fp8_fsdp2",
                       remat=True, overrides=dict(FP8_MOE_FORWARD["overrides"], remat_policy="minimal", scan_layers=False),
                       what="RoutedMoE step with fp8 kernels on fsdp=2 wrapped in jax.checkpoint, remat_policy=minimal: "
                            "the dequantized kernels are recomputed in the backward, not kept"))

# --- stepgen: step cases off the fixtures' beaten track (other dims, meshes, routings, remat
# policies), so the step model is checked where it was not built. A variant keeps its forward
# case's block and config and changes the keys given (dims, mesh, capacity factor); its forward
# differs from the forward case's, so export_step.py compares no forward collectives for it.
def step_variant(forward_name, suffix, what, devices=None, mesh=None, **overrides):
  d = step(forward_name, what, suffix=suffix)
  over = dict(d["overrides"])
  for k, v in (mesh or {}).items():
    over[f"ici_{k}_parallelism"] = v
  over.update(overrides)
  return dict(d, devices=devices or d["devices"], overrides=over, variant=True)


ODD_DIMS = {"base_emb_dim": 48, "base_mlp_dim": 24, "base_moe_mlp_dim": 24, "num_experts": 4,
            "num_experts_per_tok": 3, "max_target_length": 16, "per_device_batch_size": 3}
WIDE_DIMS = {"base_emb_dim": 24, "base_mlp_dim": 16, "base_moe_mlp_dim": 16, "num_experts": 16,
             "num_experts_per_tok": 4, "max_target_length": 16, "per_device_batch_size": 1}

STEP_CASES += [
    step_variant("sparse_ep1", "_odd", "sparse_matmul step, emb 48, mlp 24, E 4, top-3, seq 16, batch 3",
                 **ODD_DIMS),
    step_variant("dense_dropless", "_wide", "dense_matmul dropless step, emb 24, mlp 16, E 16, top-4, seq 16, "
                 "batch 1", **WIDE_DIMS),
    step("sparse_ep1_norm_topk", "sparse_matmul step with norm_topk_prob (qwen3 routing)"),
    step("sparse_ep1", "sparse_matmul step wrapped in jax.checkpoint, remat_policy=save_out_proj (no MoE name)",
         suffix="_remat_save_out_proj", remat_policy="save_out_proj"),
    step("dense_drop_train", "dense_matmul dropping step wrapped in jax.checkpoint, "
         "remat_policy=save_dot_with_context_except_mlp", suffix="_remat_save_dot_with_context_except_mlp",
         remat_policy="save_dot_with_context_except_mlp"),
    step("dense_dropless", "dense_matmul dropless step wrapped in jax.checkpoint, remat_policy=minimal_offloaded "
         "(the minimal names to pinned_host)", suffix="_remat_minimal_offloaded", remat_policy="minimal_offloaded"),
    step_variant("dense_drop_train_ep2", "_cf05", "dense_matmul dropping step, expert=2, capacity_factor=0.5 "
                 "(drops tokens)", capacity_factor=0.5),
    step_variant("sparse_ep2", "_wide", "sparse_matmul EP=2 step, emb 24, mlp 16, E 16, top-4, seq 16, batch 1",
                 **WIDE_DIMS),
    step("sparse_ep2_tp2", "sparse_matmul EP=2 x TP=2 step"),
    step("sparse_2d_fsdp", "sparse_matmul step with use_2d_fsdp_sharding (fsdp=2 x fsdp_transpose=2)"),
    step("shared_deepseek3_fsdp2_ep2_ring", "ring of experts step, deepseek3-tiny routing, fsdp=2 x EP=2"),
    step("shared_2dfsdp_fsdp2_ep2", "deepseek3-671b-2dfsdp's rules step, fsdp=2 x EP=2 (experts replicated "
         "into shard_map)"),
    step_variant("sparse_ep4", "_fsdp2", "sparse_matmul EP=4 x fsdp=2 step", devices=8, mesh={"fsdp": 2}),
]
# deepseek3-671b-2dfsdp's own rules on the mesh they are written for, fsdp x fsdp_transpose (mlp on
# fsdp_transpose, embed on fsdp), without expert parallelism: the backward reduce-scatters over both
# axes what the forward gathered, and the router kernel's gradient is all-reduced over fsdp_transpose.
D1_STEP_FORWARD = case("shared_2dfsdp_fsdp2_fsdpt2", 4,
                       "RoutedAndSharedMoE of deepseek3-671b-2dfsdp on fsdp=2 x fsdp_transpose=2",
                       block="shared", mesh={"fsdp": 2, "fsdp_transpose": 2}, **model("deepseek3-671b-2dfsdp"))
STEP_CASES.append(dict(D1_STEP_FORWARD, name="step_shared_2dfsdp_fsdp2_fsdpt2", forward="shared_2dfsdp_fsdp2_fsdpt2",
                       remat=False, what="deepseek3-671b-2dfsdp's rules step on its own 2D FSDP mesh, "
                                         "fsdp=2 x fsdp_transpose=2"))
FP8_DENSE_FORWARD = case("dense_dropless_fp8_fsdp2", 2, "dense_matmul dropless with float8_e4m3fn kernels (8x8 blocks), fsdp=2",
                         mesh={"fsdp": 2}, sparse_matmul=False, weight_dtype="float8_e4m3fn", weight_block_size=8)
STEP_CASES.append(dict(FP8_DENSE_FORWARD, name="step_dense_dropless_fp8_fsdp2", forward="dense_dropless_fp8_fsdp2",
                       remat=False, what="dense_matmul dropless step with fp8 kernels on fsdp=2: the dequantized kernels are "
                                         "einsum operands outside shard_map"))

# stepgen, second batch: the release's sparse knobs, more meshes of 4 and 8 devices, top-1, TP with
# odd dims, remat with tensor parallelism.
STEP_CASES += [
    step_variant("sparse_ep2", "_top1", "sparse_matmul EP=2 step, top-1 routing, batch 3", num_experts_per_tok=1,
                 per_device_batch_size=3),
    step_variant("sparse_tp2", "_odd", "sparse_matmul TP=2 step, emb 48, mlp 24, E 4, top-3, seq 16, batch 3",
                 **ODD_DIMS),
    step("sparse_ep2_direct_gather", "sparse_matmul EP=2 step with moe_use_direct_token_gather"),
    step("sparse_ep2_ring_token_chunks", "ring of experts EP=2 step with num_moe_token_chunks=2"),
    step("sparse_fsdp2", "sparse_matmul fsdp=2 step wrapped in jax.checkpoint, remat_policy=qkv_proj_offloaded "
         "(offloads no MoE name)", suffix="_remat_qkv_proj_offloaded", remat_policy="qkv_proj_offloaded"),
    step("dense_drop_train_fsdp2_ep2", "dense_matmul dropping step, fsdp=2 x expert=2"),
    step("dense_shard_exp_on_fsdp_ep2", "dense_matmul dropless step with shard_exp_on_fsdp, EP=2 x fsdp=2"),
    step("sparse_rule_shard_exp_on_fsdp_ep2", "custom_mesh_and_rule shard-exp-on-fsdp step, EP=2 x fsdp=2"),
    step("sparse_fsdp2_tp2", "sparse_matmul fsdp=2 x TP=2 step wrapped in jax.checkpoint, remat_policy=minimal",
         suffix="_remat_minimal", remat_policy="minimal"),
    step("sparse_fsdp4_tp2", "sparse_matmul fsdp=4 x TP=2 step"),
    step("sparse_ep2_tp4", "sparse_matmul EP=2 x TP=4 step"),
    step("dense_drop_train_fsdp8", "dense_matmul dropping step, fsdp=8"),
]

# stepgen, third batch: global batch 1 under EP (the batch replicated), the ragged buffer that
# drops rows, the ring's top-k before the gather, dropping at capacity 0.5 on one device, dense
# routing with bias updates, shard_exp_on_fsdp on the sparse path.
STEP_CASES += [
    step("sparse_ep2_decode", "sparse_matmul EP=2 step with global batch 1 (the batch replicated over expert)"),
    step("sparse_ep2_rbf1", "sparse_matmul EP=2 step, ragged_buffer_factor=1 (overflow rows dropped)"),
    step("sparse_ep2_ring_topk_first", "ring of experts EP=2 step with moe_topk_before_ep_all_gather"),
    step("sparse_ep2_ring_decode", "ring of experts EP=2 step with global batch 1"),
    step("dense_drop_train_cf05", "dense_matmul dropping step with capacity_factor=0.5 (drops tokens)"),
    step("shared_deepseek3_dense", "deepseek3-tiny routing through dense_matmul (dropless) step, bias updates"),
    step("sparse_ep4_rbf1", "sparse_matmul EP=4 step, ragged_buffer_factor=1"),
    step("sparse_shard_exp_on_fsdp", "sparse_matmul step with shard_exp_on_fsdp (fsdp=4)"),
    step("sparse_ep4_decode", "sparse_matmul EP=4 step with global batch 1"),
]


# --- ep2plan (issue 25): dense dropless training steps with expert parallelism across dims and
# meshes, to test whether the step's plan (batch-sharded forward output, which einsum VJPs run
# batch- or expert-sharded) is a rule rather than one fixture's propagation. No forward case.
def _ep2plan_step(name, devices, what, mesh, **overrides):
  c = case(name, devices, what, mesh=mesh, sparse_matmul=False, **overrides)
  return dict(c, name=f"step_{name}", forward=None, remat=False)


STEP_CASES += [
    _ep2plan_step("dense_dropless_ep4", 4, "dense_matmul dropless step with expert=4", {"expert": 4}),
    _ep2plan_step("dense_dropless_ep2_e4", 2, "dense_matmul dropless step with expert=2, 4 experts",
                  {"expert": 2}, num_experts=4),
    _ep2plan_step("dense_dropless_ep2_e16", 2, "dense_matmul dropless step with expert=2, 16 experts",
                  {"expert": 2}, num_experts=16),
    _ep2plan_step("dense_dropless_fsdp2_ep2", 4, "dense_matmul dropless step, fsdp=2 x expert=2",
                  {"fsdp": 2, "expert": 2}),
    dict(case("mlp_fsdp2_tp2", 4, "the dense MlpBlock's step on fsdp=2 x tensor=2", block="mlp",
              mesh={"fsdp": 2, "tensor": 2}, num_experts=1, num_experts_per_tok=1, decoder_block="llama2",
              max_target_length=4, per_device_batch_size=1),
         name="step_mlp_fsdp2_tp2", forward=None, remat=False),
    _ep2plan_step("dense_dropless_ep2_s4", 2, "dense_matmul dropless step with expert=2, sequence 4: fewer tokens "
                  "(16) than the MLP dim (32)", {"expert": 2}, max_target_length=4),
]
