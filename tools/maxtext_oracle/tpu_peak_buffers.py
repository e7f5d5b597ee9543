"""What the TPU compiler's temp holds at its fullest: the buffers live there, from its own dumps.

export_tpu_step.py compiles each step with XLA's dumps on (a temporary directory, removed after)
and records this as the fixture's "peak_buffers", so fit's memory plan can be read against
what TPU keeps rather than against one total. It reads the largest jit_train_step module's
`*-live-range.txt` (XLA's HloLiveRange: the schedule and each value's span of it), its
`*-buffer-assignment.txt` (each value's allocation, offset and size) and its optimized HLO
(each value's shape and the JAX op_name it comes from). Values at one place of one allocation
live at once are one buffer (an in-place op's output and its operand). It gives:
  - schedule_step: the fullest moment, where the live values cover the most bytes of the temp
    allocations (HloLiveRange's own "peak", report_peak_step, sums values, so it counts a shared
    buffer once per value and can name another moment: 1856 for 1867 on mixtral at batch 13);
  - unique_temp_bytes: the bytes covered there (live_temp_bytes: the values' sum);
  - heap_bytes: the largest temp allocation, what temp_size_in_bytes is made of, and
    best_fit_bytes: its buffers placed again, each when it starts, into the smallest hole
    among the buffers live then. heap_bytes less unique_temp_bytes is the heap's packing;
    best_fit_bytes says whether that allocator, run on the compiler's own buffers and
    schedule, explains it;
  - buffers: the largest buffers at the fullest moment (one entry per buffer: its largest
    value's shape, HLO op, phase (forward: jvp; backward: transpose(jvp); other:
    compiler-made, e.g. a loop's carried buffers or async copies), the tail of its op_name and
    how many values share it).
Usage (on a dump of one's own): tpu_peak_buffers.py DUMP_DIR; tpu_peak_buffers.py DUMP_DIR --at
NAME... gives the same at the start of each named instruction instead (the buffers live while
a gmm or tgmm of tpu_backward_order.py's list runs, say); tpu_peak_buffers.py DUMP_DIR --profile
EVERY gives the step's course, every EVERY schedule steps: the heap bytes covered and the
buffers of 256 MiB and more live there, counted by shape, op and phase (where a phase holds the
most, and which buffers stay across phases: a peeled loop's hoisted gathers, say);
tpu_peak_buffers.py DUMP_DIR --holes gives the heap at the fullest moment as placed: each buffer
of 16 MiB and more at its offset, and each hole of that size between them with the buffers that
last held that range before the moment and the first that holds it after (the packing, buffer
by buffer). Needs only the standard library.
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


def _load(dump):
  """The largest jit_train_step module of a dump: its values' (shape, op, op_name), the live
  range dump's text, and each temp value's (first, last, name, index, placement); None when
  the dump holds no train-step module or lacks a part."""
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
  spans = re.search(r"BufferLiveRange:\n(.*?)\n  Live ranges at", text, re.S)
  placed = _placements(ranges[-1].replace("-live-range.txt", "-buffer-assignment.txt"))
  if not spans or not placed:
    return None
  # Each temp value's span of the schedule and its place in the heap.
  temp = []
  for name, index, first, last in re.findall(r"^\s+([\w.\-]+)\{([\d,]*)\}:(\d+)-(\d+)", spans.group(1), re.M):
    where = placed.get(f"{name}{{{index}}}")
    if where is not None and where[3]:
      temp.append((int(first), int(last), name, index, where))
  return values, text, temp


def _covered(live):
  """The heap bytes the live values cover: values at one place are one buffer."""
  covered, reach = 0, {}
  for _, _, _, _, (allocation, offset, size, _) in sorted(live, key=lambda v: (v[4][0], v[4][1])):
    end = reach.get(allocation, 0)
    covered += max(0, offset + size - max(offset, end))
    reach[allocation] = max(end, offset + size)
  return covered


def _described(values, at):
  """The live values `at` as buffers (one per place in the heap, described by its largest
  value), largest first, and the values' summed bytes."""
  buffers, value_bytes = {}, 0
  for _, _, name, index, (allocation, offset, size, _) in at:
    value_bytes += size
    shape, op, op_name = values.get(name, ("", "", ""))
    if index and shape.startswith("("):  # one element of a tuple: its own shape
      parts = re.findall(r"\w+\[[\d,]*\]", shape)
      shape = parts[int(index.split(",")[0])] if int(index.split(",")[0]) < len(parts) else shape
    shape = re.sub(r"\{[^}]*\}", "", shape)[:60]
    value = {"bytes": size, "shape": shape, "op": op, "phase": _phase(op_name),
             "source": op_name.replace("jit(train_step)/", "")[-100:], "values": 1}
    kept = buffers.get((allocation, offset))
    if kept is None:
      buffers[(allocation, offset)] = value
    else:  # an in-place value: the buffer's bytes once, described by its largest value
      kept["values"] += 1
      if size > kept["bytes"]:
        kept.update({k: v for k, v in value.items() if k != "values"})
  return sorted(buffers.values(), key=lambda b: -b["bytes"]), value_bytes


