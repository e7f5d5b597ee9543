"""Runs MaxText's own MoE / MLP blocks on fake CPU devices and records what they compute and decide.

For every case of cases.py with the given device count this process (one per device count,
because XLA fixes the number of CPU devices at start-up):
  1. loads the config as MaxText's CLI does: pyconfig.initialize([_, base.yml, k=v, ...]);
  2. builds MaxText's mesh (maxtext_utils.get_mesh_from_config) on N CPU devices;
  3. initialises RoutedMoE / RoutedAndSharedMoE / MlpBlock with a fixed seed, places every
     parameter by its own logical annotation and MaxText's rules, and runs the forward pass;
  4. writes the case: config.yml + tensors.npz (project golden format), sharding/ (MaxText's
     sharding_info files), compiled.json (collectives of the compiled HLO, memory_analysis()).
     A program XLA:CPU cannot compile (ragged-all-to-all, the sparse path with expert
     parallelism) has the collectives of the optimized HLO XLA dumps before code generation,
     no memory_analysis, and numbers from a run with jax.lax.ragged_all_to_all replaced by
     ragged_a2a.py's emulation.

Nothing of MaxText is re-implemented here. Intermediate values are recorded by wrappers that
call MaxText's own methods and keep what they return (GateLogit.__call__, RoutedMoE.get_topk,
generate_masks, generate_masks_subgroup); the activation sharding records are MaxText's own
debug_sharding dump (maxtext.utils.sharding._ACTIVATION_SHARDINGS_DUMP).
"""

import argparse
import functools
import glob
import json
import os
import sys
import tempfile
import time

# Must precede the first jax import: the fake device count is fixed when XLA starts.
_DEVICES = None
for _i, _a in enumerate(sys.argv):
  if _a == "--devices":
    _DEVICES = int(sys.argv[_i + 1])
if _DEVICES:
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             f" --xla_force_host_platform_device_count={_DEVICES}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=wrong-import-position
import jax.numpy as jnp  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
from flax import nnx  # pylint: disable=wrong-import-position
from flax import linen as nn  # pylint: disable=wrong-import-position
from jax.sharding import NamedSharding, PartitionSpec  # pylint: disable=wrong-import-position

from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position
from maxtext.layers import initializers, linears, moe  # pylint: disable=wrong-import-position
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position
from maxtext.utils import sharding as mt_sharding  # pylint: disable=wrong-import-position

import cases as case_matrix  # pylint: disable=wrong-import-position
import hlo_collectives  # pylint: disable=wrong-import-position
import gmm_v2_emulation  # pylint: disable=wrong-import-position
import ragged_a2a  # pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))


class Recorder:
  """Keeps the values MaxText's own methods return while one forward pass is traced."""

  def __init__(self):
    self.values = {}
    self.active = False

  def keep(self, name, value):
    if self.active and value is not None and name not in self.values:
      self.values[name] = value


RECORDER = Recorder()


def _install_recording_wrappers():
  """Wrap (never copy) the MaxText methods whose results are golden-format arrays."""

  def wrap(cls, method, names):
    original = getattr(cls, method)
    if getattr(original, "_shardtrace_wrapped", False):
      return

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
      result = original(self, *args, **kwargs)
      values = result if isinstance(result, tuple) else (result,)
      for name, value in zip(names, values):
        if name:
          RECORDER.keep(name, value)
      return result

    wrapper._shardtrace_wrapped = True  # pylint: disable=protected-access
    setattr(cls, method, wrapper)

  wrap(moe.GateLogit, "__call__", ("gate_logits", "pre_bias_logits"))
  wrap(moe.RoutedMoE, "generate_masks", ("dispatch_mask", "combine_mask"))
  wrap(moe.RoutedMoE, "generate_masks_subgroup", ("dispatch_mask", "combine_mask"))


def load_config(case, base_yml):
  argv = ["export.py", base_yml] + [f"{k}={_cli_value(v)}" for k, v in case_matrix.pyconfig_overrides(case)]
  return pyconfig.initialize(argv)


def _cli_value(v):
  if isinstance(v, bool):
    return "true" if v else "false"
  if isinstance(v, (list, tuple)):
    return "[" + ",".join(f"'{x}'" if isinstance(x, str) else str(x) for x in v) + "]"
  return str(v)


