#!/usr/bin/env bash
# ctest `wheel_install`: builds the wheel from the built binary (build_wheel.py), installs it
# into a fresh virtual environment with `pip install --no-index` (no network), and runs
# check_installed.py there: the `shardtrace` console command, where every library the binary
# and the vendored libraries resolve to comes from, SVG output, and every function of the
# Python API against the embedded configs and a golden case, checking values. The run has
# LD_LIBRARY_PATH unset and GVBINDIR pointing nowhere (Graphviz must not need its plugin
# directory). Exits 77 (ctest: skipped) only when patchelf or python3's venv is missing;
# scripts/install-deps.sh installs both.
#   test_wheel.sh BUILD/shardtrace WORK_DIR
set -euo pipefail
bin=$(realpath "$1")
work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "wheel_install: SKIPPED: $* (scripts/install-deps.sh installs it)"; exit 77; }
command -v patchelf >/dev/null || skip "patchelf is not installed"
python3 -c 'import ensurepip, venv' 2>/dev/null || skip "python3-venv is not installed"
rm -rf "$work"
mkdir -p "$work"
wheel=$(python3 "$src/tools/wheel/build_wheel.py" --binary "$bin" --package "$src/python/shardtrace" \
  --dist "$work/dist" --notice "$src/NOTICE")
echo "wheel_install: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --no-index --no-deps --disable-pip-version-check -q "$wheel"
unset LD_LIBRARY_PATH SHARDTRACE_BINARY
export GVBINDIR=/nonexistent
cd "$work"
PATH="$work/venv/bin:$PATH" "$work/venv/bin/python" "$src/tools/wheel/check_installed.py" \
  --wheel "$wheel" --golden "$src/testdata/goldens/sparse_ep2_mixtral" --out "$work/out"