def peak_buffers(dump):
  """The fullest moment's buffers from a dump directory, or None when it holds no train-step module."""
  loaded = _load(dump)
  if loaded is None:
    return None
  values, text, temp = loaded
  report = re.search(r"Live ranges at (\d+) \(peak\):", text)
  length = re.search(r"HloLiveRange \(max (\d+)\)", text)
  if not report:
    return None
  # The fullest moment: where the live values cover the most heap bytes (values at one place
  # are one buffer, an in-place op's output and its operand). HloLiveRange's own "peak" sums
  # values, so it counts a shared buffer once per value and can name another moment.
  starts = {}
  for v in temp:
    starts.setdefault(v[0], []).append(v)
  live, best = [], (-1, -1, [])
  for step in range(max((v[1] for v in temp), default=-1) + 1):
    live = [v for v in live if v[1] >= step] + starts.get(step, [])
    covered = _covered(live)
    if covered > best[0]:
      best = (covered, step, list(live))
  occupied, step, at = best
  live, value_bytes = _described(values, at)
  heap, repacked = _repacked(temp)
  return {"schedule_step": step, "schedule_length": int(length.group(1)) if length else None,
          "report_peak_step": int(report.group(1)), "live_temp_bytes": value_bytes,
          "unique_temp_bytes": occupied, "heap_bytes": heap, "best_fit_bytes": repacked,
          "buffers": live[:TOP]}


def _repacked(temp):
  """The largest temp allocation's size, and the extent of its buffers placed again best-fit in
  the schedule's order (each, when it starts, into the smallest hole among the buffers live
  then). Values at one place whose spans meet are one buffer (an in-place op's output)."""
  sizes = {}
  for v in temp:
    allocation, offset, size, _ = v[4]
    sizes[allocation] = max(sizes.get(allocation, 0), offset + size)
  if not sizes:
    return 0, 0
  main = max(sizes, key=sizes.get)
  merged = []
  for first, last, _, _, (allocation, offset, size, _) in sorted(
      (v for v in temp if v[4][0] == main), key=lambda v: (v[4][1], v[0])):
    if merged and merged[-1][2] == offset and first <= merged[-1][1] + 1:
      merged[-1][1] = max(merged[-1][1], last)
      merged[-1][3] = max(merged[-1][3], size)
    else:
      merged.append([first, last, offset, size])
  placed, extent = [], 0
  for first, last, _, size in sorted(merged, key=lambda b: (b[0], -b[3])):
    placed = [p for p in placed if p[1] >= first]  # the buffers live when this one starts
    best, end = None, 0
    for start, stop in sorted((p[2], p[2] + p[3]) for p in placed):
      if start - end >= size and (best is None or start - end < best[0]):
        best = (start - end, end)
      end = max(end, stop)
    offset = best[1] if best else end
    placed.append((first, last, offset, size))
    extent = max(extent, offset + size)
  return sizes[main], extent


def _placements(path):
  """Value ("name{index}") -> (allocation, offset, size, temp) from a buffer-assignment dump;
  temp: in the device's own temp allocation."""
  if not os.path.exists(path):
    return {}
  placed, allocation, temp = {}, None, False
  with open(path, encoding="utf-8") as f:
    for line in f:
      m = re.match(r"allocation (\d+):", line)
      if m:
        # Device memory only: color 0 (no color named); pinned_host (offloaded) is color 5.
        allocation = int(m.group(1))
        temp = "preallocated-temp" in line and " color " not in line
        continue
      m = re.match(r" value: <\d+ ([\w.\-]+)(\{[\d,]*\})?(?: \(phi\))? @\d+> \(size=(\d+),offset=(\d+)\)", line)
      if m and allocation is not None:
        placed[m.group(1) + (m.group(2) or "{}")] = (allocation, int(m.group(4)), int(m.group(3)), temp)
  return placed


