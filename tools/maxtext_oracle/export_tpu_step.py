"""Whole training-step fixtures compiled by the TPU compiler (libtpu), no TPU attached.

For one case (a MaxText argv: base.yml, model_name=..., compile_topology=..., overrides) this
calls MaxText's own train_compile functions in the order its main() does (pyconfig.initialize,
get_topology_mesh, get_shaped_inputs, the Zero-1 sharding update, get_functional_train_with_
signature, jit_and_compile) and records, as one small JSON file:
  - the argv and what MaxText resolved (topology, slices, device count, the mesh);
  - memory_analysis() of the compiled step (argument, output, alias, temp, host fields, peak),
    or, when the compile fails for memory, the compiler's RESOURCE_EXHAUSTED message with the
    HBM it says it used and had;
  - cost_analysis() flops and optimal_seconds;
  - every collective of the optimized HLO grouped by (op, group size, result bytes, trip count),
    with count; a collective inside a while loop (the scan over layers) carries the loop's known
    trip count, multiplied through nested loops;
  - the state's arrays (parameters and optimizer state) and the batch: path, shape, dtype,
    PartitionSpec and bytes per device, as MaxText sharded them;
  - the buffers live at the compiler's peak, read from its own dumps (tpu_peak_buffers.py);
  - how long the compile took.
No HLO is written (the dumps go to a temporary directory, removed after). Usage:
  export_tpu_step.py --name NAME --out DIR [--] MAXTEXT_ARGV...
"""

import argparse
import collections
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("JAX_ENABLE_COMPILATION_CACHE", "false")
# The compiler's own dumps, read for the buffers live at its peak (tpu_peak_buffers.py) and
# removed after; a dump directory of the caller's own is kept and read the same way.
_DUMP_DIR = re.search(r"--xla_dump_to=(\S+)", os.environ.get("XLA_FLAGS", ""))
_OWN_DUMP = _DUMP_DIR is None
_DUMP_DIR = tempfile.mkdtemp(prefix="tpu-step-dump-") if _OWN_DUMP else _DUMP_DIR.group(1)
if _OWN_DUMP:
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_dump_to=" + _DUMP_DIR).strip()

import jax  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position

from maxtext.layers import moe as _moe  # noqa: F401  pylint: disable=wrong-import-position,unused-import
import oracle_stubs  # pylint: disable=wrong-import-position

oracle_stubs.stub_missing_modules()

from flax.core.spmd import logical_axis_rules as axis_rules  # pylint: disable=wrong-import-position
from maxtext.configs import pyconfig  # pylint: disable=wrong-import-position
from maxtext.trainers.pre_train import train  # pylint: disable=wrong-import-position
from maxtext.trainers.pre_train import train_compile  # pylint: disable=wrong-import-position
from maxtext.utils import maxtext_utils  # pylint: disable=wrong-import-position
from maxtext.utils import sharding  # pylint: disable=wrong-import-position

import hlo_collectives  # pylint: disable=wrong-import-position
import tpu_peak_buffers  # pylint: disable=wrong-import-position

MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                 "temp_size_in_bytes", "generated_code_size_in_bytes", "host_argument_size_in_bytes",
                 "host_output_size_in_bytes", "host_alias_size_in_bytes", "host_temp_size_in_bytes",
                 "host_generated_code_size_in_bytes", "peak_memory_in_bytes")

_SIZE = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _bytes_of(text):
  """'101.72G' -> bytes (the TPU compiler's OOM message prints binary units with a suffix)."""
  m = re.fullmatch(r"([\d.]+)([KMGT]?)i?B?", text)
  if not m:
    return None
  return int(round(float(m.group(1)) * _SIZE.get(m.group(2), 1)))


