"""Training-step fixtures: jax.value_and_grad of MaxText's own block, on fake CPU devices.

For every step case of cases.STEP_CASES with the given device count (one process per device
count, as export.py), this builds the block exactly as export.py does (same config, mesh, seed,
parameter placement and input) and then:
  1. defines the step's loss, the convention of testdata/golden-format.md ("Training-step
     arrays"): loss = sum(float32(output) * cotangent) + lb_loss, with cotangent a seeded
     float32 normal array of output's shape and lb_loss as the block returns it (0 when it
     returns none; bias_updates, the loss-free bias update, is not part of the loss);
  2. optionally wraps the block the way MaxText wraps a decoder layer: the policy from
     MaxText's own NNXDecoder.get_remat_policy for the case's `remat_policy`, applied by
     MaxText's own NNXDecoder._apply_layer_with_remat (jax.checkpoint with prevent_cse from
     maxtext_utils.should_prevent_cse_in_remat);
  3. jits jax.value_and_grad(loss, argnums=(params, inputs)) under the mesh, compiles it and
     records every collective of the optimized HLO, each marked forward or backward (rule:
     PASS_RULE below), and memory_analysis() of the compiled step;
  4. runs it and writes tensors.npz: the forward golden arrays (as export.py writes them) plus
     cotangent, loss, grad_inputs and grad_<name> (float32) for every parameter array <name>.
A step XLA:CPU cannot compile (ragged-all-to-all) has the collectives of the real program's
optimized HLO (dumped before code generation) and its numbers from a run with
jax.lax.ragged_all_to_all replaced by ragged_a2a.py, whose ops (all_gather, gather, where) JAX
differentiates itself (test_ragged_a2a.py checks that VJP against the transposed NumPy model).

Usage: export_step.py --devices N --out DIR [--only step_a,step_b]
Writes DIR/<case>/{config.yml, tensors.npz, step.json}.
"""

import argparse
import json
import os
import re
import sys
import time
import types

import export  # sets XLA's fake device count from --devices before jax starts  # isort: skip
import jax  # pylint: disable=wrong-import-order
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import nnx


# nnx_decoders imports every model module, some of which import libraries the venv lacks.
import oracle_stubs  # pylint: disable=wrong-import-position

oracle_stubs.stub_missing_modules()

from maxtext.layers import nnx_decoders  # pylint: disable=wrong-import-position,wrong-import-order
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position

import cases as case_matrix  # pylint: disable=wrong-import-position
import hlo_collectives  # pylint: disable=wrong-import-position

# How a collective of the step's optimized HLO is assigned to a pass. JAX writes the name stack
# of the traced function into each instruction's metadata op_name; the backward pass is traced as
# the transpose of the linearized forward, so its ops carry `transpose(` (e.g.
# "jit(step)/transpose(jvp(RoutedMoE))/..."); forward ops carry `jvp(` only. Ops XLA creates
# itself keep the op_name of the instruction they came from.
PASS_RULE = ("backward iff the HLO instruction's metadata op_name contains 'transpose('; forward otherwise (a reshard "
             "of a step argument, op_name the argument's name, is forward and argument_reshard); a "
             "combined collective (op_name '<prefix>/(<a>:<b>:...)', one name per operand) gets parts, one per "
             "operand with its own pass, and is 'mixed' when they differ")

LOSS = "sum(float32(output) * cotangent) + lb_loss"


def remat_policy(config):
  """MaxText's own policy for config.remat_policy (NNXDecoder.get_remat_policy reads only its config)."""
  holder = types.SimpleNamespace(config=config)
  holder.minimal_policy = lambda *a, **k: nnx_decoders.NNXDecoder.minimal_policy(holder, *a, **k)
  return nnx_decoders.NNXDecoder.get_remat_policy(holder)


def _pass_of(op_name):
  return "backward" if op_name and "transpose(" in op_name else "forward"