def build_block(case, config, mesh, seed):
  rngs = nnx.Rngs(params=seed, dropout=seed + 1)
  kernel_init = initializers.nd_dense_init(1.0, "fan_in", "truncated_normal")
  if case["block"] == "mlp":
    return linears.MlpBlock(
        config=config, mesh=mesh, in_features=config.emb_dim, intermediate_dim=config.mlp_dim,
        activations=config.mlp_activations, kernel_init=kernel_init, intermediate_dropout_rate=0.0,
        dtype=config.dtype, weight_dtype=config.weight_dtype, use_bias=config.mlp_bias, rngs=rngs)
  if case["block"] == "qwen3_next":
    # qwen3.py's Qwen3NextSparseMoeBlock builds its own initialisers (cfg.dense_init_scale).
    from maxtext.models import qwen3  # pylint: disable=import-outside-toplevel
    return qwen3.Qwen3NextSparseMoeBlock(config=config, mesh=mesh, rngs=rngs)
  if case["block"] == "shared":
    return moe.RoutedAndSharedMoE(
        config=config, mesh=mesh, kernel_init=kernel_init, kernel_axes=("embed", None), rngs=rngs,
        weight_dtype=config.weight_dtype, dtype=config.dtype)
  return moe.RoutedMoE(
      config=config, num_experts=config.num_experts, num_experts_per_tok=config.num_experts_per_tok,
      mesh=mesh, kernel_init=kernel_init, kernel_axes=("embed", None), rngs=rngs,
      intermediate_dim=config.moe_mlp_dim, weight_dtype=config.weight_dtype, dtype=config.dtype)


def _path_str(path):
  return "/".join(str(getattr(p, "key", p)) for p in path)


# The block's parameters: nnx.Param, and the router bias, which the release keeps as a MoEBiasVar.
PARAMS = (nnx.Param, moe.MoEBiasVar)

BLOCK_CLASS = {"moe": "RoutedMoE", "shared": "RoutedAndSharedMoE", "mlp": "MlpBlock",
               "qwen3_next": "Qwen3NextSparseMoeBlock"}

# Where each block keeps its routed RoutedMoE (the state path prefix, and the attribute).
ROUTED_PREFIX = {"moe": "", "shared": "MoeBlock_0/", "qwen3_next": "routed_experts/"}
ROUTED_ATTR = {"shared": "MoeBlock_0", "qwen3_next": "routed_experts"}


def param_shardings(state, mesh, rules, block_class):
  """Logical and named sharding of every parameter, from its own nnx annotation + MaxText's rules."""
  logical, named = {}, {}
  for path, var in nnx.to_flat_state(state):
    # MaxText's sharding_dump.py key form for a train state's parameter tree; the block alone,
    # under its class name where a model would put its decoder-layer path.
    name = f".params/['params']/['{block_class}']/" + "/".join(f"['{p}']" for p in path)
    axes = var.get_metadata().get("out_sharding") or var.get_metadata().get("sharding")
    value = var.get_value() if hasattr(var, "get_value") else var.value
    spec_logical = PartitionSpec(*axes) if axes else PartitionSpec()
    spec_mesh = nn.logical_to_mesh_axes(tuple(axes), rules) if axes else PartitionSpec()
    logical[name] = (spec_logical, list(value.shape))
    named[name] = (NamedSharding(mesh, spec_mesh), list(value.shape))
  return logical, named


def _json_spec(spec):
  def convert(entry):
    if isinstance(entry, tuple):
      return [convert(e) for e in entry]
    return None if entry is None else str(entry)

  return [convert(e) for e in spec]


def sharding_files(logical, named, mesh):
  named_json = {
      k: {"mesh": {"axis_names": list(mesh.axis_names), "shape": dict(mesh.shape)},
          "partition_spec": _json_spec(s.spec), "shape": shape}
      for k, (s, shape) in named.items()
  }
  logical_json = {k: {"partition_spec": _json_spec(s), "shape": shape} for k, (s, shape) in logical.items()}
  input_json = {"Activation Sharding Dump": list(mt_sharding._ACTIVATION_SHARDINGS_DUMP)}  # pylint: disable=protected-access
  return named_json, logical_json, input_json


