"""plan's step-time estimate beside published MaxText MoE runs (docs/plan.md's table).

For each run of testdata/published_runs.json: `shardtrace plan` with every key of the published config fixed (a
space of one config), its estimated tokens/s per device and MFU beside the published figure.
Usage: estimate.py SHARDTRACE BASE_YML  (prints the Markdown table).
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The runs each chip's matmul_efficiency was fitted to (src/model/hardware_table.yml).
FITTED = {"K1", "K3", "N13"}


def main(argv):
  shardtrace, base = argv[1], argv[2]
  runs = json.load(open(os.path.join(HERE, "..", "..", "testdata", "published_runs.json")))["runs"]
  print("| run | published tokens/s/device | plan's estimate | error | est. MFU | fits (headroom) |")
  print("|---|---|---|---|---|---|")
  errors = []
  for r in runs:
    # A run that does not set sparse_matmul ran base.yml's (true); plan would try both.
    pinned = [] if any(a.startswith("sparse_matmul=") for a in r["args"]) else ["sparse_matmul=true"]
    cmd = [shardtrace, "plan", base, "compile_topology_num_slices=1", *r["args"], *pinned, "--format", "json",
           "--quiet"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
      print(f"| {r['id']}: {r['what']} | {r['published_tokens_per_second_per_device']:,.0f} | refused: {out.stderr.strip()} | | | |")
      continue
    plan = json.loads(out.stdout)
    c = (plan["configs"] + plan["near"])[0]
    pub = r["published_tokens_per_second_per_device"]
    est = c["tokens_per_second_per_device"]
    err = est / pub - 1
    fitted = " (fitted)" if r["id"] in FITTED else ""
    if not fitted:
      errors.append(abs(err))
    print(f"| {r['id']}{fitted}: {r['what']} | {pub:,.0f} | {est:,.0f} | {err * 100:+.0f}% | "
          f"{c['mfu'] * 100:.1f}% | {'yes' if c['fits'] else 'no'} ({c['headroom_bytes'] / 2**30:.1f} GiB) |")
  errors.sort()
  if errors:
    print(f"\nOn the {len(errors)} runs not fitted: median |error| {errors[len(errors) // 2] * 100:.0f}%, "
          f"largest {errors[-1] * 100:.0f}%.")


if __name__ == "__main__":
  main(sys.argv)
