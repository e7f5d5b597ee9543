"""What the TPU compiler's temp holds at its peak: the buffers live there, from its own dumps.

export_tpu_step.py compiles each step with XLA's dumps on (a temporary directory, removed after)
and records this as the fixture's "peak_buffers", so fit's memory plan can be read against
what TPU keeps rather than against one total. From the largest jit_train_step module's
`*-live-range.txt` (XLA's HloLiveRange: the schedule, and the values live at its peak with
their bytes) and its optimized HLO (each value's shape and the JAX op_name it comes from), it
gives:
  - where the peak is in the schedule (step of steps);
  - the bytes live there, split into the step's arguments (the state and batch) and the rest;
  - the largest of the rest, each with its bytes, shape, HLO op, phase (forward: jvp; backward:
    transpose(jvp); other: compiler-made, e.g. a loop's carried buffers or async copies) and
    the tail of its op_name.
An in-place op's output shares its operand's buffer: live_temp_bytes sums HLO values and can pass
temp_size_in_bytes. The same module's `*-buffer-assignment.txt` gives each value its allocation
and offset; values at one offset of one allocation are one buffer, so it also gives:
  - unique_temp_bytes: the distinct buffers live at the peak (temp_size_in_bytes less this is
    the heap's packing: what no live buffer holds at the peak);
  - buffers: one entry per distinct buffer (its largest value's shape, op and source; "values":
    how many HLO values share it).
Usage (on a dump of one's own): tpu_peak_buffers.py DUMP_DIR. Needs only the standard library.
"""

import glob
import json
import os
import re
import sys

TOP = 24  # the buffers recorded, largest first


def _phase(op_name):
  name = op_name.replace("jit(train_step)/", "")
  if name.startswith("transpose("):
    return "backward"
  if name.startswith("jvp("):
    return "forward"
  return "other"


def peak_buffers(dump):
  """The peak's buffers from a dump directory, or None when it holds no train-step module."""
  ranges = sorted(glob.glob(os.path.join(dump, "*jit_train_step*-live-range.txt")), key=os.path.getsize)
  if not ranges:
    return None
  with open(ranges[-1], encoding="utf-8") as f:
    text = f.read()
  with open(ranges[-1].replace("-live-range.txt", ".txt"), encoding="utf-8") as f:
    hlo = f.read()
  values = {}
  for line in hlo.split("\n"):
    m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (.+?) ([\w\-]+)\(", line)
    if m:
      op = re.search(r'op_name="([^"]*)"', line)
      values[m.group(1)] = (m.group(2), m.group(3), op.group(1) if op else "")
  entry = hlo[hlo.index("\nENTRY"):]
  arguments = set(re.findall(r"%([\w.\-]+) = \S+ parameter\(", entry.split("\n}\n")[0]))
  peak = re.search(r"Live ranges at (\d+) \(peak\):\n(.*?)\n  Stack trace", text, re.S)
  length = re.search(r"HloLiveRange \(max (\d+)\)", text)
  if not peak:
    return None
  placed = _placements(ranges[-1].replace("-live-range.txt", "-buffer-assignment.txt"))
  live, argument_bytes, temp_bytes, by_buffer = [], 0, 0, {}
  for name, index, size in re.findall(r"^\s+([\w.\-]+)\{([\d,]*)\}: (\d+) bytes", peak.group(2), re.M):
    size = int(size)
    if name in arguments:
      argument_bytes += size
      continue
    temp_bytes += size
    shape, op, op_name = values.get(name, ("", "", ""))
    if index and shape.startswith("("):  # one element of a tuple: its own shape
      parts = re.findall(r"\w+\[[\d,]*\]", shape)
      shape = parts[int(index.split(",")[0])] if int(index.split(",")[0]) < len(parts) else shape
    shape = re.sub(r"\{[^}]*\}", "", shape)[:60]
    value = {"bytes": size, "shape": shape, "op": op, "phase": _phase(op_name),
             "source": op_name.replace("jit(train_step)/", "")[-100:], "values": 1}
    where = placed.get(f"{name}{{{index}}}")
    if where is None:  # not in the assignment (no dump of it): a buffer of its own
      live.append(value)
      continue
    kept = by_buffer.get(where)
    if kept is None:
      by_buffer[where] = value
      live.append(value)
    else:  # an in-place value: the buffer's bytes once, described by its largest value
      kept["values"] += 1
      if size > kept["bytes"]:
        kept.update({k: v for k, v in value.items() if k != "values"})
  live.sort(key=lambda b: -b["bytes"])
  return {"schedule_step": int(peak.group(1)), "schedule_length": int(length.group(1)) if length else None,
          "live_temp_bytes": temp_bytes, "unique_temp_bytes": sum(b["bytes"] for b in live),
          "live_argument_bytes": argument_bytes, "buffers": live[:TOP]}


def _placements(path):
  """Value ("name{index}") -> (allocation, offset) from a buffer-assignment dump ({} if none)."""
  if not os.path.exists(path):
    return {}
  placed, allocation = {}, None
  with open(path, encoding="utf-8") as f:
    for line in f:
      m = re.match(r"allocation (\d+):", line)
      if m:
        allocation = int(m.group(1))
        continue
      m = re.match(r" value: <\d+ ([\w.\-]+)(\{[\d,]*\})?(?: \(phi\))? @\d+> \(size=\d+,offset=(\d+)\)", line)
      if m and allocation is not None:
        placed[m.group(1) + (m.group(2) or "{}")] = (allocation, int(m.group(3)))
  return placed


def main(argv):
  if len(argv) != 2:
    sys.exit(__doc__)
  json.dump(peak_buffers(argv[1]), sys.stdout, indent=1)
  sys.stdout.write("\n")


if __name__ == "__main__":
  main(sys.argv)