def _recompute_of(op_name):
  """The forward a jax.checkpoint'ed block recomputes in the backward: JAX names it
  "transpose(jvp(jvp()))/remat2" (GSPMD's parameter all-gathers) or
  "transpose(jvp(jvp()))/checkpoint/rematted_computation/..." (ops inside the block) in these HLOs;
  the backward's own ops read "transpose(jvp(jvp()))/checkpoint/..." without either."""
  return bool(op_name) and "transpose(" in op_name and ("/remat2" in op_name or "rematted_computation" in op_name)


def _combined_names(op_name, n):
  """The op_names of a combined collective's n operands, or None.

  XLA's combiners (all-reduce, all-gather, reduce-scatter) merge several collectives into one
  instruction whose op_name is "<common prefix>/(<name 1>:<name 2>:...)", one name per operand,
  in operand order; the step's combiner merges forward and backward ones alike (the lb_loss
  all-reduce with the weight-gradient all-reduce).
  """
  m = re.match(r"^(.*?)/\((.*)\)$", op_name or "")
  if not m or n < 2:
    return None
  names = m.group(2).split(":")
  return [f"{m.group(1)}/{x}" for x in names] if len(names) == n else None


def mark_passes(records):
  """Adds pass, dtype and, for a combined collective, parts (one per operand) to every record."""
  for r in records:
    # A combined collective (one all-reduce of several arrays) lists each result; dtype names all.
    r["dtype"] = ",".join(sorted({a.split("[")[0] for a in r["result"]})) or None
    r["recompute"] = _recompute_of(r["op_name"])
    # GSPMD's reshard of a step argument carries the argument's name, not the name stack
    # (p['wi_0'].value, x, c = the cotangent): issued once, its result can serve both passes.
    r["argument_reshard"] = bool(r["op_name"]) and "jit(" not in r["op_name"]
    names = _combined_names(r["op_name"], len(r["result"]))
    if names is None:
      r["pass"] = _pass_of(r["op_name"])
      continue
    r["parts"] = []
    for result, name in zip(r["result"], names):
      dtype, dims = result.split("[")
      n = 1
      for d in dims.rstrip("]").split(","):
        n *= int(d) if d else 1
      r["parts"].append({"result": result, "bytes": n * hlo_collectives._DTYPE_BYTES.get(dtype, 4),  # pylint: disable=protected-access
                         "pass": _pass_of(name), "recompute": _recompute_of(name), "op_name": name})
    passes = {p["pass"] for p in r["parts"]}
    r["pass"] = passes.pop() if len(passes) == 1 else "mixed"
  return records


def forward_items(records):
  """'op gN bytesB' of every forward collective, a mixed one's forward parts one by one."""
  out = []
  for r in records:
    if r["pass"] == "forward":
      out.append(f"{r['op']} g{r['group_size']} {r['result_bytes']}B")
    elif r["pass"] == "mixed":
      out += [f"{r['op']} g{r['group_size']} {p['bytes']}B" for p in r["parts"] if p["pass"] == "forward"]
  return sorted(out)


def forward_sanity(step_records, forward_case_dir):
  """The step's forward collectives beside those of the forward case's compiled forward."""
  path = os.path.join(forward_case_dir, "compiled.json")
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    fwd = json.load(f)
  if "collectives" not in fwd:
    return None
  a = forward_items(step_records)
  b = sorted(f"{r['op']} g{r['group_size']} {r['result_bytes']}B" for r in fwd["collectives"])
  only_a, only_b = list(a), list(b)
  for x in a:
    if x in only_b:
      only_b.remove(x)
      only_a.remove(x)
  return {"forward_case": os.path.basename(forward_case_dir), "equal": not only_a and not only_b,
          "only_in_step_forward": only_a, "only_in_forward_case": only_b,
          "compared_as": "op, devices per group, result bytes per device (a mixed collective's forward parts one by one)"}