def as_f32(a):
  """A float array as float32 NumPy (bfloat16 is exact in float32); other dtypes unchanged."""
  return np.asarray(jnp.asarray(a, jnp.float32)) if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating) else np.asarray(a)


def param_golden_names(case):
  """MaxText's parameter path (nnx state, '/'-joined) -> the golden-format array name."""
  if case["block"] == "mlp":
    names = {"wi_0/kernel": "mlp_wi_0", "wi_1/kernel": "mlp_wi_1", "wo/kernel": "mlp_wo", "wi/kernel": "mlp_wi"}
  else:
    prefix = ROUTED_PREFIX[case["block"]]
    names = {f"{prefix}gate/kernel": "gate_kernel", f"{prefix}gate/bias": "gate_bias", f"{prefix}wi_0": "wi_0",
             f"{prefix}wi_1": "wi_1", f"{prefix}wo": "wo", f"{prefix}wi_0_bias": "wi_0_bias",
             f"{prefix}wi_1_bias": "wi_1_bias", f"{prefix}wo_bias": "wo_bias",
             f"{prefix}per_expert_scale": "per_expert_scale",
             "shared_experts/wi_0/kernel": "shared_wi_0", "shared_experts/wi_1/kernel": "shared_wi_1",
             "shared_experts/wo/kernel": "shared_wo",
             "shared_expert/wi_0/kernel": "shared_wi_0", "shared_expert/wi_1/kernel": "shared_wi_1",
             "shared_expert/wo/kernel": "shared_wo", "shared_expert_gate/kernel": "shared_expert_gate",
             # fp8 weight storage: the scales beside the kernels (every one starts at 1).
             f"{prefix}wi_0_scale": "wi_0_scale", f"{prefix}wi_1_scale": "wi_1_scale",
             f"{prefix}wo_scale": "wo_scale"}
    for shared in ("shared_experts", "shared_expert"):
      names.update({f"{shared}/wi_0/kernel_scale": "shared_wi_0_scale",
                    f"{shared}/wi_1/kernel_scale": "shared_wi_1_scale",
                    f"{shared}/wo/kernel_scale": "shared_wo_scale"})
  return names


def golden_arrays(case, params_flat, inputs, outputs, recorded):
  """Map MaxText's parameter paths and recorded values onto the golden-format names."""
  f32 = as_f32
  out = {"inputs": f32(inputs)}
  names = param_golden_names(case)
  unmapped = []
  for path, value in params_flat.items():
    if path in names:
      out[names[path]] = f32(value)
    else:
      unmapped.append(path)
  out["output"] = f32(outputs[0])
  if case["block"] != "mlp":
    if outputs[1] is not None:
      out["lb_loss"] = f32(outputs[1])
    if outputs[2] is not None:
      out["bias_updates"] = f32(outputs[2])
    for name in ("gate_logits", "pre_bias_logits", "top_k_weights", "top_k_indices", "dispatch_mask",
                 "combine_mask"):
      if name in recorded and recorded[name] is not None:
        a = recorded[name]
        if name in ("dispatch_mask", "combine_mask") and a.ndim == 5:
          # generate_masks_subgroup's [B, N, S/N, E, C] (N context groups) read as [B, S, E, C].
          a = a.reshape(a.shape[0], a.shape[1] * a.shape[2], *a.shape[3:])
        out[name] = np.asarray(a, np.int32) if name == "top_k_indices" else (
            np.asarray(a, bool) if name == "dispatch_mask" else f32(a))
  return out, unmapped


class Setup:
  """One case's MaxText objects: config, mesh, rules, the block with its parameters placed, the input."""


