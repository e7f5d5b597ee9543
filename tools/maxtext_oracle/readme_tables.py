"""The generated tables of testdata/maxtext/README.md: the case matrix, and per-device memory of
every oracle case, shardtrace's figures beside XLA's memory_analysis().

Usage: readme_tables.py FIXTURES_DIR SHARDTRACE_BINARY [README]
Prints the tables; with README, replaces the parts of README between the
`<!-- case-table:begin -->` / `<!-- memory-table:begin -->` / `<!-- step-table:begin -->` markers
and their `:end` markers. The step table (training-step cases, step.json) needs no binary.

shardtrace's side is its symbolic trace of the case (`trace --format json`, totals): weight
bytes per device, the block input's bytes per device and the memory model's peak temporaries. XLA's side is
the compiled forward pass of the same case: argument (parameters + input), output and temp
bytes. The gaps are shown as they are; nothing is tuned to close them. Needs only the standard
library and the built binary.
"""

import json
import os
import subprocess
import sys


def overrides(config_yml):
  out = []
  with open(config_yml, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line or line.startswith("#"):
        continue
      key, value = line.split(":", 1)
      value = value.strip()
      if value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
      if value.startswith("["):
        value = value.replace('"', "").replace(" ", "")
      out.append(f"{key}={value}")
  return out


def shardtrace_totals(binary, fixtures, case_dir, block):
  args = [binary, "trace", os.path.join(fixtures, "configs", "base.yml")] + overrides(
      os.path.join(case_dir, "config.yml")) + ["--format", "json"]
  if block == "mlp":
    args += ["--block", "mlp"]
  trace = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
  inputs = next((t["bytes_per_device"] for t in trace["tensors"] if t["name"] == "inputs"), None)
  # The memory model's peak of live temporaries (what the trace's `memory` section reports).
  totals = dict(trace["totals"], peak_temporary_bytes=trace["memory"]["peak_temporary_bytes"])
  return totals, inputs


def forward_cases(cases):
  """The forward cases (compiled.json); a training-step case (step.json) has its own table."""
  return [n for n in sorted(os.listdir(cases)) if not os.path.exists(os.path.join(cases, n, "step.json"))]


def step_cases(cases):
  return [n for n in sorted(os.listdir(cases)) if os.path.exists(os.path.join(cases, n, "step.json"))]


def _ops(records):
  ops = {}
  for c in records:
    ops[c["op"]] = ops.get(c["op"], 0) + 1
  return ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())) or "none"