def parse_oom(message):
  """The compiler's figures from its RESOURCE_EXHAUSTED message."""
  out = {"message": message.strip().splitlines()[0][:600] if message.strip() else ""}
  m = re.search(r"Used ([\d.]+[KMGT]?) of ([\d.]+[KMGT]?) (\w+)", message)
  if m:
    out.update(used_bytes=_bytes_of(m.group(1)), capacity_bytes=_bytes_of(m.group(2)), memory_space=m.group(3))
  # libtpu 0.0.51: "the total memory required for HLO temporaries (97.36G) exceeds available
  # HBM (95.73G)" (the total includes the arguments).
  m = re.search(r"required for [\w ]+\(([\d.]+[KMGT]?)\) exceeds available (\w+) \(([\d.]+[KMGT]?)\)", message)
  if m:
    out.update(used_bytes=_bytes_of(m.group(1)), capacity_bytes=_bytes_of(m.group(3)), memory_space=m.group(2))
  m = re.search(r"Exceeded \w+ capacity by ([\d.]+[KMGT]?)", message)
  if m:
    out["exceeded_by_bytes"] = _bytes_of(m.group(1))
  lines = [l.strip() for l in message.splitlines() if "Ran out of memory" in l or "Used " in l]
  if lines:
    out["message"] = " ".join(lines)[:600]
  return out


_COMP = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations|called_computations|"
                    r"async_execution_thread)=\{?(%[\w.\-]+(?:,\s*%[\w.\-]+)*)\}?")
