"""The declared matrix of oracle cases: which MaxText block runs, on how many CPU devices, with
which pyconfig overrides over the release's base.yml, and what each case proves.

Every case keeps dims tiny (M=16, H=32, E=8, K=2, S=8) so the fixtures stay small and all of
them export in a few minutes. megablox/tokamax are Pallas TPU kernels: every sparse case runs
with megablox=false, i.e. jax.lax.ragged_dot, the CPU-capable grouped matmul MaxText offers.
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
  return {"name": name, "devices": devices, "what": what, "block": block, "overrides": over}


def bf16(c):
  """The same case in bfloat16 activations (weights stay float32, as MaxText's default)."""
  d = dict(c)
  d["name"] = c["name"] + "_bf16"
  d["what"] = c["what"] + " (bfloat16 activations)"
  d["overrides"] = dict(c["overrides"], dtype="bfloat16")
  return d


CASES = [
    case("sparse_ep1", 1, "sparse_matmul without expert parallelism, ragged_dot"),
    case("dense_dropless", 1, "dense_matmul dropless (capacity_factor=-1)", sparse_matmul=False),
    case("mlp_dense", 1, "the dense MlpBlock (wi_0, wi_1, wo) of a dense model", block="mlp",
         num_experts=1, num_experts_per_tok=1, decoder_block="llama2"),
    case("dense_drop_train_fsdp2", 2, "dense_matmul dropping (capacity_factor=1) in training, fsdp=2",
         mesh={"fsdp": 2}, sparse_matmul=False, capacity_factor=1.0),
    case("sparse_ep2", 2, "sparse_matmul EP=2, batch sharded by expert: ragged_all_to_all",
         mesh={"fsdp": 1, "expert": 2}),
]
CASES += [bf16(c) for c in CASES if c["name"] in ("sparse_ep1", "dense_dropless")]


def pyconfig_overrides(c):
  """key, value pairs in the order given to pyconfig (and written to config.yml)."""
  return list(c["overrides"].items())


def maxtext_version():
  return importlib.metadata.version("maxtext")


def release_base_yml():
  import maxtext  # pylint: disable=import-outside-toplevel
  return os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml")
