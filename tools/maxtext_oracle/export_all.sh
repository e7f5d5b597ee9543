#!/usr/bin/env bash
# Regenerates every MaxText oracle fixture into OUT (default testdata/maxtext):
#   OUT/cases/<case>/   config.yml, tensors.npz, sharding/*.json, compiled.json
#   OUT/cases/step_*/   config.yml, tensors.npz (with gradients), step.json (export_step.py)
#   OUT/configs/        the release's base.yml, model and custom_mesh_and_rule files the cases use
#   OUT/versions.txt    the exact packages, the command and the date
# One Python process per device count (XLA fixes the fake CPU device count at start-up).
# Usage: tools/maxtext_oracle/export_all.sh [OUT] [VENV]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(realpath -m "${1:-$root/testdata/maxtext}")"
venv="${2:-$root/build/oracle-venv}"
py="$venv/bin/python"
[[ -x "$py" ]] || { echo "export_all.sh: no venv at $venv (make maxtext-venv)" >&2; exit 2; }
mkdir -p "$out/cases" "$out/configs"
rm -rf "$out/cases"/* "$out/configs"/*
start=$(date +%s)
counts="$(cd "$here" && "$py" -c 'import cases; print(*sorted({c["devices"] for c in cases.CASES}))')"
for n in $counts; do
  (cd "$here" && JAX_PLATFORMS=cpu "$py" export.py --devices "$n" --out "$out/cases") 2>&1 |
    grep -v '^\[transformers\]\|^WARNING:absl\|^INFO:absl\|NO-OP' || true
done
# The training-step cases (step_*), after the forward cases: each compares its step's forward
# collectives with its forward case's compiled.json.
counts="$(cd "$here" && "$py" -c 'import cases; print(*sorted({c["devices"] for c in cases.STEP_CASES}))')"
for n in $counts; do
  (cd "$here" && JAX_PLATFORMS=cpu "$py" export_step.py --devices "$n" --out "$out/cases") 2>&1 |
    grep -v '^\[transformers\]\|^WARNING:absl\|^INFO:absl\|NO-OP' || true
done
# The release's configs, byte for byte, so shardtrace reads the same base.yml the oracle did.
cfg="$("$py" -c 'import maxtext, os; print(os.path.join(os.path.dirname(maxtext.__file__), "configs"))')"
cp "$cfg/base.yml" "$out/configs/base.yml"
mkdir -p "$out/configs/models" "$out/configs/custom_mesh_and_rule"
for m in $(grep -ho '^model_name: "[^"]*"' "$out"/cases/*/config.yml | sed 's/.*"\(.*\)"/\1/' | sort -u); do
  cp "$cfg/models/$m.yml" "$out/configs/models/"
done
for r in $(grep -ho '^custom_mesh_and_rule: "[^"]*"' "$out"/cases/*/config.yml | sed 's/.*"\(.*\)"/\1/' | sort -u); do
  cp "$cfg/custom_mesh_and_rule/$r.yml" "$out/configs/custom_mesh_and_rule/"
done
rmdir "$out/configs/models" "$out/configs/custom_mesh_and_rule" 2>/dev/null || true
{
  echo "command: tools/maxtext_oracle/export_all.sh (python $("$py" -c 'import sys; print(sys.version.split()[0])'))"
  echo "date: $(date -u +%Y-%m-%d)"
  echo "seconds: $(( $(date +%s) - start ))"
  "$venv/bin/pip" freeze 2>/dev/null | grep -iE '^(maxtext|jax|jaxlib|flax|numpy|ml.dtypes|aqtp|qwix|tokamax|omegaconf|pydantic)=='
} > "$out/versions.txt"
echo "export_all.sh: $(ls "$out/cases" | wc -l) cases in $out ($(( $(date +%s) - start )) s)"
