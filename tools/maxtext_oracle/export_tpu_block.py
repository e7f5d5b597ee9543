"""Block step fixtures compiled by the TPU compiler (libtpu), no TPU attached.

For every case of tpu_block_cases.TPU_BLOCK_CASES with the given device count (one process per
device count: export.py fixes the fake CPU device count at start-up) this:
  1. builds the block exactly as export_step.py does (export.setup_case: MaxText's config, mesh,
     block, seed, parameter placement and input, on N fake CPU devices);
  2. makes MaxText's mesh of the case on the devices of the TPU topology with the same device
     count (train_compile.get_topology_mesh of the config with compile_topology added), checks
     it has the CPU mesh's axes and sizes, and points every Mesh the block holds at it;
  3. jits export_step.step_functions' step (value_and_grad of the same loss, with the case's
     remat, gradients constrained to their parameters' shardings) and the forward alone, with
     every argument abstract (jax.ShapeDtypeStruct placed on the TPU mesh with its CPU
     placement's PartitionSpec), and .lower().compile()s both: compile only, nothing runs;
  4. writes testdata/maxtext-tpu/blocks/<case>/config.yml (the CPU step cases' format) and
     step.json (export_step.py's schema: collectives of the compiled step marked forward or
     backward by export_step.mark_passes, memory_analysis()) plus forward_collectives (the
     compiled forward's), TPU's all-reduce-scatter fusions marked, and the compile seconds.
No HLO is written (SHARDTRACE_HLO_DIR=DIR keeps it there for reading by hand). Usage:
  export_tpu_block.py --devices N --out DIR [--only tpu_a,tpu_b]
"""

import functools
import json
import os
import re
import sys
import time

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("JAX_ENABLE_COMPILATION_CACHE", "false")

import export  # sets XLA's fake device count from --devices before jax starts  # isort: skip
import export_step  # pylint: disable=wrong-import-order  # isort: skip
import export_tpu_step  # pylint: disable=wrong-import-order  # isort: skip
import jax  # pylint: disable=wrong-import-order
import numpy as np
from flax import linen as nn
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position,wrong-import-order
from maxtext.trainers.pre_train import train_compile  # pylint: disable=wrong-import-position,wrong-import-order

import cases as case_matrix  # pylint: disable=wrong-import-position
import hlo_collectives  # pylint: disable=wrong-import-position
import tpu_block_cases  # pylint: disable=wrong-import-position


def topology_mesh(case, base_yml):
  """MaxText's mesh of the case on the TPU topology's devices (train_compile.get_topology_mesh)."""
  argv = (["export_tpu_block.py", base_yml] +
          [f"{k}={export._cli_value(v)}" for k, v in case_matrix.pyconfig_overrides(case)] +  # pylint: disable=protected-access
          [f"compile_topology={case['topology']}", "compile_topology_num_slices=1"])
  return train_compile.get_topology_mesh(pyconfig.initialize(argv))


def retarget_meshes(module, mesh):
  """Every Mesh the block's modules hold -> mesh: Mesh attributes (RoutedMoE.mesh, its gate's, ...)
  and Mesh arguments of functools.partial attributes (MlpBlock._maybe_shard_with_logical)."""
  n = 0
  for _, node in nnx.iter_graph(module):
    if isinstance(node, nnx.Module):
      for k, v in list(vars(node).items()):
        if isinstance(v, Mesh):
          object.__setattr__(node, k, mesh)
          n += 1
        elif isinstance(v, functools.partial) and any(
            isinstance(a, Mesh) for a in list(v.args) + list(v.keywords.values())):
          args = [mesh if isinstance(a, Mesh) else a for a in v.args]
          keywords = {kk: mesh if isinstance(a, Mesh) else a for kk, a in v.keywords.items()}
          object.__setattr__(node, k, functools.partial(v.func, *args, **keywords))
          n += 1
  return n


def abstract(tree, mesh):
  """Every array leaf as a ShapeDtypeStruct on mesh, with its CPU placement's PartitionSpec."""
  def one(a):
    spec = a.sharding.spec if isinstance(a.sharding, NamedSharding) else jax.sharding.PartitionSpec()
    return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, spec))
  return jax.tree.map(one, tree)


