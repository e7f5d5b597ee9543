#!/usr/bin/env bash
# ctest `html_report_chromium`: writes the render HTML report of Mixtral 8x7B on fsdp=2 x
# expert=4 and opens it in headless Chromium (check_html.py: a click on a table header, a word
# typed into the filter, the SVGs, no console message, no fetch). Also: `--format html` with
# standard output a terminal (a pty from script(1)) is refused with exit 2 and one line.
# Exits 77 (ctest: skipped) only when chromium is missing; scripts/install-deps.sh installs it.
#   test_html.sh BUILD/shardtrace WORK_DIR [SCREENSHOT_DIR]
set -euo pipefail
bin=$(realpath "$1")
work=$2
shots=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v chromium >/dev/null || {
  echo "html_report_chromium: SKIPPED: chromium is not installed (scripts/install-deps.sh installs it)"
  exit 77
}
rm -rf "$work"
mkdir -p "$work"
"$bin" render model_name=mixtral-8x7b ici_expert_parallelism=4 --devices 8 --format html \
  -o "$work/mixtral-8x7b.html"
python3 "$src/tools/html_check/check_html.py" "$work/mixtral-8x7b.html" --filter wi_0 \
  ${shots:+--screenshots "$shots"}
if command -v script >/dev/null; then
  set +e
  script -qec "$bin render model_name=mixtral-8x7b --devices 8 --format html" /dev/null \
    >"$work/tty.txt" 2>&1
  status=$?
  set -e
  grep -q "shardtrace: error: --format html: standard output is a terminal" "$work/tty.txt" &&
    [[ $status -eq 2 ]] || {
    echo "html_report_chromium: FAILED: --format html on a terminal exited $status:"
    cat "$work/tty.txt"
    exit 1
  }
  echo "html_report_chromium: --format html on a terminal refused (exit 2)"
fi
