#!/usr/bin/env bash
# Compiles every whole-step TPU case of tpu_cases.py that OUT_DIR lacks, one after another
# (each takes minutes on a CPU host), niced, each with its log in TPU_LOG_DIR (/tmp/tpu-logs).
# Usage: export_tpu_all.sh OUT_DIR VENV [NAME ...]
set -uo pipefail
out="$(mkdir -p "$1" && cd "$1" && pwd)"; venv="$(cd "$2" && pwd)"; shift 2
logs="${TPU_LOG_DIR:-/tmp/tpu-logs}"; mkdir -p "$logs"
here="$(cd "$(dirname "$0")" && pwd)"
base="$("$venv/bin/python" -c 'import maxtext, os; print(os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml"))')"
mkdir -p "$out"
"$venv/bin/python" "$here/tpu_cases.py" "$@" | while IFS=$'\t' read -r name args; do
  [ -f "$out/$name.json" ] && continue
  echo "tpu: $name ($(date +%H:%M:%S))"
  # shellcheck disable=SC2086
  (cd "$here" && nice -n 10 "$venv/bin/python" export_tpu_step.py --name "$name" --out "$out" -- "$base" $args \
     >"$logs/$name.log" 2>&1) || echo "tpu: $name FAILED (log: $logs/$name.log)"
  tail -1 "$logs/$name.log"
done
