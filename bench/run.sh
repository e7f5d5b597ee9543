#!/usr/bin/env bash
# `make bench`: every target of issue 13, each a ratio measured side by side in this run
# (never in tests). Prints markdown tables (bench/README.md records a run) and keeps the
# generated cases under $BUILD/bench (never committed). Needs a Release build in $BUILD.
#   BENCH_MIXTRAL=0  skips the Mixtral-8x7B layer slice (5.6 GB npz, ~12 GB of RAM at peak
#                    while the NumPy peer generates it; minutes on 2 cores). It runs by
#                    default when the machine has at least 16 GB of memory available.
set -euo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/shardtrace
OUT=$BUILD/bench
VENV=$BUILD/bench-venv
NUMPY_VERSION=1.26.4  # wheels bundle OpenBLAS: the peer is NumPy+OpenBLAS
mkdir -p "$OUT"

if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c "import numpy" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "numpy==$NUMPY_VERSION"
fi
PY=$VENV/bin/python
PEER=bench/numpy_peer.py

# measure NAME CMD...: runs CMD (stdout discarded), sets NAME_s (seconds) and NAME_mb (peak
# RSS in MB); a failing command is reported and leaves NAME_s empty.
measure() {
  local name=$1
  shift
  local stats
  stats=$(mktemp)
  if /usr/bin/time -f "%e %M" -o "$stats" "$@" >/dev/null 2>"$OUT/$name.stderr"; then
    read -r secs kb <"$stats"
    printf -v "${name}_s" '%s' "$secs"
    printf -v "${name}_mb" '%s' "$(awk -v k="$kb" 'BEGIN{printf "%.0f", k/1024}')"
  else
    printf -v "${name}_s" '%s' ""
    printf -v "${name}_mb" '%s' ""
    echo "  ($name failed: $(tail -1 "$OUT/$name.stderr"))" >&2
  fi
  rm -f "$stats"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a/b }'; }
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN{printf "%.0f", b/1048576}'; }
today=$(date -u +%Y-%m-%d)

# check_vs_peer DIR DESCRIPTION GENERATE_ARGS...: generates the case in DIR once (NumPy peer),
# then runs the peer's and shardtrace's `check` on it side by side and prints their table.
# Leaves peer_s/peer_mb, st_s/st_mb and payload set for the section's own verdict line.
check_vs_peer() {
  local dir=$1 description=$2
  shift 2
  if [[ ! -f $dir/tensors.npz ]]; then
    echo "generating $dir ($description)" >&2
    "$PY" "$PEER" generate "$dir" "$@"
  fi
  payload=$(mb "$dir/tensors.npz")
  measure peer "$PY" "$PEER" check "$dir"
  measure st "$BIN" check "$dir" --quiet
  echo "| run | seconds | peak RSS MB | RSS / payload ($payload MB) |"
  echo "|---|---|---|---|"
  echo "| numpy_peer.py check | $peer_s | $peer_mb | $(ratio "$peer_mb" "$payload") |"
  echo "| shardtrace check | $st_s | $st_mb | $(ratio "$st_mb" "$payload") |"
}

case400=$OUT/sparse400
echo "## 1. check on the ~400 MB sparse case vs NumPy+OpenBLAS ($today)"
check_vs_peer "$case400" "4096 tokens, M=1024, H=2048, E=16, K=2, float32" \
  --tokens 4096 --emb 1024 --hidden 2048 --experts 16 --top-k 2
echo "time ratio shardtrace / numpy: **$(ratio "$st_s" "$peer_s")** (target <= 0.8); RSS / payload: **$(ratio "$st_mb" "$payload")** (target <= 1.3)"
echo

echo "## 2. expert GEMMs vs cblas_sgemm, one thread, same process ($today)"
"$BUILD/shardtrace_gemm_bench"
echo

echo "## 3. thread pool vs serial, same case ($today)"
measure serial "$BIN" check "$case400" --quiet --threads 1
measure pool "$BIN" check "$case400" --quiet
echo "| run | seconds | peak RSS MB |"
echo "|---|---|---|"
echo "| --threads 1 | $serial_s | $serial_mb |"
echo "| pool ($(nproc) threads) | $pool_s | $pool_mb |"
echo "speed-up serial / pool: **$(ratio "$serial_s" "$pool_s")** (bit-identical results: tests/numeric_engine_test.cc)"
echo

echo "## 4. numeric EP scaling, same global problem (4096 tokens, M=256, H=256, E=64, K=2) ($today)"
echo "| EP (devices) | seconds | peak RSS MB | time / EP=1 | RSS / EP=1 |"
echo "|---|---|---|---|---|"
ep_args=(dtype=float32 weight_dtype=float32 base_emb_dim=256 base_mlp_dim=256 base_moe_mlp_dim=256
  num_experts=64 num_experts_per_tok=2 max_target_length=64 decoder_block=mixtral sparse_matmul=true)
for ep in 1 8 16 64; do
  measure ep "$BIN" trace --numeric --quiet "${ep_args[@]}" "ici_expert_parallelism=$ep" \
    "per_device_batch_size=$((64 / ep))" --devices "$ep"
  [[ $ep == 1 ]] && { ep1_s=$ep_s; ep1_mb=$ep_mb; }
  echo "| $ep | ${ep_s:-refused} | ${ep_mb:-} | $(ratio "$ep_s" "$ep1_s") | $(ratio "$ep_mb" "$ep1_mb") |"
done
echo "(target: time and RSS <= 1.5x EP=1)"
echo

