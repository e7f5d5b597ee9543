"""Which order TPU's scheduler gave a compiled step's gmm backward, from its own dump.

A MoE block's backward on the gmm path runs three activation gradients (gmm custom calls) and
three weight gradients (tgmm custom calls). With memory to spare the compiler starts every
activation gradient first and the tgmms after them ("weights last"); short of memory it runs a
tgmm between them ("interleaved"), which holds fewer buffers. fit models both orders and takes
the second where the layer loop's memory passes kWeightsLastUntilHbm or the whole step the
scheduler's limit (src/model/whole_step.h, docs/fit.md), a line read with this tool from the
fixtures' dumps.

It reads the largest jit_train_step module's `*-live-range.txt` (XLA's HloLiveRange), orders
the gmm and tgmm values by the step where each starts, and looks at the three values after the
last activation gradient before the first tgmm: all tgmms, weights last; else interleaved.
Usage: tpu_backward_order.py DUMP_DIR [...] (a directory `--xla_dump_to` wrote, as
export_tpu_step.py's). Prints one line a directory. Needs only the standard library.
"""

import glob
import os
import re
import sys


def live_range_file(dump_dir):
  files = glob.glob(os.path.join(dump_dir, "*jit_train_step*live-range.txt"))
  if not files:
    raise SystemExit(f"tpu_backward_order.py: error: {dump_dir}: no jit_train_step live-range dump")
  return max(files, key=os.path.getsize)


def gmm_order(dump_dir):
  """The gmm and tgmm values of the step, in the order they start."""
  text = open(live_range_file(dump_dir)).read()
  start = {name: int(at) for name, at in re.findall(r"^\s+((?:t?gmm)\.\d+)\{\}:(\d+)-\d+", text, re.M)}
  return [name for _, name in sorted((at, name) for name, at in start.items())]


def classify(order):
  tgmms = [i for i, name in enumerate(order) if name.startswith("tgmm")]
  if not tgmms:
    return "no tgmm"
  first = tgmms[0]
  after = order[first:first + 3]
  return "weights last" if all(name.startswith("tgmm") for name in after) else "interleaved"


def main(argv):
  if not argv:
    raise SystemExit("usage: tpu_backward_order.py DUMP_DIR [...]")
  for dump_dir in argv:
    order = gmm_order(dump_dir)
    print(f"{dump_dir}\t{classify(order)}\t{' '.join(order)}")


if __name__ == "__main__":
  main(sys.argv[1:])
