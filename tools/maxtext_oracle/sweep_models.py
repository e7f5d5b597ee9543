"""Sweeps every MoE model file of the release against MaxText itself (issue 27).

For each model file of testdata/maxtext-moe-models/configs/models/ and each mesh of MESHES
(one process per device count, 8 or 16: XLA fixes the fake CPU device count at start-up):
  1. loads the config as MaxText's CLI does: pyconfig.initialize([_, base.yml, model_name=M, ...]);
  2. builds MaxText's mesh (maxtext_utils.get_mesh_from_config) on those CPU devices;
  3. builds the model's own MoE decoder layer abstractly (nnx.eval_shape: shapes, dtypes and the
     NamedSharding MaxText gives each variable, no arrays), the class the model's decoder uses
     for a MoE layer, and takes its MoE block (Qwen3NextSparseMoeBlock / RoutedAndSharedMoE /
     RoutedMoE, the outermost one in the layer);
  4. records every state leaf of that block (path, variable type, dtype, global shape,
     PartitionSpec, local shard shape, shard bytes) and XLA's per-device argument bytes of a
     jit over those leaves with their shardings (memory_analysis().argument_size_in_bytes of a
     function that keeps every argument), or MaxText's (or JAX's) error where it fails.

Writes one JSON file per model into --out. Nothing of MaxText is re-implemented: the layer class
and its constructor are MaxText's; this file only chooses which layer of the model to build
(a MoE one) and reads what MaxText built.

Run (about 40 s per device count for all 35 files; `make maxtext-sweep` runs both):
  nice -n 10 /work/wt/oracle-venv/bin/python tools/maxtext_oracle/sweep_models.py \
    --devices 8 --out testdata/maxtext-moe-models/sweep     # then --devices 16
"""

import argparse
import datetime
import importlib
import importlib.metadata
import inspect
import json
import os
import sys
import time

# One process per device count (XLA fixes the fake CPU device count at start-up): --devices N,
# read before the first jax import.
DEVICES = 8
for _i, _a in enumerate(sys.argv[:-1]):
  if _a == "--devices":
    DEVICES = int(sys.argv[_i + 1])
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={DEVICES}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
from flax import nnx  # pylint: disable=wrong-import-position
from flax import linen as nn  # pylint: disable=wrong-import-position

from jax.sharding import NamedSharding  # pylint: disable=wrong-import-position

from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position
from maxtext.layers import moe, quantizations  # pylint: disable=wrong-import-position
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position
from maxtext.utils import sharding as maxtext_sharding  # pylint: disable=wrong-import-position

import oracle_stubs  # pylint: disable=wrong-import-position

oracle_stubs.stub_missing_modules()

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIGS = os.path.join(ROOT, "testdata", "maxtext-moe-models", "configs")

# The keys every case gives, MaxText and shardtrace alike (issue 27's command line). The two
# run-time keys keep pyconfig from starting a checkpoint manager or a distributed system on a
# CPU host; shardtrace reads them as keys of base.yml that change nothing it models.
COMMON = ["max_target_length=4096", "per_device_batch_size=1", "enable_checkpointing=false",
          "skip_jax_distributed_system=true"]

# The meshes of each device count. 8: pure FSDP, FSDP x expert, FSDP x tensor (every release
# MoE model has a number of experts divisible by 4). 16: pure FSDP and FSDP x 8-way expert,
# where the smallest files stop dividing.
MESHES_BY_DEVICES = {
    8: {
        "fsdp8": ["ici_fsdp_parallelism=8"],
        "fsdp2_ep4": ["ici_fsdp_parallelism=2", "ici_expert_parallelism=4"],
        "fsdp4_tp2": ["ici_fsdp_parallelism=4", "ici_tensor_parallelism=2"],
    },
    16: {
        "fsdp16": ["ici_fsdp_parallelism=16"],
        "fsdp2_ep8": ["ici_fsdp_parallelism=2", "ici_expert_parallelism=8"],
    },
}
MESHES = MESHES_BY_DEVICES[DEVICES]