def setup_case(case, base_yml, seed):
  """Loads the case's config, builds MaxText's mesh and block, places parameters and input as MaxText does."""
  su = Setup()
  su.config = config = load_config(case, base_yml)
  su.mesh = mesh = maxtext_utils.get_mesh_from_config(config)
  su.rules = rules = config.logical_axis_rules
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    su.block = block = build_block(case, config, mesh, seed)
  graphdef, state = nnx.split(block)
  su.logical, su.named = logical, named = param_shardings(nnx.state(block, PARAMS), mesh, rules,
                                                           BLOCK_CLASS[case["block"]])

  b, s, m = config.global_batch_size_to_train_on, config.max_target_length, config.emb_dim
  if case.get("decode"):
    s = 1
  inputs = jax.random.normal(jax.random.PRNGKey(seed + 7), (b, s, m), jnp.float32).astype(config.dtype)
  act_axes = ("activation_batch", "activation_norm_length", "activation_embed")
  # A decode batch smaller than the batch axes stays replicated on them (MaxText's own helper).
  in_spec = mt_sharding.adjust_pspec_for_indivisible_shapes(nn.logical_to_mesh_axes(act_axes, rules), (b, s, m), mesh)
  su.in_sharding = NamedSharding(mesh, in_spec)
  su.inputs = jax.device_put(inputs, su.in_sharding)

  # Parameters placed as MaxText places them: each one's own logical annotation through the rules
  # (the NamedSharding recorded in named_shardings.json). flax's tree-wide
  # nn.logical_to_mesh_sharding(nnx.get_partition_spec(state)) is not used: on these nnx states it
  # resolves 'exp' to None and would leave the experts unsharded.
  by_name = {k: v[0] for k, v in named.items()}
  def place(path, value):
    key = f".params/['params']/['{BLOCK_CLASS[case['block']]}']/" + "/".join(f"['{p}']" for p in path)
    sharding = by_name.get(key, NamedSharding(mesh, PartitionSpec()))
    return jax.device_put(value, sharding)
  flat = nnx.to_flat_state(state)
  su.graphdef = graphdef
  su.state = nnx.from_flat_state([(path, var.replace(place(path, var.get_value()))) for path, var in flat])
  return su


def call_block(case, model, x):
  """The block's call as (output, lb_loss, bias_updates), None where it returns none."""
  # Qwen3NextSparseMoeBlock takes `deterministic` and returns (output, lb_loss).
  result = model(x, deterministic=True) if case["block"] == "qwen3_next" else model(x)
  result = result if isinstance(result, tuple) else (result,)
  return tuple(result) + (None,) * (3 - len(result))


def forward_numbers(case, su, emulate_ragged):
  """(outputs, recorded): the block's outputs and the intermediates MaxText's own methods returned."""
  graphdef = su.graphdef

  def capture(state, x):
    RECORDER.values = {}
    RECORDER.active = True
    try:
      model = nnx.merge(graphdef, state)
      result = call_block(case, model, x)
      rec = dict(RECORDER.values)
    finally:
      RECORDER.active = False
    if case["block"] != "mlp" and "gate_logits" in rec:
      routed = getattr(model, ROUTED_ATTR[case["block"]]) if case["block"] in ROUTED_ATTR else model
      w, idx = routed.get_topk(rec["gate_logits"], rec.get("pre_bias_logits"), routed.rngs)
      rec["top_k_weights"], rec["top_k_indices"] = w, idx
    return result, rec

  with emulated_ragged_all_to_all(emulate_ragged), jax.set_mesh(su.mesh), nn.logical_axis_rules(su.rules):
    return jax.jit(capture)(su.state, su.inputs)


class emulated_ragged_all_to_all:  # pylint: disable=invalid-name
  """With `on`, jax.lax.ragged_all_to_all is ragged_a2a.py's emulation inside the block."""

  def __init__(self, on):
    self.on = on
    self.real = jax.lax.ragged_all_to_all

  def __enter__(self):
    if self.on:
      # moe.py looks jax.lax.ragged_all_to_all up at each call, so the swap reaches it.
      jax.lax.ragged_all_to_all = ragged_a2a.ragged_all_to_all
    return self

  def __exit__(self, *exc):
    jax.lax.ragged_all_to_all = self.real
    return False


