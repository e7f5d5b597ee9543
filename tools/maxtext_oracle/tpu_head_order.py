"""Whether TPU's scheduler ran the output head's gradient before or after the layers' backward.

Where the head is gathered over 8 or 16 devices, TPU reduces its gradient in a windowed einsum:
a while loop over the devices' shares of the head (bf16[emb/devices, vocab] accumulators in its
tuple). fit keeps the logits for that loop after the layers' backward (residue_pinned in
src/model/attention_step.cc), as most dumps run it; some run it before the layers' backward loop,
and their fullest moment then holds the loop's outputs and no logits (qwen3_30b_l2_v5e8,
qwen3_30b_l4_v5p16_dense, full_envy_switch_base_v5p32: listed 'temp 10%' or 'peak logits' in
testdata/maxtext-tpu/fit_differences.json). Which heads go first is not read yet; this tool says
which way a dump went.

It reads the largest jit_train_step module's optimized HLO (each of the entry computation's while
loops, its tuple and op_name) and its `*-live-range.txt` (the schedule), and prints in schedule
order the loops whose op_name is under jvp()/while (forward) or transpose(jvp())/while (backward):
the layer scans, and where layers are unrolled their windowed einsums' loops too; and the while
loops whose tuple holds an array with the vocabulary as a dimension. Then its verdict: "head
first" where a vocabulary loop starts before the first backward loop, else "layers first". With
unrolled layers the first backward loop can be an einsum's: read the order it prints.
Usage: tpu_head_order.py DUMP_DIR VOCAB (a directory `--xla_dump_to` wrote, as
dump_tpu_case.sh's; VOCAB the model's vocab_size). Needs only the standard library.
"""

import glob
import os
import re
import sys


def _largest(dump_dir, suffix):
  files = glob.glob(os.path.join(dump_dir, f"*jit_train_step*{suffix}"))
  if not files:
    raise SystemExit(f"tpu_head_order.py: error: {dump_dir}: no jit_train_step {suffix} in the dump")
  return max(files, key=os.path.getsize)


def loops(dump_dir, vocab):
  """[(schedule step, kind, name)] of the entry's forward, backward and vocabulary loops."""
  hlo = _largest(dump_dir, "after_optimizations.txt")
  ranges = hlo.replace(".txt", "-live-range.txt")
  if not os.path.exists(ranges):
    raise SystemExit(f"tpu_head_order.py: error: {dump_dir}: no live-range dump beside {hlo}")
  kinds = {}
  vocab_dim = re.compile(rf"[\[,]{vocab}[\],]")
  in_entry = False
  for line in open(hlo, encoding="utf-8"):
    # A computation's header (a backend config's text can also start a line: not a header).
    if line.startswith("ENTRY ") or re.match(r"%[\w.\-]+ \(", line):
      in_entry = line.startswith("ENTRY ")
      continue
    m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = (.*?) while\(", line)
    if not in_entry or not m:
      continue
    op = re.search(r'op_name="([^"]*)"', line)
    op = op.group(1) if op else ""
    if vocab_dim.search(m.group(2)):
      kinds[m.group(1)] = "vocabulary loop"
    elif "transpose(jvp())/while" in op:
      kinds[m.group(1)] = "backward loop"
    elif "jvp()/while" in op:
      kinds[m.group(1)] = "forward loop"
  order = []
  with open(ranges, encoding="utf-8") as f:
    for line in f:
      m = re.match(r"\s+(\d+):([\w.\-]+)$", line.rstrip())
      if m and m.group(2) in kinds:
        order.append((int(m.group(1)), kinds[m.group(2)], m.group(2)))
      elif line.startswith("  BufferLiveRange"):
        break
  return order


def verdict(order):
  heads = [at for at, kind, _ in order if kind == "vocabulary loop"]
  backward = [at for at, kind, _ in order if kind == "backward loop"]
  if not heads or not backward:
    return "no windowed head gradient loop" if not heads else "no backward loop"
  return "head first" if min(heads) < min(backward) else "layers first"


def main(argv):
  if len(argv) != 3 or not argv[2].isdigit():
    sys.exit(__doc__)
  order = loops(argv[1], int(argv[2]))
  for at, kind, name in order:
    print(f"{at:7d}  {kind:16s} {name}")
  print(verdict(order))


if __name__ == "__main__":
  main(sys.argv)