# The decoder-layer class each decoder block's MoE layers are built from (nnx_decoders.py's
# get_decoder_layers with scan_layers=false; for deepseek the second class, its MoE layer).
LAYER_CLASS = {
    "deepseek": ("maxtext.models.deepseek", "DeepSeekMoELayer"),
    "deepseek4": ("maxtext.models.deepseek4", "DeepSeek4DecoderLayer"),
    "envy": ("maxtext.models.envy", "EnvyDecoderLayer"),
    "gemma4": ("maxtext.models.gemma4", "Gemma4DecoderLayer"),
    "gpt_oss": ("maxtext.models.gpt_oss", "GptOssDecoderLayer"),
    "llama4": ("maxtext.models.llama4", "Llama4DecoderLayer"),
    "mixtral": ("maxtext.models.mixtral", "MixtralDecoderLayer"),
    "qwen3_moe": ("maxtext.models.qwen3", "Qwen3MoeDecoderLayer"),
    "qwen3_custom_moe": ("maxtext.models.qwen3_custom", "Qwen3CustomMoeDecoderLayer"),
    "qwen3_next": ("maxtext.models.qwen3", "Qwen3NextDecoderLayer"),
    "qwen3_5": ("maxtext.models.qwen3_5", "Qwen3_5DecoderLayer"),
}


def _block_name(config):
  return str(getattr(config.decoder_block, "value", config.decoder_block))


def moe_layer_index(config):
  """The index of a layer the model builds as a routed MoE layer (the first such one)."""
  block = _block_name(config)
  if block == "deepseek":
    # The first MoE layer that is not an engram layer (an engram layer loads a tokenizer).
    idx = config.first_num_dense_layers
    while idx in (config.engram_layers or []):
      idx += 1
    return idx
  if block == "deepseek4":
    # The first first_num_hash_layers layers route by token-id hash; the rest by the gate.
    return config.first_num_hash_layers
  if block in ("llama4", "envy"):
    return config.interleave_moe_layer_step - 1
  return 0


def layer_class(config):
  """MaxText's MoE decoder-layer class for the config and the constructor arguments its MoE
  layer takes besides config, mesh, model_mode, rngs and quant: layer_idx, is_moe_layer, and
  where the class asks for them is_nope_layer (llama4) and attention_type (gpt-oss)."""
  module_name, class_name = LAYER_CLASS[_block_name(config)]
  module = importlib.import_module(module_name)
  cls = getattr(module, class_name)
  idx = moe_layer_index(config)
  params = inspect.signature(cls.__init__).parameters
  kwargs = {}
  if "layer_idx" in params:
    kwargs["layer_idx"] = idx
  if "is_moe_layer" in params:
    kwargs["is_moe_layer"] = True
  if "is_nope_layer" in params and hasattr(module, "determine_is_nope_layer"):
    kwargs["is_nope_layer"] = module.determine_is_nope_layer(idx, config.nope_layer_interval)
  if "attention_type" in params and hasattr(module, "get_attention_type"):
    kwargs["attention_type"] = module.get_attention_type(layer_id=idx)
  return cls, kwargs


def build_layer(config, mesh):
  """MaxText's MoE decoder layer for the config, abstract: its state (jax.eval_shape, no arrays,
  RNG state left out), the layer class and arguments, and the path and class of its MoE block."""
  cls, kwargs = layer_class(config)
  class_name = cls.__name__
  quant = quantizations.configure_quantization(config)
  found = {}

  def make():
    layer = cls(config=config, mesh=mesh, model_mode="train", rngs=nnx.Rngs(params=0, dropout=1),
                quant=quant, **kwargs)
    found["path"], found["block"] = moe_block(layer)
    return nnx.state(layer, nnx.Not(nnx.RngState))

  with jax.set_mesh(mesh), nn.logical_axis_rules(config.logical_axis_rules):
    state = jax.eval_shape(make)
  return state, class_name, kwargs, found["path"], type(found["block"]).__name__


def moe_block(layer):
  """The outermost MoE block of the layer and its path in the layer."""
  from maxtext.models import qwen3  # pylint: disable=import-outside-toplevel
  found = []
  for path, module in nnx.iter_modules(layer):
    if isinstance(module, (qwen3.Qwen3NextSparseMoeBlock, moe.RoutedAndSharedMoE, moe.RoutedMoE)):
      found.append((len(path), "/".join(str(p) for p in path), module))
  if not found:
    raise RuntimeError(f"no MoE block in {type(layer).__name__}")
  _, path, module = min(found, key=lambda f: f[0])
  return path, module