def saved_residuals(f, *args):
  """What jax.vjp of f keeps for the backward (JAX's own account, jax.ad_checkpoint's
  print_saved_residuals without the printing): the remat policy's effect, which
  memory_analysis() of one block barely shows (its peak is at the start of the backward,
  where a rematerialized block recomputes what an unwrapped one kept)."""
  from jax._src import ad_checkpoint  # pylint: disable=import-outside-toplevel
  entries = []
  for aval, source in ad_checkpoint.saved_residuals(f, *args):
    n = int(np.prod(aval.shape)) * np.dtype(aval.dtype).itemsize
    # "named 'mlpwi_0' from .../site-packages/maxtext/layers/moe.py:4254:39 (...)": the package path.
    source = re.sub(r"\S*/site-packages/", "", source)
    entries.append({"shape": list(aval.shape), "dtype": str(aval.dtype), "bytes": n, "source": source})
  return {"how": "jax._src.ad_checkpoint.saved_residuals(loss(params, inputs)): global shapes, not per device",
          "bytes": sum(e["bytes"] for e in entries),
          "bytes_not_arguments": sum(e["bytes"] for e in entries if not e["source"].startswith("from the argument")),
          "entries": entries}


def step_functions(case, config, graphdef, rest, param_shardings, in_sharding):
  """(remat_info, loss_fn, grad_step) of the case's step: loss_fn(params, x, cotangent) is the
  loss of LOSS with the block's outputs as aux, wrapped as MaxText wraps a decoder layer when the
  case has remat; grad_step(value_and_grad_fn) constrains the gradients to their arguments'
  shardings. export_tpu_block.py compiles the same step for a TPU topology."""
  policy_name = case["overrides"].get("remat_policy") if case.get("remat") else None
  remat_info, policy, prevent_cse = None, None, False
  if case.get("remat"):
    policy = remat_policy(config)
    prevent_cse = maxtext_utils.should_prevent_cse_in_remat(config)
    remat_info = {
        "remat_policy": policy_name,
        "policy": "NNXDecoder.get_remat_policy (maxtext.layers.nnx_decoders) of the case's config",
        "policy_saves": None if policy is None else "save_only_these_names, see nnx_decoders.py",
        "wrapped_by": "NNXDecoder._apply_layer_with_remat: jax.checkpoint(layer, policy, prevent_cse)",
        "prevent_cse": bool(prevent_cse),
    }

  def loss_fn(params, x, cot):
    # The non-parameter variables (the block's Rngs) as new Variables of this trace: the remat
    # helper writes the layer's state back (nnx.update), which flax refuses for Variables
    # created outside the traced function.
    block = nnx.merge(graphdef, params, jax.tree.map(lambda v: v, rest))
    if case.get("remat"):
      # MaxText's helper for one unscanned layer; it uses none of the decoder's own state.
      out = nnx_decoders.NNXDecoder._apply_layer_with_remat(None, block, x, policy, prevent_cse)  # pylint: disable=protected-access
      out = out if isinstance(out, tuple) else (out,)
      outputs = tuple(out) + (None,) * (3 - len(out))
    else:
      outputs = export.call_block(case, block, x)
    output, lb_loss, _ = outputs
    loss = jnp.sum(output.astype(jnp.float32) * cot)
    if lb_loss is not None:
      loss = loss + lb_loss.astype(jnp.float32)
    return loss, outputs

  # The gradients placed as a MaxText train step places them: its jit's out_shardings are the
  # state's shardings (maxtext_utils.get_functional_train_with_signature), so the update, and
  # with it each gradient, is sharded like its parameter (param_shardings); without this XLA
  # would be free to keep the gradients replicated (all-reduce where the step reduce-scatters).

  def grad_step(value_and_grad_fn):
    def run(p, x, c):
      value, (grad_p, grad_x) = value_and_grad_fn(p, x, c)
      grad_p = jax.tree.map(jax.lax.with_sharding_constraint, grad_p, param_shardings)
      return value, (grad_p, jax.lax.with_sharding_constraint(grad_x, in_sharding))
    return run

  return remat_info, loss_fn, grad_step


