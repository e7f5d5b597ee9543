"""Does MaxText's own forward run where its state builds? (issue 27, the D1/D2 cases)

sweep_models.py records a model file's MoE block state on a mesh; it never runs the block. For
the cases where MaxText builds the state and shardtrace refuses the forward, this tool asks
MaxText itself: it builds the model's MoE decoder layer exactly as sweep_models.py does
(pyconfig, MaxText's mesh, the layer class the decoder uses, abstract state with MaxText's own
NamedShardings), then traces and lowers a jit of MaxText's forward on abstract inputs
(ShapeDtypeStruct: no arrays, so full-size files fit): the MoE block's __call__, or with
use_batch_split_schedule the decoder layer's __call__, which is where MaxText runs its
batch-split schedule. Lowering is where shard_map and sharding errors surface; XLA:CPU's
compile is attempted after it and reported separately (it fails on TPU-only ops such as
ragged_all_to_all for reasons of the CPU, not of the config).

Prints one JSON object per case, writes them to --out (a JSON list) when given, and with
--merge DIR records each as "forward" in the matching case of DIR/<model>.json (the sweep's
files), which tests/release_sweep_test.cc reads: a case whose state builds but whose forward
MaxText cannot lower is one MaxText cannot run, and shardtrace must refuse it.

  nice -n 10 /work/wt/oracle-venv/bin/python tools/maxtext_oracle/forward_check.py --devices 8 \
      --model deepseek3-671b-2dfsdp --mesh fsdp2_ep4
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_models as sm  # pylint: disable=wrong-import-position  (sets XLA_FLAGS from --devices)

import jax  # pylint: disable=wrong-import-position
import jax.numpy as jnp  # pylint: disable=wrong-import-position
from flax import nnx  # pylint: disable=wrong-import-position
from flax import linen as nn  # pylint: disable=wrong-import-position
from jax.sharding import NamedSharding, PartitionSpec  # pylint: disable=wrong-import-position

from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position
from maxtext.layers import quantizations  # pylint: disable=wrong-import-position
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position


def build(config, mesh):
  """The MoE decoder layer, abstract, split into graphdef and state (sweep_models' choice of
  layer and constructor arguments, attention_type and is_nope_layer included)."""
  cls, kwargs = sm.layer_class(config)
  quant = quantizations.configure_quantization(config)

  found = {}

  def make():
    layer = cls(config=config, mesh=mesh, model_mode="train", rngs=nnx.Rngs(params=0, dropout=1),
                quant=quant, **kwargs)
    _, block = sm.moe_block(layer)
    found["batch_split"] = bool(config.use_batch_split_schedule)
    target = layer if found["batch_split"] else block
    found["called"] = type(target).__name__ + ".__call__"
    graphdef, state, rngs = nnx.split(target, nnx.Not(nnx.RngState), ...)
    found["graphdef"] = graphdef
    return state, rngs

  # As sweep_models.build_layer: jax.eval_shape (MaxText turns flax's eager variable sharding
  # off; nnx.eval_shape would shard each variable by flax's own name mapping).
  with jax.set_mesh(mesh), nn.logical_axis_rules(config.logical_axis_rules):
    state, rngs = jax.eval_shape(make)
  return found, state, rngs


def abstract_state(state, mesh, rules):
  """Each state leaf as a ShapeDtypeStruct with the NamedSharding MaxText gives it."""
  with nn.logical_axis_rules(rules):
    def leaf(var):
      value = var.get_value() if hasattr(var, "get_value") else var.value
      sharding = sm.named_sharding(var, mesh)
      return var.replace(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))
    return jax.tree.map(leaf, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def run_case(model, mesh_name, base_yml, extra=()):
  overrides = ([f"model_name={model}"] + sm.COMMON + sm.MODEL_KEYS.get(model, []) + sm.MESHES[mesh_name] +
               list(extra))
  case = {"model": model, "mesh": mesh_name, "devices": sm.DEVICES, "overrides": overrides}
  stage = "pyconfig"
  t0 = time.time()
  try:
    config = pyconfig.initialize(["forward_check.py", base_yml] + overrides)
    stage = "mesh"
    mesh = maxtext_utils.get_mesh_from_config(config)
    stage = "layer"
    found, state, rngs = build(config, mesh)
    batch_split = found["batch_split"]
    graphdef = found["graphdef"]
    case["called"] = found["called"] + (" (use_batch_split_schedule)" if batch_split else "")
    stage = "sharding"
    avals = abstract_state(state, mesh, config.logical_axis_rules)
    replicated = NamedSharding(mesh, PartitionSpec())
    rng_avals = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=replicated), rngs)
    b = int(config.per_device_batch_size * len(jax.devices()))
    s = config.max_target_length
    data_spec = PartitionSpec(tuple(a for a in ("data", "fsdp", "fsdp_transpose", "expert", "context")
                                    if a in mesh.shape and mesh.shape[a] > 1) or None)
    x = jax.ShapeDtypeStruct((b, s, config.emb_dim), jnp.dtype(config.dtype),
                             sharding=NamedSharding(mesh, PartitionSpec(data_spec[0], None, None)))
    ids = jax.ShapeDtypeStruct((b, s), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec(data_spec[0], None)))

    def forward(state, rngs, x, ids):
      module = nnx.merge(graphdef, state, rngs)
      if batch_split:
        return module(x, ids, ids, True, "train")
      return module(x)

    stage = "lower"
    with jax.set_mesh(mesh), nn.logical_axis_rules(config.logical_axis_rules):
      lowered = jax.jit(forward).lower(avals, rng_avals, x, ids)
    case["lowered"] = True
    stage = "compile"
    try:
      with jax.set_mesh(mesh):
        lowered.compile()
      case["compiled"] = True
    except Exception as e:  # pylint: disable=broad-except
      case["compiled"] = False
      case["compile_error"] = sm._error_line(e)  # pylint: disable=protected-access
  except Exception as e:  # pylint: disable=broad-except
    case["error"] = {"stage": stage, "message": sm._error_line(e)}  # pylint: disable=protected-access
    if os.environ.get("FORWARD_CHECK_TRACEBACK"):
      import traceback  # pylint: disable=import-outside-toplevel
      traceback.print_exc()
  case["seconds"] = round(time.time() - t0, 1)
  return case


def merge(sweep_dir, cases):
  """Records each case's outcome as "forward" in the sweep file's case of the same mesh."""
  for case in cases:
    path = os.path.join(sweep_dir, f"{case['model']}.json")
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    outcome = {k: case[k] for k in ("called", "lowered", "compiled", "compile_error", "error") if k in case}
    outcome["tool"] = "tools/maxtext_oracle/forward_check.py"
    for c in record["cases"]:
      if c["mesh"] == case["mesh"] and c["overrides"] == case["overrides"]:
        c["forward"] = outcome
    with open(path, "w", encoding="utf-8") as f:
      json.dump(record, f, indent=1)
      f.write("\n")


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--devices", type=int, default=8)
  parser.add_argument("--model", required=True, help="comma-separated model names")
  parser.add_argument("--mesh", required=True, help="comma-separated mesh names of sweep_models.MESHES")
  parser.add_argument("--out", default=None)
  parser.add_argument("--merge", default=None, help="sweep directory whose case files get a 'forward' record")
  parser.add_argument("--extra", default="", help="comma-separated key=value overrides added to every case")
  args = parser.parse_args()
  base_yml = os.path.join(sm.CONFIGS, "base.yml")
  cases = []
  for model in args.model.split(","):
    for mesh in args.mesh.split(","):
      case = run_case(model, mesh, base_yml, [e for e in args.extra.split(",") if e])
      print(json.dumps(case), flush=True)
      cases.append(case)
  if args.merge:
    merge(args.merge, cases)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(cases, f, indent=1)
      f.write("\n")


if __name__ == "__main__":
  main()