# TPU's reduce-scatter: an all-reduce fused with the dynamic-slice of the device's share, written
# `%fusion = bf16[...] fusion(%x), kind=kCustom, calls=%all-reduce-scatter.N` (emitter
# SingleInputAllReduceScatterFusion), the all-reduce inside the called computation.
_FUSION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+fusion\(.*calls=%?(all-reduce-scatter[\w.\-]*)")


def _array_bytes(arrays):
  return hlo_collectives._bytes(arrays)  # pylint: disable=protected-access


def _tuple_elements(text):
  """The top-level elements of a tuple type '(a, (b, c), d)' -> ['a', '(b, c)', 'd']."""
  text = re.sub(r"/\*.*?\*/", "", text.strip())[1:-1]
  out, depth, start = [], 0, 0
  for i, ch in enumerate(text):
    depth += ch in "([{"
    depth -= ch in ")]}"
    if ch == "," and depth == 0:
      out.append(text[start:i].strip())
      start = i + 1
  out.append(text[start:].strip())
  return out


def tpu_collectives(hlo, mesh_shape):
  """hlo_collectives' records of a TPU module, with TPU's two forms made plain:
    - an all-reduce-scatter fusion (an all-reduce whose only user, the fused computation's root,
      slices the device's share) is one reduce-scatter record: the fusion's result and op_name,
      the inner all-reduce's groups (`all_reduce_scatter_fusion` names the fusion);
    - an async -start but all-reduce-start (all-gather-, collective-permute-,
      ragged-all-to-all-start) prints a tuple of its operand(s), its result and u32[] contexts:
      result and result_bytes are the result's (the tuple's second element) alone.
  """
  comps, _ = export_tpu_step.computation_multiplicity(hlo)
  fusion_of = {}  # called all-reduce-scatter computation -> (fusion name, result type, op_name)
  for lines in comps.values():
    for line in lines:
      m = _FUSION.match(line)
      if m:
        op_name = re.search(r'op_name="([^"]*)"', line)
        fusion_of[m.group(3)] = (m.group(1), m.group(2), op_name.group(1) if op_name else None)
  inner = {}  # all-reduce name -> its all-reduce-scatter computation
  for comp in fusion_of:
    for rec in hlo_collectives.collectives_from_hlo("\n".join(comps.get(comp, ())), mesh_shape):
      inner[rec["name"]] = comp
  # name -> result type of every async start whose result is a tuple
  starts = {m.group(1): m.group(2) for m in re.finditer(
      r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\(.*?\))\s+[\w\-]+-start\(", hlo, re.M)}
  out = []
  for rec in hlo_collectives.collectives_from_hlo(hlo, mesh_shape):
    if rec["name"] in inner:
      fusion, result_type, op_name = fusion_of[inner[rec["name"]]]
      arrays = hlo_collectives._arrays(result_type)  # pylint: disable=protected-access
      rec = dict(rec, name=f"reduce-scatter.{fusion}", op="reduce_scatter",
                 result=[f"{d}[{','.join(map(str, s))}]" for d, s in arrays], result_bytes=_array_bytes(arrays),
                 op_name=op_name, all_reduce_scatter_fusion=fusion, fused_all_reduce=rec["name"])
    elif rec["name"] in starts and rec["op"] != "all_reduce":
      arrays = hlo_collectives._arrays(_tuple_elements(starts[rec["name"]])[1])  # pylint: disable=protected-access
      rec = dict(rec, result=[f"{d}[{','.join(map(str, s))}]" for d, s in arrays], result_bytes=_array_bytes(arrays),
                 async_start=True)
    out.append(rec)
  return out


def memory(compiled):
  mem = compiled.memory_analysis()
  return {k: int(getattr(mem, k)) for k in dir(mem) if k.endswith("_in_bytes") and not k.startswith("_")}


def run_case(case, base_yml, out_dir, seed):
  t0 = time.time()
  su = export.setup_case(case, base_yml, seed)
  config, rules = su.config, su.rules
  mesh = topology_mesh(case, base_yml)
  cpu_shape = {k: int(v) for k, v in su.mesh.shape.items()}
  mesh_shape = {k: int(v) for k, v in mesh.shape.items()}
  assert mesh_shape == cpu_shape, (mesh_shape, cpu_shape)
  model = nnx.merge(su.graphdef, su.state)
  retargeted = retarget_meshes(model, mesh)
  graphdef, params, rest = nnx.split(model, export.PARAMS, ...)
  param_shardings = jax.tree.map(lambda a: NamedSharding(mesh, a.sharding.spec), params)
  in_sharding = NamedSharding(mesh, su.in_sharding.spec)
  remat_info, loss_fn, grad_step = export_step.step_functions(case, config, graphdef, rest, param_shardings,
                                                              in_sharding)
  step = grad_step(jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True))
  a_params = abstract(params, mesh)
  a_inputs = jax.ShapeDtypeStruct(su.inputs.shape, su.inputs.dtype, sharding=in_sharding)
  a_cot = jax.ShapeDtypeStruct(su.inputs.shape, np.float32, sharding=in_sharding)

  def forward(p, x):
    return export.call_block(case, nnx.merge(graphdef, p, rest), x)

  setup_seconds = time.time() - t0
  hlo_dir = os.environ.get("SHARDTRACE_HLO_DIR")
  results = {}
  for what, fn, args in (("step", step, (a_params, a_inputs, a_cot)), ("forward", forward, (a_params, a_inputs))):
    t = time.time()
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
      lowered = jax.jit(fn).lower(*args)
    lower_s = time.time() - t
    t = time.time()
    compiled = lowered.compile()
    compile_s = time.time() - t
    hlo = compiled.as_text()
    if hlo_dir:
      with open(os.path.join(hlo_dir, f"{case['name']}.{what}.hlo.txt"), "w", encoding="utf-8") as f:
        f.write(hlo)
    results[what] = {"collectives": tpu_collectives(hlo, mesh_shape), "memory_analysis": memory(compiled),
                     "lower_seconds": round(lower_s, 1), "compile_seconds": round(compile_s, 1)}
  export_step.mark_passes(results["step"]["collectives"])
  coll = results["step"]["collectives"]
  counts = {p: sum(r["pass"] == p for r in coll) for p in ("forward", "backward", "mixed")}
  step_json = {
      "devices": int(mesh.devices.size),
      "mesh": mesh_shape,
      "block": case["block"],
      "forward_case": None,
      "compiler": {"platform": "tpu", "compile_topology": case["topology"], "device_kind":
                   str(mesh.devices.flat[0].device_kind), "libtpu": _version("libtpu"), "jax": jax.__version__,
                   "maxtext": case_matrix.maxtext_version(),
                   "how": "jax.jit(...).lower(abstract arguments on the topology mesh).compile(); nothing ran"},
      "loss": {"formula": export_step.LOSS, "differentiated": "params (nnx.Param and the router's MoEBiasVar) and inputs",
               "cotangent": "a float32 array of output's shape, placed like inputs (abstract: compile only)"},
      "remat": remat_info,
      "gradient_shardings": "each gradient constrained to its parameter's sharding, grad_inputs to the input's "
                            "(a MaxText train step's out_shardings are the state's)",
      "pass_rule": export_step.PASS_RULE,
      "collective_counts": counts,
      "memory_analysis": results["step"]["memory_analysis"],
      "collectives": coll,
      "forward_memory_analysis": results["forward"]["memory_analysis"],
      "forward_collectives": results["forward"]["collectives"],
      "meshes_retargeted": retargeted,
      "seconds": {"setup": round(setup_seconds, 1),
                  "step_lower": results["step"]["lower_seconds"], "step_compile": results["step"]["compile_seconds"],
                  "forward_lower": results["forward"]["lower_seconds"],
                  "forward_compile": results["forward"]["compile_seconds"]},
  }
  write_case(case, out_dir, step_json, mesh)
  s = step_json["seconds"]
  print(f"{case['name']}: {counts['forward']} forward + {counts['backward']} backward + {counts['mixed']} mixed, "
        f"forward alone {len(results['forward']['collectives'])}; temp {step_json['memory_analysis'].get('temp_size_in_bytes')} B; "
        f"step compile {s['step_compile']} s, forward compile {s['forward_compile']} s, total {time.time() - t0:.1f} s",
        flush=True)


def write_case(case, out_dir, step_json, mesh):
  d = os.path.join(out_dir, case["name"])
  os.makedirs(d, exist_ok=True)
  lines = [f"# MaxText TPU block step case {case['name']}: {case['what']}",
           f"# Exported by tools/maxtext_oracle/export_tpu_block.py from maxtext {case_matrix.maxtext_version()} "
           f"(jax {jax.__version__}, libtpu {_version('libtpu')}): compiled for {case['topology']} "
           f"({mesh.devices.size} devices), not run.",
           f"# base.yml: testdata/maxtext/configs/base.yml (the release's); block: {case['block']}",
           f"# mesh: {dict((k, v) for k, v in mesh.shape.items() if v > 1) or 'single device'}",
           f"# step: jax.value_and_grad of loss = {export_step.LOSS}"]
  if case.get("remat"):
    lines.append(f"# wrapped as MaxText wraps an unscanned decoder layer: remat_policy={case['overrides']['remat_policy']}")
  export.write_case_config(d, lines, case, base_config="../../../maxtext/configs/base.yml")
  with open(os.path.join(d, "step.json"), "w", encoding="utf-8") as f:
    json.dump(step_json, f, indent=1)
    f.write("\n")


def _version(name):
  try:
    from importlib import metadata  # pylint: disable=import-outside-toplevel
    return metadata.version(name)
  except Exception:  # pylint: disable=broad-except
    return None


def main():
  args, base_yml = export.exporter_args(__doc__)
  assert len(jax.devices()) == args.devices, jax.devices()
  export.run_selected(tpu_block_cases.TPU_BLOCK_CASES, args.devices, args.only,
                      lambda case: run_case(case, base_yml, args.out, case_matrix.SEED))


if __name__ == "__main__":
  sys.exit(main())