def run_step_case(case, base_yml, out_dir, forward_dir, seed):
  t0 = time.time()
  su = export.setup_case(case, base_yml, seed)
  config, mesh, rules = su.config, su.mesh, su.rules
  model = nnx.merge(su.graphdef, su.state)
  graphdef, params, rest = nnx.split(model, export.PARAMS, ...)

  out_shape = su.inputs.shape  # every block maps [B, S, M] to [B, S, M]
  cotangent = jax.device_put(jax.random.normal(jax.random.PRNGKey(seed + 11), out_shape, jnp.float32),
                             su.in_sharding)

  param_shardings = jax.tree.map(lambda a: a.sharding, params)
  remat_info, loss_fn, grad_step = step_functions(case, config, graphdef, rest, param_shardings, su.in_sharding)
  step = grad_step(jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True))

  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    lowered = jax.jit(step).lower(params, su.inputs, cotangent)
    residuals = saved_residuals(lambda p, x: loss_fn(p, x, cotangent)[0], params, su.inputs)
  info = {}
  emulate_ragged = False
  try:
    compiled = lowered.compile()
  except jax.errors.JaxRuntimeError as e:
    info["compile_error"] = str(e).splitlines()[0]
    if "ragged-all-to-all" not in info["compile_error"]:
      raise
    optimized = export.optimized_hlo_before_codegen(lowered)
    info["hlo_source"] = ("XLA's optimized HLO of the real step, dumped (xla_dump_to) before XLA:CPU code "
                          "generation failed with compile_error")
    info["collectives"] = hlo_collectives.collectives_from_hlo(optimized, {k: int(v) for k, v in mesh.shape.items()})
    info["numbers"] = ("jax.lax.ragged_all_to_all replaced by tools/maxtext_oracle/ragged_a2a.py (all_gather + "
                       "local gather, differentiated by JAX) for tensors.npz only")
    emulate_ragged = True
  else:
    mem = compiled.memory_analysis()
    info["memory_analysis"] = {k: int(getattr(mem, k)) for k in dir(mem)
                               if k.endswith("_in_bytes") and not k.startswith("_")}
    info["collectives"] = hlo_collectives.collectives_from_hlo(compiled.as_text())
  mark_passes(info["collectives"])

  # The numbers: the step itself, and the forward golden arrays as export.py records them.
  with export.emulated_ragged_all_to_all(emulate_ragged), jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    # A new function object: jit's cache would otherwise hand back the program traced above with
    # the real ragged_all_to_all.
    numbers_step = grad_step(jax.value_and_grad(lambda p, x, c: loss_fn(p, x, c), argnums=(0, 1), has_aux=True))
    (loss, outputs), (grad_params, grad_inputs) = jax.jit(numbers_step)(params, su.inputs, cotangent)
  fwd_outputs, recorded = export.forward_numbers(case, su, emulate_ragged)
  params_flat = {"/".join(str(p) for p in path): v.get_value() for path, v in nnx.to_flat_state(params)}
  arrays, unmapped = export.golden_arrays(case, params_flat, su.inputs, fwd_outputs, recorded)
  names = export.param_golden_names(case)
  for path, v in nnx.to_flat_state(grad_params):
    key = "/".join(str(p) for p in path)
    if key in names:
      arrays["grad_" + names[key]] = export.as_f32(v.get_value())
  arrays["cotangent"] = export.as_f32(cotangent)
  arrays["loss"] = np.asarray(loss, np.float32)
  arrays["grad_inputs"] = export.as_f32(grad_inputs)
  # The step's own output must be the forward's (same block, same numbers).
  step_vs_forward = float(np.max(np.abs(export.as_f32(outputs[0]) - arrays["output"])))

  counts = {p: sum(r["pass"] == p for r in info["collectives"]) for p in ("forward", "backward", "mixed")}
  step_json = {
      "devices": len(mesh.devices.flat),
      "mesh": {k: int(v) for k, v in mesh.shape.items()},
      "block": case["block"],
      "forward_case": case["forward"],
      "loss": {"formula": LOSS, "value": float(loss),
               "lb_loss": None if outputs[1] is None else float(outputs[1]),
               "differentiated": "params (nnx.Param and the router's MoEBiasVar) and inputs",
               "cotangent": f"jax.random.normal(PRNGKey({seed + 11}), output.shape, float32), placed like inputs"},
      "remat": remat_info,
      "gradient_shardings": "each grad_<name> constrained to its parameter's sharding, grad_inputs to the input's "
                            "(a MaxText train step's out_shardings are the state's)",
      "pass_rule": PASS_RULE,
      "saved_residuals": residuals,
      "collective_counts": counts,
      **info,
      "step_output_max_abs_diff_vs_forward": step_vs_forward,
  }
  # A variant (cases.step_variant) changes its forward case's dims or mesh, and a case with no
  # forward case (cases.py's ep2plan block) has none: nothing to compare.
  sanity = None if case.get("variant") or case["forward"] is None else forward_sanity(
      info["collectives"], os.path.join(forward_dir, case["forward"]))
  if sanity is not None:
    step_json["forward_sanity"] = sanity
  write_step_case(case, config, out_dir, arrays, unmapped, step_json, mesh)
  status = (f"{counts['forward']} forward + {counts['backward']} backward + {counts['mixed']} mixed collectives, {len(arrays)} arrays, "
            f"loss {float(loss):.6g}")
  if emulate_ragged:
    status += " (collectives from the optimized HLO XLA:CPU could not compile; ragged_all_to_all emulated)"
  if sanity is not None:
    status += f", forward collectives {'==' if sanity['equal'] else '!='} {case['forward']}'s"
  if "memory_analysis" in info:
    m = info["memory_analysis"]
    status += f", temp {m.get('temp_size_in_bytes')} B"
  print(f"{case['name']}: {status}, {time.time() - t0:.1f} s", flush=True)