def run_case(case, base_yml, out_dir, seed):
  t0 = time.time()
  su = setup_case(case, base_yml, seed)
  config, mesh, rules, block, graphdef, state = su.config, su.mesh, su.rules, su.block, su.graphdef, su.state
  logical, named, inputs = su.logical, su.named, su.inputs

  def forward(state, x):
    return call_block(case, nnx.merge(graphdef, state), x)

  # (c) + (b): the plain forward, traced once with debug_sharding on, compiled, inspected.
  mt_sharding.clear_input_shardings_dump()
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    lowered = jax.jit(forward).lower(state, inputs)
  named_json, logical_json, input_json = sharding_files(logical, named, mesh)
  compiled_info = {"lowered_collectives": hlo_collectives.collectives_from_stablehlo(lowered.as_text())}
  if case["overrides"].get("use_gmm_v2"):
    compiled_info["kernel"] = ("tokamax gmm v2 (a Mosaic TPU kernel no CPU program can lower) replaced by "
                               "tools/maxtext_oracle/gmm_v2_emulation.py (megablox v1 in Pallas interpret "
                               "mode + partial_sum) in the program compiled and run here; the kernel holds "
                               "no collective")
  emulate_ragged = False
  try:
    compiled = lowered.compile()
  except jax.errors.JaxRuntimeError as e:
    compiled_info["compile_error"] = str(e).splitlines()[0]
    if "ragged-all-to-all" not in compiled_info["compile_error"]:
      raise
    # XLA:CPU runs every HLO pass (SPMD partitioning included) and only then fails to emit
    # code for ragged-all-to-all. The optimized module XLA dumps at that point is the real
    # program's, so its collectives are recorded; the numbers come from the same block with
    # ragged_all_to_all emulated (ragged_a2a.py), which is never what the HLO shows.
    optimized = optimized_hlo_before_codegen(lowered)
    compiled_info["hlo_source"] = ("XLA's optimized HLO of the real program, dumped (xla_dump_to) before "
                                   "XLA:CPU code generation failed with compile_error")
    compiled_info["collectives"] = hlo_collectives.collectives_from_hlo(
        optimized, {k: int(v) for k, v in mesh.shape.items()})
    compiled_info["numbers"] = ("jax.lax.ragged_all_to_all replaced by tools/maxtext_oracle/ragged_a2a.py "
                                "(all_gather + local gather) for tensors.npz only")
    emulate_ragged = True
  else:
    mem = compiled.memory_analysis()
    compiled_info["memory_analysis"] = {
        k: int(getattr(mem, k)) for k in dir(mem) if k.endswith("_in_bytes") and not k.startswith("_")}
    compiled_info["collectives"] = hlo_collectives.collectives_from_hlo(compiled.as_text())

  # (a): numbers, with MaxText's own routing functions applied to what its gate returned.
  outputs, recorded = forward_numbers(case, su, emulate_ragged)
  params_flat = {"/".join(str(p) for p in path): (var.get_value() if hasattr(var, "get_value") else var.value)
                 for path, var in nnx.to_flat_state(nnx.state(block, PARAMS))}
  arrays, unmapped = golden_arrays(case, params_flat, inputs, outputs, recorded)
  write_case(case, config, base_yml, out_dir, arrays, unmapped, named_json, logical_json, input_json,
             compiled_info, mesh, time.time() - t0)


def optimized_hlo_before_codegen(lowered):
  """The text of XLA's optimized module for `lowered`, which XLA:CPU cannot turn into code.

  XLA dumps the module after its HLO passes (`*.cpu_after_optimizations.txt`, the module
  compiled.as_text() returns for a program that compiles) before code generation, so the
  dump exists although compile() raises.
  """
  with tempfile.TemporaryDirectory() as dump:
    try:
      lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_as_text": True})
    except jax.errors.JaxRuntimeError:
      pass
    found = glob.glob(os.path.join(dump, "*.cpu_after_optimizations.txt"))
    if len(found) != 1:
      raise RuntimeError(f"expected one optimized module dumped, found {sorted(os.listdir(dump))}")
    with open(found[0], encoding="utf-8") as f:
      return f.read()


# The line src/config/case_config.h's kCaseMarker names.
CASE_MARKER = "# shardtrace: the keys below are command-line overrides"