def step_table(fixtures):
  """The training-step cases: collectives of the compiled step by pass, and its memory_analysis()."""
  rows = ["| case | devices | mesh | remat_policy | forward collectives | backward collectives (recomputed) "
          "| mixed | XLA argument | XLA output | XLA temp | saved residuals | step's forward = forward case's |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  cases = os.path.join(fixtures, "cases")
  for name in step_cases(cases):
    with open(os.path.join(cases, name, "step.json"), encoding="utf-8") as f:
      step = json.load(f)
    mesh = ", ".join(f"{k}={v}" for k, v in step["mesh"].items() if v > 1) or "1 device"
    by_pass = {p: [c for c in step["collectives"] if c["pass"] == p] for p in ("forward", "backward", "mixed")}
    recomputed = sum(c.get("recompute", False) for c in by_pass["backward"])
    backward = _ops(by_pass["backward"]) + (f" ({recomputed})" if recomputed else "")
    mem = step.get("memory_analysis")
    if mem:
      memory = " | ".join(kib(mem[k]) for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"))
    else:
      memory = "not compiled (XLA:CPU) | — | —"
    sanity = step.get("forward_sanity")
    if sanity is None:
      same = "—"
    elif sanity["equal"]:
      same = "yes"
    else:
      diff = ["+" + x for x in sanity["only_in_step_forward"]] + ["−" + x for x in sanity["only_in_forward_case"]]
      same = "no: " + ", ".join(diff)
    remat = (step.get("remat") or {}).get("remat_policy") or "—"
    rows.append(f"| {name} | {step['devices']} | {mesh} | {remat} | {_ops(by_pass['forward'])} | {backward} "
                f"| {_ops(by_pass['mixed']) if by_pass['mixed'] else '—'} | {memory} "
                f"| {kib(step['saved_residuals']['bytes_not_arguments'])} | {same} |")
  return "\n".join(rows) + "\n"


def kib(n):
  return "—" if n is None else f"{n / 1024:.1f}"


def table(fixtures, binary):
  rows = [
      "| case | devices | shardtrace weights | shardtrace input | XLA argument | argument − (weights + input) "
      "| shardtrace peak temporaries | XLA temp | XLA output |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  cases = os.path.join(fixtures, "cases")
  for name in forward_cases(cases):
    d = os.path.join(cases, name)
    with open(os.path.join(d, "compiled.json"), encoding="utf-8") as f:
      compiled = json.load(f)
    totals, inputs = shardtrace_totals(binary, fixtures, d, compiled["block"])
    mem = compiled.get("memory_analysis")
    weights = totals["weight_bytes_per_device"]
    if mem is None:
      rows.append(f"| {name} | {compiled['devices']} | {kib(weights)} | {kib(inputs)} | {'not compiled (XLA:CPU)' if 'compile_error' in compiled else '—'} "
                  f"| — | {kib(totals['peak_temporary_bytes'])} | — | — |")
      continue
    arg = mem["argument_size_in_bytes"]
    gap = arg - weights - (inputs or 0)
    rows.append(f"| {name} | {compiled['devices']} | {kib(weights)} | {kib(inputs)} | {kib(arg)} | {gap / 1024:+.1f} "
                f"| {kib(totals['peak_temporary_bytes'])} | {kib(mem['temp_size_in_bytes'])} "
                f"| {kib(mem['output_size_in_bytes'])} |")
  return "\n".join(rows) + "\n"


def case_table(fixtures):
  rows = ["| case | devices | mesh | block | numbers | HLO collectives | what it runs |", "|---|---|---|---|---|---|---|"]
  cases = os.path.join(fixtures, "cases")
  for name in forward_cases(cases):
    d = os.path.join(cases, name)
    with open(os.path.join(d, "compiled.json"), encoding="utf-8") as f:
      compiled = json.load(f)
    with open(os.path.join(d, "config.yml"), encoding="utf-8") as f:
      what = f.readline().split(": ", 1)[1].strip()
    mesh = ", ".join(f"{k}={v}" for k, v in compiled["mesh"].items() if v > 1) or "1 device"
    numbers = "yes" if os.path.exists(os.path.join(d, "tensors.npz")) else "no"
    if "collectives" in compiled:
      ops = {}
      for c in compiled["collectives"]:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
      hlo = ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())) or "none"
    else:
      hlo = "not compiled: " + compiled.get("compile_error", "")[:60].replace("|", "/")
    rows.append(f"| {name} | {compiled['devices']} | {mesh} | {compiled['block']} | {numbers} | {hlo} | {what} |")
  rows.append("")
  rows.append("Declared but not exported (`tools/maxtext_oracle/cases.py` NOT_EXPORTABLE):")
  rows.append("")
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import cases as case_matrix  # pylint: disable=import-outside-toplevel
  for what, why in case_matrix.NOT_EXPORTABLE:
    rows.append(f"- {what}: {why}.")
  return "\n".join(rows) + "\n"


def replace_between(content, marker, text):
  begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
  a, b = content.index(begin) + len(begin), content.index(end)
  return content[:a] + text + content[b:]


def main():
  fixtures, binary = sys.argv[1], sys.argv[2]
  cases, memory = case_table(fixtures), table(fixtures, binary)
  if len(sys.argv) > 3:
    readme = sys.argv[3]
    with open(readme, encoding="utf-8") as f:
      content = f.read()
    content = replace_between(replace_between(content, "case-table", cases), "memory-table", memory)
    content = replace_between(content, "step-table", step_table(fixtures))
    with open(readme, "w", encoding="utf-8") as f:
      f.write(content)
  else:
    sys.stdout.write(cases + "\n" + memory + "\n" + step_table(fixtures))


if __name__ == "__main__":
  main()
