#!/usr/bin/env bash
# ctest `html_report_chromium`: writes the HTML reports of render (Mixtral 8x7B on fsdp=2 x
# expert=4), fit and plan (Mixtral with 2 layers on v5p-8, about a second each) and opens each
# in headless Chromium (check_html.py: a click on a table header, a word typed into the
# filter, the SVGs, no console message, no fetch), asserting values from the same command's
# text or JSON output: fit's headline and 13 parameter rows, plan's one scatter point per
# fitting config. Also: `--format html` with standard output a terminal (a pty from
# script(1)) is refused with exit 2 and one line, for render, fit and plan.
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
check="$src/tools/html_check/check_html.py"
python3 "$check" "$work/mixtral-8x7b.html" --filter wi_0 --summary-heading Summary \
  --at-least '#flow-graph svg g.node=2' --at-least '#flow-graph svg g.edge=1' \
  --at-least '#summary svg.chart rect.segment=3' ${shots:+--screenshots "$shots"}

# fit: Mixtral with 2 layers on v5p-8; the verdict is the text output's first line.
small=("$src/testdata/maxtext-moe-models/configs/base.yml" model_name=mixtral-8x7b
  override_model_config=true base_num_decoder_layers=2 compile_topology=v5p-8
  compile_topology_num_slices=1)
fit=("${small[@]}" per_device_batch_size=1 max_target_length=1024)
"$bin" fit "${fit[@]}" --format html -o "$work/fit.html"
# The whole output, then its first line: `| head -n 1` would close the pipe early, and fit
# rightly fails a write to a closed stdout (exit 2, which pipefail then reports).
text=$("$bin" fit "${fit[@]}")
headline=${text%%$'\n'*}
# Seven components stacked (parameters, optimizer state, batch, gradients, kept for the
# backward, weights cast, peak temporaries), two limit lines (the HBM and the 95% of it the TPU
# compiler schedules within); 13 parameters in Mixtral's layout.
python3 "$check" "$work/fit.html" --table params-table --number "bytes per device" --text path \
  --order "" --filter MoeBlock --rows 13 --contains "$headline" \
  --count '#summary svg.chart rect.segment=7' --count '#summary svg.chart line.limit=2' \
  --count 'details=7' ${shots:+--screenshots "$shots"}
python3 "$check" "$work/fit.html" --table collectives-table --number "bytes per device" \
  --text collective --order "" --filter all_gather

# plan: the same model with batch 4 and length 2048; the JSON of the same command lists every
# fitting config (--top 1000) and which are on the Pareto front.
plan=("${small[@]}" per_device_batch_size=4 max_target_length=2048)
"$bin" plan "${plan[@]}" --quiet --format html -o "$work/plan.html"
"$bin" plan "${plan[@]}" --quiet --format json --top 1000 >"$work/plan.json"
read -r evaluated fitting pareto < <(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
print(p["evaluated"], p["fitting"], sum(c["pareto"] for c in p["configs"]))' "$work/plan.json")
[[ $fitting -ge 3 ]] || {
  echo "html_report_chromium: FAILED: plan: only $fitting of $evaluated configs fit"
  exit 1
}
python3 "$check" "$work/plan.html" --table configs-table --number headroom --text overrides \
  --order rank --filter remat_policy=minimal --rows $((fitting < 10 ? fitting : 10)) \
  --contains "$fitting of $evaluated configs fit" \
  --count "#plan-scatter circle.config,#plan-scatter circle.pareto=$fitting" \
  --count "#plan-scatter circle.pareto=$pareto" --count '#plan-scatter polyline.pareto-front=1' \
  ${shots:+--screenshots "$shots"}
if command -v script >/dev/null; then
  for cmd in "render model_name=mixtral-8x7b --devices 8" "fit model_name=mixtral-8x7b \
compile_topology=v5p-8" "plan model_name=mixtral-8x7b compile_topology=v5p-8"; do
    set +e
    script -qec "$bin $cmd --format html" /dev/null >"$work/tty.txt" 2>&1
    status=$?
    set -e
    grep -q "shardtrace: error: --format html: standard output is a terminal" "$work/tty.txt" &&
      [[ $status -eq 2 ]] || {
      echo "html_report_chromium: FAILED: ${cmd%% *} --format html on a terminal exited $status:"
      cat "$work/tty.txt"
      exit 1
    }
  done
  echo "html_report_chromium: --format html on a terminal refused (exit 2) by render, fit and plan"
fi