def write_case_config(d, comment_lines, case, base_config="../../configs/base.yml"):
  """Writes d/config.yml: the comment lines, then the case marker, its base_config and its keys.

  MaxText ran `base.yml key=value ...`: the case names that base (pyconfig's base_config,
  relative to this file) and marks its keys as command-line overrides, so shardtrace runs them
  over the model file as MaxText did (src/config/case_config.h).
  """
  lines = list(comment_lines) + [CASE_MARKER, f'base_config: "{base_config}"']
  lines += [f"{k}: {json.dumps(v)}" for k, v in case_matrix.pyconfig_overrides(case)]
  with open(os.path.join(d, "config.yml"), "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def write_case(case, config, base_yml, out_dir, arrays, unmapped, named_json, logical_json, input_json,
               compiled_info, mesh, seconds):
  d = os.path.join(out_dir, case["name"])
  os.makedirs(os.path.join(d, "sharding"), exist_ok=True)
  lines = [f"# MaxText oracle case {case['name']}: {case['what']}",
           f"# Exported by tools/maxtext_oracle/export.py from maxtext {case_matrix.maxtext_version()} "
           f"(jax {jax.__version__}) on {len(mesh.devices.flat)} CPU devices, seed {case_matrix.SEED}.",
           f"# base.yml: testdata/maxtext/configs/base.yml (the release's); block: {case['block']}",
           f"# mesh: {dict((k, v) for k, v in mesh.shape.items() if v > 1) or 'single device'}"]
  if unmapped:
    lines.append(f"# parameters without a golden-format name (not exported): {', '.join(unmapped)}")
  write_case_config(d, lines, case)
  if arrays is not None:
    np.savez_compressed(os.path.join(d, "tensors.npz"), **arrays)
  for name, obj in (("named_shardings.json", named_json), ("logical_shardings.json", logical_json),
                    ("input_shardings.json", input_json)):
    with open(os.path.join(d, "sharding", name), "w", encoding="utf-8") as f:
      json.dump(obj, f, indent=2)
      f.write("\n")
  compiled = {
      "devices": len(mesh.devices.flat),
      "mesh": {k: int(v) for k, v in mesh.shape.items()},
      "block": case["block"],
      **compiled_info,
  }
  with open(os.path.join(d, "compiled.json"), "w", encoding="utf-8") as f:
    json.dump(compiled, f, indent=1)
    f.write("\n")
  status = f"{len(compiled_info['collectives'])} collectives, {len(arrays)} arrays"
  if "numbers" in compiled_info:
    status += " (collectives from the optimized HLO XLA:CPU could not compile; ragged_all_to_all emulated)"
  print(f"{case['name']}: {status}, {seconds:.1f} s", flush=True)


def exporter_args(description):
  """The command line every case exporter takes (--devices, --out, --base-yml, --only): the parsed
  arguments and the base.yml to load (the release's unless --base-yml names one)."""
  parser = argparse.ArgumentParser(description=description,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--devices", type=int, required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--base-yml", default=None)
  parser.add_argument("--only", default=None, help="comma-separated case names")
  args = parser.parse_args()
  return args, args.base_yml or case_matrix.release_base_yml()


def main():
  args, base_yml = exporter_args(__doc__)
  _install_recording_wrappers()
  assert len(jax.devices()) == args.devices, jax.devices()
  run_selected(case_matrix.CASES, args.devices, args.only,
               lambda case: run_case(case, base_yml, args.out, case_matrix.SEED))


def run_selected(cases, devices, only, run_one):
  """Runs `run_one` on each case of `devices` devices (and in `only`, comma-separated, if given);
  a case that fails is reported and the others still run; exits 1 if any failed."""
  only = set(only.split(",")) if only else None
  failures = []
  for case in cases:
    if case["devices"] != devices or (only and case["name"] not in only):
      continue
    try:
      # A case with use_gmm_v2 runs with the TPU-only kernel emulated (gmm_v2_emulation.py).
      if case.get("overrides", {}).get("use_gmm_v2"):
        gmm_v2_emulation.install()
      try:
        run_one(case)
      finally:
        gmm_v2_emulation.uninstall()
    except Exception as e:  # pylint: disable=broad-except
      import traceback  # pylint: disable=import-outside-toplevel
      traceback.print_exc()
      failures.append((case["name"], f"{type(e).__name__}: {e}"))
  for name, err in failures:
    print(f"FAILED {name}: {err}", file=sys.stderr)
  sys.exit(1 if failures else 0)


if __name__ == "__main__":
  main()