def write_step_case(case, config, out_dir, arrays, unmapped, step_json, mesh):
  d = os.path.join(out_dir, case["name"])
  os.makedirs(d, exist_ok=True)
  lines = [f"# MaxText oracle step case {case['name']}: {case['what']}",
           f"# Exported by tools/maxtext_oracle/export_step.py from maxtext {case_matrix.maxtext_version()} "
           f"(jax {jax.__version__}) on {len(mesh.devices.flat)} CPU devices, seed {case_matrix.SEED}.",
           f"# base.yml: testdata/maxtext/configs/base.yml (the release's); block: {case['block']}",
           f"# mesh: {dict((k, v) for k, v in mesh.shape.items() if v > 1) or 'single device'}",
           f"# step: jax.value_and_grad of loss = {LOSS}; "
           + (f"the forward case is {case['forward']}" if case["forward"] else "no forward case")]
  if case.get("remat"):
    lines.append(f"# wrapped as MaxText wraps an unscanned decoder layer: remat_policy={case['overrides']['remat_policy']}")
  if unmapped:
    lines.append(f"# parameters without a golden-format name (not exported): {', '.join(unmapped)}")
  export.write_case_config(d, lines, case)
  np.savez_compressed(os.path.join(d, "tensors.npz"), **arrays)
  with open(os.path.join(d, "step.json"), "w", encoding="utf-8") as f:
    json.dump(step_json, f, indent=1)
    f.write("\n")


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--devices", type=int, required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--forward-cases", default=None,
                      help="directory of the forward cases (default: --out) for the forward sanity comparison")
  parser.add_argument("--base-yml", default=None)
  parser.add_argument("--only", default=None, help="comma-separated case names")
  args = parser.parse_args()
  base_yml = args.base_yml or case_matrix.release_base_yml()
  export._install_recording_wrappers()  # pylint: disable=protected-access
  assert len(jax.devices()) == args.devices, jax.devices()
  export.run_selected(
      case_matrix.STEP_CASES, args.devices, args.only,
      lambda case: run_step_case(case, base_yml, args.out, args.forward_cases or args.out, case_matrix.SEED))

if __name__ == "__main__":
  main()
