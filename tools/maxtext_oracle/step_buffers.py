"""What XLA:CPU's temp of a compiled step holds: the buffers live at its peak, and the peak of
its live temporaries without the layout copies of its dots.

Compile a step with XLA's dumps on, e.g.
  XLA_FLAGS=--xla_dump_to=/tmp/dump JAX_PLATFORMS=cpu python export_step.py --devices 1 \
      --out /tmp/out --only step_dense_dropless
then run: step_buffers.py /tmp/dump
It reads the largest jit_run module's `*-live-range.txt` (XLA's HloLiveRange: the schedule and
each value's live range) and its optimized HLO (shapes and op_name metadata), and prints:
  - the temporaries live at XLA's peak (arguments and values live to the end, the outputs, left
    out), each with its bytes and the JAX op it comes from; `copy` marks a layout copy: a fusion
    XLA names for copies and transposes only (copy_*, transpose_*, bitcast_copy*,
    bitcast_transpose*, wrapped_copy*), which XLA:CPU makes to put a dot's operand or result
    into the row-major order its dot kernels take;
  - the largest sum of live temporaries over the schedule, with and without those copies.
The copies are told by name: one may also be the only live copy of its value (a gathered weight
relaid out), so read the listing. The figures compare with shardtrace's step temporaries
(trace --step), which count no layout copies (docs/step.md, "Checked against XLA"); XLA's
temp_size_in_bytes is how its heap assigned these buffers (in-place reuse, packing), not their
sum at any one step. Needs only the standard library.
"""

import glob
import os
import re
import sys

DTYPE_BYTES = {"f32": 4, "s32": 4, "u32": 4, "bf16": 2, "f16": 2, "pred": 1, "s8": 1, "u8": 1}
COPY_PREFIXES = ("copy_", "copy.", "transpose_", "bitcast_copy", "bitcast_transpose", "wrapped_copy")


def shape_bytes(shape):
  m = re.match(r"(\w+)\[([\d,]*)\]", shape)
  if not m:
    return 0
  n = DTYPE_BYTES.get(m.group(1), 4)
  for d in m.group(2).split(","):
    if d:
      n *= int(d)
  return n


def main(dump):
  ranges = sorted(glob.glob(os.path.join(dump, "*jit_run*-live-range.txt")), key=os.path.getsize)
  if not ranges:
    sys.exit(f"step_buffers.py: no *jit_run*-live-range.txt in {dump}")
  live_range = ranges[-1]
  with open(live_range, encoding="utf-8") as f:
    text = f.read()
  with open(live_range.replace("-live-range.txt", ".txt"), encoding="utf-8") as f:
    hlo = f.read()
  entry = hlo[hlo.index("\nENTRY"):]
  size, source, params = {}, {}, set()
  for line in entry.split("\n"):
    m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (\S+) ([\w\-]+)\(", line)
    if not m:
      continue
    size[m.group(1)] = shape_bytes(m.group(2))
    if m.group(3) == "parameter":
      params.add(m.group(1))
    op = re.search(r'op_name="([^"]*)"', line)
    source[m.group(1)] = op.group(1) if op else ""
  values = [(n, int(a), int(b)) for n, a, b in re.findall(r"^\s+([\w.\-]+)\{\}:(\d+)-(\d+)$", text, re.M)]
  end = max(b for _, _, b in values)
  temps = [(n, a, b) for n, a, b in values if n not in params and b < end]
  is_copy = lambda n: n.startswith(COPY_PREFIXES)
  peak = re.search(r"Live ranges at (\d+) \(peak\)", text)
  at = int(peak.group(1)) if peak else 0
  print(f"{live_range}\nXLA's peak at schedule step {at}; temporaries live there:")
  total = copies = 0
  for n, a, b in sorted(temps, key=lambda v: -size.get(v[0], 0)):
    if a <= at <= b and size.get(n, 0) > 0:
      total += size[n]
      copies += size[n] if is_copy(n) else 0
      print(f"  {size[n]:>10} B  {'copy' if is_copy(n) else '    '}  {n:34} {source.get(n, '')[:90]}")
  print(f"  total {total} B ({total / 1024:.1f} KiB), layout copies {copies} B ({copies / 1024:.1f} KiB)")
  best_all = best_real = 0
  for t in range(end):
    live = [n for n, a, b in temps if a <= t < b]
    best_all = max(best_all, sum(size.get(n, 0) for n in live))
    best_real = max(best_real, sum(size.get(n, 0) for n in live if not is_copy(n)))
  print(f"largest sum of temporaries live at one step (from the step defining one to its last "
        f"use, exclusive): {best_all / 1024:.1f} KiB; "
        f"without layout copies {best_real / 1024:.1f} KiB")


if __name__ == "__main__":
  if len(sys.argv) != 2:
    sys.exit(__doc__)
  main(sys.argv[1])
