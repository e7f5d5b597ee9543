"""What MaxText computes when its logical rules leave the experts replicated under expert
parallelism (issue 27, known difference D1 of the release sweep).

deepseek3-671b-2dfsdp's override_logical_axis_rules map no mesh axis to 'exp' (nor to
'mlp_no_fsdp'), so on a mesh with expert parallelism MaxText's state replicates the expert dim
and sparse_matmul's shard_map in_specs hand every EP shard all E experts (P(None, None, None)),
while the tokens are exchanged by ragged_all_to_all and each shard's megablox gmm gets the group
sizes of its E/EP local experts and group_offset 0. This tool measures what that computes, on
the oracle cases of cases.py that carry those rules (shared_2dfsdp_*):

  1. with --devices 1 (a child process: XLA fixes the device count at start-up) it runs the
     case's block on one device: MaxText's reference output, and the output of the same block
     with each expert e's kernels (wi_0, wi_1, wo) replaced by expert (e mod E/EP)'s, the
     hypothesis "shard s multiplies the tokens it receives for local expert j by expert j's
     kernel instead of expert s*E/EP+j's";
  2. with the case's own device count it runs the case as export.py does (MaxText's block,
     parameters placed by its rules, jax.lax.ragged_all_to_all emulated by ragged_a2a.py) and
     compares its output with both.

Nothing of MaxText is re-implemented: the blocks, routing and gmm are MaxText's; the tool only
permutes parameter values it feeds them. Writes <out>/<case>/replicated_experts.json.

  nice -n 10 /work/wt/oracle-venv/bin/python tools/maxtext_oracle/replicated_experts.py \
      --case shared_2dfsdp_fsdp2_ep2 --out testdata/maxtext/cases
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export as ex  # pylint: disable=wrong-import-position  (sets XLA_FLAGS from --devices)
import cases as cm  # pylint: disable=wrong-import-position

import jax  # pylint: disable=wrong-import-position
import numpy as np  # pylint: disable=wrong-import-position
from flax import nnx  # pylint: disable=wrong-import-position

ROUTED_KERNELS = ("MoeBlock_0/wi_0", "MoeBlock_0/wi_1", "MoeBlock_0/wo")


def find_case(name):
  return next(c for c in cm.CASES if c["name"] == name)


def ep_of(case):
  return int(case["overrides"].get("ici_expert_parallelism", 1))


def on_one_device(case):
  """The same block, config, seed and global batch with no mesh keys: pyconfig's mesh on one
  device (per_device_batch_size scaled so the inputs, drawn from the seed by shape, are the same)."""
  d = dict(case, devices=1)
  d["overrides"] = {k: v for k, v in case["overrides"].items() if not k.startswith("ici_")}
  d["overrides"]["per_device_batch_size"] = case["overrides"]["per_device_batch_size"] * case["devices"]
  return d


def run(case, base, expert_map=None):
  """(output, wi_0) of MaxText's block; with expert_map, expert e's kernels are expert_map[e]'s."""
  su = ex.setup_case(case, base, cm.SEED)
  wi_0 = None
  flat = []
  for path, var in nnx.to_flat_state(su.state):
    name = "/".join(str(p) for p in path)
    value = var.get_value()
    if name == "MoeBlock_0/wi_0":
      wi_0 = np.asarray(value, np.float32)
    if expert_map is not None and name in ROUTED_KERNELS:
      value = jax.device_put(value[np.asarray(expert_map)], value.sharding)
    flat.append((path, var.replace(value)))
  su.state = nnx.from_flat_state(flat)
  outputs, _ = ex.forward_numbers(case, su, emulate_ragged=len(jax.devices()) > 1)
  return np.asarray(outputs[0], np.float32), wi_0


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--case", required=True)
  parser.add_argument("--out", default=os.path.join(HERE, "..", "..", "testdata", "maxtext", "cases"))
  parser.add_argument("--devices", type=int, default=None)
  parser.add_argument("--reference-npz", default=None, help="(child) write the one-device outputs here")
  args = parser.parse_args()
  ex._install_recording_wrappers()  # pylint: disable=protected-access
  base = cm.release_base_yml()
  case = find_case(args.case)
  experts = int(case["overrides"]["num_experts"])
  local = experts // ep_of(case)
  hypothesis = [e % local for e in range(experts)]

  if args.reference_npz:
    one = on_one_device(case)
    reference, wi_0 = run(one, base)
    permuted, _ = run(one, base, hypothesis)
    np.savez(args.reference_npz, reference=reference, hypothesis=permuted, wi_0=wi_0)
    return

  assert len(jax.devices()) == case["devices"], (jax.devices(), case["devices"])
  with tempfile.TemporaryDirectory() as tmp:
    npz = os.path.join(tmp, "one_device.npz")
    subprocess.run([sys.executable, __file__, "--devices", "1", "--case", args.case, "--reference-npz", npz],
                   check=True)
    one = dict(np.load(npz))
  output, wi_0 = run(case, base)
  scale = float(np.abs(one["reference"]).max())
  report = {
      "case": args.case,
      "tool": "tools/maxtext_oracle/replicated_experts.py",
      "devices": case["devices"],
      "mesh": {k[len("ici_"):-len("_parallelism")]: v for k, v in case["overrides"].items()
               if k.startswith("ici_") and v != 1},
      "num_experts": experts,
      "local_experts": local,
      "parameters_equal_to_one_device": bool(np.array_equal(wi_0, one["wi_0"])),
      "max_abs_output": scale,
      "max_abs_diff_vs_one_device": float(np.abs(output - one["reference"]).max()),
      "max_abs_diff_vs_hypothesis": float(np.abs(output - one["hypothesis"]).max()),
      "hypothesis": (f"shard s multiplies the tokens it receives for local expert j by expert j's kernels "
                     f"(wi_0, wi_1, wo) instead of expert s*{local}+j's: the one-device block with expert e's "
                     f"kernels replaced by expert (e mod {local})'s"),
  }
  report["finding"] = (
      "MaxText's output equals the hypothesis and differs from one device's"
      if report["max_abs_diff_vs_hypothesis"] <= 1e-5 * max(scale, 1.0) < report["max_abs_diff_vs_one_device"]
      else "see the differences")
  print(json.dumps(report, indent=1), flush=True)
  with open(os.path.join(args.out, args.case, "replicated_experts.json"), "w", encoding="utf-8") as f:
    json.dump(report, f, indent=1)
    f.write("\n")


if __name__ == "__main__":
  main()