def buffers_at(dump, names):
  """For each named instruction of the train step (gmm.5, tgmm.1, ...): the schedule step where
  its value starts, the heap bytes covered there and the largest buffers live there."""
  loaded = _load(dump)
  if loaded is None:
    return None
  values, _, temp = loaded
  starts = {}
  for first, _, name, _, _ in temp:
    starts[name] = min(first, starts.get(name, first))
  out = []
  for name in names:
    if name not in starts:
      out.append({"instruction": name, "error": "no temp value of that name"})
      continue
    step = starts[name]
    live = [v for v in temp if v[0] <= step <= v[1]]
    out.append({"instruction": name, "schedule_step": step, "unique_temp_bytes": _covered(live),
                "buffers": _described(values, live)[0][:TOP]})
  return out


def profile(dump, every, large=256 << 20):
  """Every `every` schedule steps: the step, the heap bytes covered there, and its buffers of
  `large` bytes or more as (count, shape, op, phase), most first."""
  loaded = _load(dump)
  if loaded is None:
    return None
  values, _, temp = loaded
  starts = {}
  for v in temp:
    starts.setdefault(v[0], []).append(v)
  out, live = [], []
  for step in range(max((v[1] for v in temp), default=-1) + 1):
    live = [v for v in live if v[1] >= step] + starts.get(step, [])
    if step % every:
      continue
    kinds = {}
    for b in _described(values, live)[0]:
      if b["bytes"] >= large:
        key = (b["shape"], b["op"], b["phase"])
        kinds[key] = kinds.get(key, 0) + 1
    out.append({"schedule_step": step, "unique_temp_bytes": _covered(live),
                "large": [{"count": n, "shape": k[0], "op": k[1], "phase": k[2]}
                          for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])]})
  return out


def holes(dump, least=16 << 20):
  """The largest temp allocation at the fullest moment, in offset order: its buffers of `least`
  bytes or more, and the holes of that size between them with what held each before and after."""
  loaded = _load(dump)
  peak = peak_buffers(dump)
  if loaded is None or peak is None:
    return None
  values, _, temp = loaded
  step = peak["schedule_step"]
  sizes = {}
  for v in temp:
    sizes[v[4][0]] = max(sizes.get(v[4][0], 0), v[4][1] + v[4][2])
  heap = [v for v in temp if v[4][0] == max(sizes, key=sizes.get)]

  def described(v):
    shape, op, op_name = values.get(v[2], ("", "", ""))
    return {"shape": re.sub(r"\{[^}]*\}", "", shape)[:60], "op": op, "span": [v[0], v[1]],
            "source": op_name.replace("jit(train_step)/", "")[-80:]}

  out, reach = [], 0
  for v in sorted((v for v in heap if v[0] <= step <= v[1]), key=lambda v: v[4][1]):
    offset, size = v[4][1], v[4][2]
    if offset - reach >= least:
      lo, hi = reach, offset
      touching = [w for w in heap if w[4][1] < hi and w[4][1] + w[4][2] > lo]
      before = sorted((w for w in touching if w[1] < step), key=lambda w: -w[1])[:2]
      after = sorted((w for w in touching if w[0] > step), key=lambda w: w[0])[:1]
      out.append({"hole": [lo, hi], "bytes": hi - lo, "before": [described(w) for w in before],
                  "after": [described(w) for w in after]})
    if offset + size > reach:
      if size >= least:
        out.append({"offset": offset, "bytes": size, **described(v)})
      reach = offset + size
  return {"schedule_step": step, "heap_bytes": peak["heap_bytes"],
          "unique_temp_bytes": peak["unique_temp_bytes"], "placed": out}


def main(argv):
  if len(argv) == 2:
    json.dump(peak_buffers(argv[1]), sys.stdout, indent=1)
  elif len(argv) > 3 and argv[2] == "--at":
    json.dump(buffers_at(argv[1], argv[3:]), sys.stdout, indent=1)
  elif len(argv) == 4 and argv[2] == "--profile" and argv[3].isdigit() and int(argv[3]) > 0:
    json.dump(profile(argv[1], int(argv[3])), sys.stdout, indent=1)
  elif len(argv) == 3 and argv[2] == "--holes":
    json.dump(holes(argv[1]), sys.stdout, indent=1)
  else:
    sys.exit(__doc__)
  sys.stdout.write("\n")


if __name__ == "__main__":
  main(sys.argv)