def named_sharding(var, mesh):
  """The NamedSharding MaxText gives a variable of its train state: what
  get_abstract_state_nnx computes per variable (maxtext.utils.sharding.
  get_nnx_var_named_sharding_with_scan_axis: linen's logical_to_mesh_axes under the current
  rules, where a logical name no rule maps is replicated, then the size-1 axes removed).
  flax's own get_var_pspec maps names differently (a name no rule maps passes through as a
  mesh axis name), but MaxText does not use it for its state and turns flax's eager
  variable sharding off (layers/nnx_wrappers.py: flax_always_shard_variable=False)."""
  return maxtext_sharding.get_nnx_var_named_sharding_with_scan_axis(var, mesh).get_value()


def _spec_json(spec):
  def convert(entry):
    if isinstance(entry, (tuple, list)):
      return [convert(e) for e in entry]
    return None if entry is None else str(entry)
  return [convert(e) for e in spec]


def leaves_of(state, block_path, mesh, rules):
  """Every state leaf of the block, as MaxText built and sharded it; and the first leaf of the
  rest of the layer whose sharding MaxText cannot build (the layer then fails outside the block)."""
  out, shardings, avals = [], [], []
  layer_error = None
  prefix = block_path + "/" if block_path else ""
  with nn.logical_axis_rules(rules):
    for path, var in nnx.to_flat_state(state):
      name = "/".join(str(p) for p in path)
      value = var.get_value() if hasattr(var, "get_value") else var.value
      if not name.startswith(prefix):
        if layer_error is None:
          try:
            named_sharding(var, mesh).shard_shape(tuple(value.shape))
          except Exception as e:  # pylint: disable=broad-except
            layer_error = f"{name}: {_error_line(e)}"
        continue
      try:
        sharding = named_sharding(var, mesh)
        local = list(sharding.shard_shape(tuple(value.shape)))
      except Exception as e:  # pylint: disable=broad-except
        raise RuntimeError(f"{name[len(prefix):]}: {_error_line(e)}") from e
      itemsize = np.dtype(value.dtype).itemsize
      out.append({
          "path": name[len(prefix):],
          "type": type(var).__name__,
          "dtype": str(np.dtype(value.dtype)),
          "shape": [int(d) for d in value.shape],
          "partition_spec": _spec_json(sharding.spec),
          "logical_axes": _spec_json(var.get_metadata().get("out_sharding") or []),
          "local_shape": [int(d) for d in local],
          "bytes_per_device": int(np.prod(local, dtype=np.int64)) * itemsize,
      })
      shardings.append(sharding)
      avals.append(jax.ShapeDtypeStruct(tuple(value.shape), value.dtype, sharding=sharding))
  return out, avals, shardings, layer_error


def argument_bytes(avals, shardings):
  """XLA's per-device argument bytes of a jit that keeps every leaf as a sharded argument."""
  fn = jax.jit(lambda *args: 0, in_shardings=tuple(shardings), keep_unused=True)
  return int(fn.lower(*avals).compile().memory_analysis().argument_size_in_bytes)


def _error_line(e):
  """One line: pydantic's first validation message, else the exception's first line."""
  if hasattr(e, "errors") and callable(e.errors):
    try:
      return f"{type(e).__name__}: {e.errors()[0]['msg']}"[:600]
    except Exception:  # pylint: disable=broad-except
      pass
  text = str(e).strip().splitlines()
  line = next((l for l in text if l.strip()), "")
  return f"{type(e).__name__}: {line}"[:600]


# MaxText's config validation refuses these files as given (the command line, with the
# base.yml's attention=autoselected): DeepSeek-V4 "is only supported with `dot_product` attention
# or `flash` attention with `use_tokamax_splash=True`"; the sparse indexer of deepseek3.2 and
# deepseek-custom "is only supported with dot_product attention or flash attention with tokamax
# splash"; deepseek-custom's engram layers need 'hf_access_token' and 'tokenizer_path' (its own
# header's command line gives both). Each such file gets one more case, fsdp8 as given (MaxText's
# refusal), and its three meshes run with the keys below: dot_product is the attention that runs
# on CPU, and the token is never used (no engram layer is built: the MoE layer taken is not one).
# Neither attention nor the tokenizer touches the MoE block.
DOT_PRODUCT = ["attention=dot_product"]
MODEL_KEYS = {
    "deepseek4-284b": DOT_PRODUCT,
    "deepseek4-tiny": DOT_PRODUCT,
    "deepseek3.2-671b": DOT_PRODUCT,
    "deepseek-custom": DOT_PRODUCT + ["tokenizer_path=deepseek-ai/DeepSeek-V3.2", "hf_access_token=unused"],
}