echo "## 5. symbolic DeepSeek-V3 on 256 devices ($today)"
echo "| run | ms | peak RSS MB |"
echo "|---|---|---|"
for emb in 7168 71680; do
  measure sym "$BIN" trace model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 override_model_config=true "base_emb_dim=$emb"
  echo "| trace, emb_dim $emb | $(awk -v s="$sym_s" 'BEGIN{printf "%.0f", s*1000}') | $sym_mb |"
  measure dump "$BIN" dump model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 override_model_config=true "base_emb_dim=$emb"
  echo "| dump, emb_dim $emb | $(awk -v s="$dump_s" 'BEGIN{printf "%.0f", s*1000}') | $dump_mb |"
done
measure step "$BIN" trace --step model_name=deepseek3-671b --devices 256 ici_expert_parallelism=32 ici_fsdp_parallelism=8
echo "| trace --step, EP32 x FSDP8 | $(awk -v s="$step_s" 'BEGIN{printf "%.0f", s*1000}') | $step_mb |"
start=$(date +%s%N)
for f in testdata/maxtext-moe-models/configs/models/*.yml; do
  m=$(basename "$f" .yml)
  "$BIN" trace --step testdata/maxtext-moe-models/configs/base.yml "model_name=$m" max_target_length=4096 \
    per_device_batch_size=1 ici_fsdp_parallelism=8 --devices 8 --format json --quiet >/dev/null 2>&1 || true
done
echo "| trace --step, each of the 35 release model files on fsdp=8 | $(( ($(date +%s%N) - start) / 1000000 )) (all 35) | - |"
echo "(target: < 100 ms and < 50 MB, the same at 10x emb_dim; the issue 25 step: well under a second)"
echo

echo "## 8. fit and plan beside the TPU compiler ($today)"
echo "| what | seconds | MB RSS | the TPU compile of the same config (libtpu, this machine) |"
echo "|---|---|---|---|"
base=testdata/maxtext-moe-models/configs/base.yml
# pair_deepseek3_671b_v5p256_pdb7: DeepSeek-V3's published v5p-256 recipe at full depth (fsdp
# 128, sequence 8192, bf16, sgd, the layer inputs offloaded, batch 7), compiled by libtpu.
for fixture in deepseek3_test_v5p8 mixtral_l2_v5p8 pair_deepseek3_test_v5p8_pdb20 \
  pair_deepseek3_671b_v5p256_pdb7 published_n19_deepseek2_16b_v5p8; do
  json=testdata/maxtext-tpu/steps/$fixture.json
  mapfile -t argv < <(python3 -c 'import json,sys; [print(a) for a in json.load(open(sys.argv[1]))["argv"][1:]]' "$json")
  compile_s=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["compile_seconds"] + d["setup_seconds"])' "$json")
  measure fit "$BIN" fit "$base" "${argv[@]}"
  echo "| fit $fixture | $fit_s | $fit_mb | $compile_s s ($(awk -v a="$compile_s" -v b="$fit_s" 'BEGIN{printf "%.0f", a/b}')x) |"
done
ds3_compile_s=$(python3 -c 'import json; d=json.load(open("testdata/maxtext-tpu/steps/deepseek3_671b_l4_v5p256.json")); print(round(d["compile_seconds"] + d["setup_seconds"]))')
plan_row() {  # label, then plan's arguments
  local label=$1; shift
  measure plan "$BIN" plan "$base" "$@" --quiet --format json -o "$OUT/plan.json"
  local configs
  configs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["evaluated"])' "$OUT/plan.json")
  echo "| plan $label ($configs configs) | $plan_s | $plan_mb | $(awk -v s="$plan_s" -v n="$configs" 'BEGIN{printf "%.0f", n/s}') configs per second; one TPU compile of DeepSeek-V3 (4 layers, v5p-256): $ds3_compile_s s ($(awk -v a="$ds3_compile_s" -v b="$plan_s" 'BEGIN{printf "%.0f", a/b}')x the whole sweep) |"
}
plan_row "DeepSeek-V3 on v5p-256, sequence 8192, bf16, sgd (the batch searched from each fit's bytes: 2.2 fits a config)" \
  model_name=deepseek3-671b compile_topology=v5p-256 compile_topology_num_slices=1 max_target_length=8192 weight_dtype=bfloat16 opt_type=sgd
plan_row "DeepSeek-V3 on v5p-256, sequence 8192 (f32 AdamW: fits nowhere)" \
  model_name=deepseek3-671b compile_topology=v5p-256 compile_topology_num_slices=1 max_target_length=8192
plan_row "Mixtral 8x7B on v5p-256, sequence 4096" \
  model_name=mixtral-8x7b compile_topology=v5p-256 compile_topology_num_slices=1 max_target_length=4096
echo "(targets, issue 34/35: fit under 20 ms; plan 1,000 configs per second, the whole space in 10 s and 500 MB)"
echo

avail_gb=$(awk '/MemAvailable/ {printf "%d", $2 / 1048576}' /proc/meminfo)
if [[ ${BENCH_MIXTRAL:-1} == 1 && $avail_gb -ge 16 ]]; then
  echo "## 6. Mixtral-8x7B layer slice ($today)"
  check_vs_peer "$OUT/mixtral8x7b" "512 tokens, M=4096, H=14336, E=8, K=2, float32; 5.6 GB" \
    --tokens 512 --emb 4096 --hidden 14336 --experts 8 --top-k 2
  echo "(target: RSS <= 1.3x payload)"
else
  echo "## 6. Mixtral-8x7B layer slice: skipped (BENCH_MIXTRAL=0, or ${avail_gb} GB available < 16)"
fi