_WHILE = re.compile(r"\swhile\(.*body=%?([\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"')


def computation_multiplicity(hlo_text):
  """How many times each computation runs per step: the product of the known trip counts of
  the while loops whose bodies enclose it (1 outside any loop)."""
  comps, entry, current = collections.defaultdict(list), None, None
  for line in hlo_text.splitlines():
    m = _COMP.match(line)
    # A header's parameter list may hold /*index=5*/ comments; an instruction has ' = '.
    if m and "=" not in re.sub(r"/\*.*?\*/", "", line).split("{")[0]:
      current = m.group(2)
      if m.group(1):
        entry = current
      continue
    if current:
      comps[current].append(line)
  def trip_of(line, caller_lines):
    """A while's trip count: XLA:CPU writes known_trip_count; TPU's HLO does not, and its scan
    loops compare the counter with a constant (`compare(counter, constant(N)), direction=LT`)
    in the condition computation."""
    trip = _TRIP.search(line)
    if trip:
      return int(trip.group(1))
    cond = re.search(r"condition=%?([\w.\-]+)", line)
    for cline in comps.get(cond.group(1), ()) if cond else ():
      m = re.search(r"constant\((\d+)\)", cline)
      if m and any("direction=LT" in l for l in comps[cond.group(1)]):
        # A loop the compiler peeled an iteration off starts its counter past 0
        # (`loop_peel`: the backward loop of a 4-layer scan counts from 1 to 4, 3 trips).
        return int(m.group(1)) - counter_start(line, caller_lines)
    return 1

  def counter_start(line, caller_lines):
    """The constant the while's counter (its tuple's first element) starts from; 0 if unknown."""
    init = re.search(r"\swhile\(%?([\w.\-]+)\)", line)
    defs = {}
    for l in caller_lines:
      d = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$", l)
      if d:
        defs[d.group(1)] = d.group(2)
    name = init.group(1) if init else None
    first = re.search(r"\btuple\(%?([\w.\-]+)", defs.get(name, ""))
    name = first.group(1) if first else None
    for _ in range(4):  # through copies and bitcasts
      rhs = defs.get(name, "")
      const = re.search(r"\bconstant\((-?\d+)\)", rhs)
      if const:
        return int(const.group(1))
      via = re.search(r"\b(?:copy|bitcast)\(%?([\w.\-]+)\)", rhs)
      if not via:
        break
      name = via.group(1)
    return 0

  edges = collections.defaultdict(list)  # computation -> [(callee, factor)]
  for name, lines in comps.items():
    for line in lines:
      w = _WHILE.search(line)
      for m in _CALLS.finditer(line):
        for callee in m.group(1).split(","):
          callee = callee.strip().lstrip("%")
          factor = trip_of(line, lines) if (w and callee == w.group(1)) else 1
          edges[name].append((callee, factor))
  mult = {}

  def visit(name, factor):
    if mult.get(name, 0) >= factor:
      return
    mult[name] = factor
    for callee, f in edges.get(name, ()):
      visit(callee, factor * f)

  if entry:
    visit(entry, 1)
  return comps, mult


def _continuation_buffers(hlo_text):
  """Per fusion computation, the shapes of its parameters ("bf16[1,8,4096]").

  TPU runs a collective asynchronously as fusions: an async-collective-start (its computation
  takes the operand alone), `async_collective_fusion` continuations that let it progress
  inside a loop (a windowed einsum's) and an async-collective-done. The continuations and the
  done take the in-flight result buffer as a parameter and write the same collective again in
  their bodies: such a collective is the started one, not a new one."""
  params = {}
  for line in hlo_text.splitlines():
    m = re.match(r"^%?((?:async_collective_fusion|fused_computation)[\w.\-]*)\s*\((.*)\)\s*->", line)
    if m:
      params[m.group(1)] = set(re.findall(r"\w+\[[\d,]*\]", m.group(2)))
  return params


def collectives_with_trips(hlo_text, mesh_shape, num_slices=1):
  comps, mult = computation_multiplicity(hlo_text)
  continuing = _continuation_buffers(hlo_text)
  grouped = collections.Counter()
  for name, lines in comps.items():
    text = "\n".join(lines)
    for rec in hlo_collectives.collectives_from_hlo(text, mesh_shape):
      if name in continuing and any(r in continuing[name] for r in rec["result"]):
        continue  # a continuation of a collective started before the loop
      key = (rec["op"], rec["group_size"], rec["result_bytes"], mult.get(name, 1),
             tuple(rec["mesh_axes"] or ()))
      grouped[key] += 1
    # Between slices: the megascale sends (op dcn_all_gather, ...; result_bytes what the device
    # sends its peer slice), group_size the slices.
    for rec in hlo_collectives.megascale_sends_from_hlo(text):
      grouped[(rec["op"], num_slices, rec["result_bytes"], mult.get(name, 1), ("dcn",))] += 1
  out = []
  for (op, group, nbytes, trips, axes), count in sorted(grouped.items(), key=lambda kv: (kv[0][0], -kv[0][2])):
    out.append({"op": op, "group_size": group, "result_bytes": nbytes, "count": count, "trip_count": trips,
                "mesh_axes": list(axes)})
  return out


def _spec_text(spec):
  return str(spec)


def array_records(tree, shardings):
  """(path, shape, dtype, spec, device bytes) for every array leaf."""
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  shard_leaves = jax.tree_util.tree_leaves(shardings, is_leaf=lambda x: isinstance(x, jax.sharding.Sharding))
  out = []
  for (path, leaf), sh in zip(leaves, shard_leaves):
    if not hasattr(leaf, "shape"):
      continue
    shape = tuple(int(d) for d in leaf.shape)
    local = sh.shard_shape(shape) if hasattr(sh, "shard_shape") else shape
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
      data = jax.eval_shape(jax.random.key_data, leaf)  # a key is stored as its key data
      itemsize = int(np.prod(data.shape[len(shape):])) * np.dtype(data.dtype).itemsize
    else:
      itemsize = np.dtype(leaf.dtype).itemsize
    out.append({
        "path": jax.tree_util.keystr(path),
        "shape": list(shape),
        "dtype": str(leaf.dtype),
        "spec": _spec_text(getattr(sh, "spec", None)),
        "device_bytes": int(np.prod(local)) * itemsize,
    })
  return out


def export(name, argv):
  jax.config.update("jax_default_prng_impl", "unsafe_rbg")
  os.environ["LIBTPU_INIT_ARGS"] = (os.environ.get("LIBTPU_INIT_ARGS", "") +
                                    " --xla_tpu_spmd_rng_bit_generator_unsafe=true")
  start = time.time()
  config = pyconfig.initialize(["train_compile.py"] + argv)
  train_compile.validate_config(config)
  mesh = train_compile.get_topology_mesh(config)
  shaped_args, shaped_kwargs, state_shardings, _, model = train_compile.get_shaped_inputs(mesh, config)
  params_shardings, state_shardings = sharding.maybe_update_params_sharding_with_opt(config, state_shardings)
  input_state_shardings = sharding.build_zero1_input_state_mesh_shardings(config, state_shardings,
                                                                            params_shardings)
  data_sharding = sharding.get_input_data_sharding(config, mesh)
  func, in_shard, out_shard, static_argnums, donate_argnums = maxtext_utils.get_functional_train_with_signature(
      train.train_step, data_sharding, input_state_shardings, model, config, params_shardings)
  setup_seconds = time.time() - start
  mesh_shape = {a: int(s) for a, s in mesh.shape.items()}
  record = {
      "case": name,
      "argv": argv,
      "versions": {"maxtext": "0.2.5", "jax": jax.__version__, "libtpu": _libtpu_version(),
                   "python": platform.python_version()},
      "compile_topology": config.compile_topology,
      "compile_topology_num_slices": int(config.compile_topology_num_slices),
      "devices": int(mesh.devices.size),
      "device_kind": str(mesh.devices.flat[0].device_kind),
      "mesh": mesh_shape,
      "model_name": config.model_name,
      "resolved": {k: _plain(getattr(config, k, None)) for k in (
          "global_batch_size_to_train_on", "micro_batch_size_to_train_on", "per_device_batch_size",
          "max_target_length", "num_decoder_layers", "base_emb_dim", "base_mlp_dim", "base_moe_mlp_dim",
          "num_experts", "num_experts_per_tok", "vocab_size", "weight_dtype", "dtype", "grad_dtype",
          "mu_dtype", "opt_type", "remat_policy", "scan_layers", "attention", "sparse_matmul",
          "megablox", "logits_dot_in_fp32", "first_num_dense_layers", "decoder_block",
          "gradient_accumulation_steps", "shard_optimizer_over_data")},
      "state": array_records(shaped_args[0], input_state_shardings),
      "batch": array_records(shaped_args[1], jax.tree_util.tree_map(lambda _: data_sharding, shaped_args[1])),
  }
  try:
    compiled = train_compile.jit_and_compile(func, shaped_args, shaped_kwargs, mesh, in_shard, out_shard,
                                             static_argnums, donate_argnums, config,
                                             axis_rules(config.logical_axis_rules))
  except Exception as e:  # pylint: disable=broad-except
    message = str(e)
    if "RESOURCE_EXHAUSTED" not in message and "hbm" not in message.lower():
      raise
    record.update(status="oom", oom=parse_oom(message))
  else:
    record["status"] = "compiled"
    mem = compiled.memory_analysis()
    record["memory"] = {f: int(getattr(mem, f)) for f in MEMORY_FIELDS if hasattr(mem, f)}
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    record["cost"] = {k: float(cost[k]) for k in ("flops", "optimal_seconds", "bytes accessed") if k in cost}
    hlo = compiled.as_text()
    record["collectives"] = collectives_with_trips(hlo, mesh_shape,
                                                   int(config.compile_topology_num_slices))
    record["peak_buffers"] = tpu_peak_buffers.peak_buffers(_DUMP_DIR)
    if os.environ.get("SHARDTRACE_HLO_DIR"):  # for reading by hand; never committed
      with open(os.path.join(os.environ["SHARDTRACE_HLO_DIR"], name + ".hlo.txt"), "w", encoding="utf-8") as f:
        f.write(hlo)
  record["setup_seconds"] = round(setup_seconds, 1)
  record["compile_seconds"] = round(time.time() - start - setup_seconds, 1)
  return record


def _plain(value):
  if isinstance(value, (bool, int, float, str)) or value is None:
    return value
  return str(value)


def _libtpu_version():
  try:
    from importlib import metadata  # pylint: disable=import-outside-toplevel
    return metadata.version("libtpu")
  except Exception:  # pylint: disable=broad-except
    return None


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--name", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("argv", nargs=argparse.REMAINDER)
  args = parser.parse_args()
  argv = [a for a in args.argv if a != "--"]
  try:
    record = export(args.name, argv)
  finally:
    if _OWN_DUMP:
      shutil.rmtree(_DUMP_DIR, ignore_errors=True)
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, args.name + ".json")
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(record, f, indent=1, sort_keys=False)
    f.write("\n")
  os.replace(tmp, path)
  mem = record.get("memory") or record.get("oom")
  print(f"{args.name}: {record['status']} in {record['compile_seconds']} s: {mem}", flush=True)


if __name__ == "__main__":
  sys.exit(main())
