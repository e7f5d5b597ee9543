#!/usr/bin/env bash
# Compiles one whole-step case of tpu_cases.py for its TPU topology with XLA's dumps kept, for
# reading by hand: tpu_peak_buffers.py DIR/dump (the fullest moment; --at NAME... for the
# buffers live where an instruction starts) and tpu_backward_order.py DIR/dump (the order of
# the MoE backward's gmms and tgmms). The fixture JSON goes to DIR/out, the log to DIR/log;
# nothing is written under testdata/ and no dump is ever committed.
# Usage: dump_tpu_case.sh CASE DIR [VENV] [key=value ...]  (VENV: build/oracle-venv)
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,7p' "$0"; exit 2; }
case_name="$1"; dir="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/../../build/oracle-venv"
if [ $# -ge 1 ] && [[ "$1" != *=* ]]; then venv="$1"; shift; fi
venv="$(cd "$venv" && pwd)"
base="$("$venv/bin/python" -c 'import maxtext, os; print(os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml"))')"
line="$("$venv/bin/python" "$here/tpu_cases.py" "$case_name")"
[ -n "$line" ] || { echo "dump_tpu_case.sh: error: $case_name: no such case in tpu_cases.py" >&2; exit 2; }
IFS=$'\t' read -r -a fields <<<"$line"
mkdir -p "$dir/dump" "$dir/out"
dir="$(cd "$dir" && pwd)"
(cd "$here" && XLA_FLAGS="--xla_dump_to=$dir/dump" nice -n 10 "$venv/bin/python" export_tpu_step.py \
   --name "$case_name" --out "$dir/out" -- "$base" "${fields[@]:1}" "$@") >"$dir/log" 2>&1
echo "dump_tpu_case.sh: $case_name compiled; dump in $dir/dump"