def cases_of(model):
  """(case name, overrides) of the model file: the three meshes, and the file as given."""
  keys = MODEL_KEYS.get(model, [])
  out = [(name, [f"model_name={model}"] + COMMON + keys + mesh) for name, mesh in MESHES.items()]
  if keys and DEVICES == 8:
    out.append(("fsdp8_as_given", [f"model_name={model}"] + COMMON + MESHES["fsdp8"]))
  return out


def run_case(name, overrides, base_yml):
  case = {"mesh": name, "overrides": overrides, "devices": DEVICES}
  t0 = time.time()
  stage = "pyconfig"
  try:
    config = pyconfig.initialize(["sweep_models.py", base_yml] + overrides)
    stage = "mesh"
    mesh = maxtext_utils.get_mesh_from_config(config)
    case["mesh_shape"] = {k: int(v) for k, v in mesh.shape.items() if v > 1}
    stage = "layer"
    state, class_name, kwargs, path, block = build_layer(config, mesh)
    case["layer"] = {"class": class_name, **{k: (v if isinstance(v, (int, bool)) else str(v))
                                             for k, v in kwargs.items()}}
    case["block"] = block
    case["block_path"] = path
    stage = "sharding"
    leaves, avals, shardings, layer_error = leaves_of(state, path, mesh, config.logical_axis_rules)
    if layer_error:
      case["layer_error"] = layer_error
    case["leaves"] = leaves
    case["parameter_bytes"] = sum(l["bytes_per_device"] for l in leaves)
    stage = "jit"
    case["argument_size_in_bytes"] = argument_bytes(avals, shardings)
  except Exception as e:  # pylint: disable=broad-except
    case["error"] = {"stage": stage, "message": _error_line(e)}
    for k in ("leaves", "parameter_bytes", "argument_size_in_bytes"):
      case.pop(k, None)
  return case, time.time() - t0


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", required=True)
  parser.add_argument("--only", default=None, help="comma-separated model names")
  parser.add_argument("--devices", type=int, default=8, choices=sorted(MESHES_BY_DEVICES),
                      help="fake CPU devices; the model's file keeps the other counts' cases")
  args = parser.parse_args()
  assert len(jax.devices()) == DEVICES, jax.devices()
  base_yml = os.path.join(CONFIGS, "base.yml")
  models = sorted(f[:-4] for f in os.listdir(os.path.join(CONFIGS, "models")) if f.endswith(".yml"))
  if args.only:
    models = [m for m in models if m in set(args.only.split(","))]
  os.makedirs(args.out, exist_ok=True)
  for model in models:
    timed = [run_case(name, overrides, base_yml) for name, overrides in cases_of(model)]
    path = os.path.join(args.out, f"{model}.json")
    kept = []
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        kept = [c for c in json.load(f)["cases"] if c["devices"] != DEVICES]
    cases = sorted(kept + [c for c, _ in timed], key=lambda c: c["devices"])
    record = {
        "model": model,
        "maxtext": importlib.metadata.version("maxtext"),
        "jax": jax.__version__,
        "flax": importlib.metadata.version("flax"),
        "cases": cases,
    }
    with open(path, "w", encoding="utf-8") as f:
      json.dump(record, f, indent=1)
      f.write("\n")
    for c, seconds in timed:
      what = c["error"]["message"][:160] if "error" in c else (
          f"{c['block']} {len(c['leaves'])} leaves, {c['parameter_bytes']} B, XLA {c['argument_size_in_bytes']} B")
      print(f"{model} {c['mesh']}: {what} ({seconds:.1f} s)", flush=True)
  print(f"done {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")


if __name__ == "__main__":
  main()
