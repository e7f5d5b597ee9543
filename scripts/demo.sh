#!/usr/bin/env bash
# `make demo`: the main job on the embedded MaxText configs. Traces DeepSeek-V3 671B at
# full size on 256 simulated devices (symbolic), Mixtral 8x7B's dense-dropping path, writes
# MaxText's sharding dump for deepseek2-16b, checks the golden cases numerically, and fits
# Mixtral 8x7B's whole training step on v5p-64 (fit, plan). The
# main job's page is also written as an HTML report (render --format html), whose path it
# prints last.
set -euo pipefail
bin=${1:-build/shardtrace}
out=out/demo
mkdir -p "$out"
"$bin" config model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 -o "$out/config_deepseek3-671b.txt"
"$bin" trace model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 -o "$out/trace_deepseek3-671b_ep64.txt"
"$bin" trace model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 --format json -o "$out/trace_deepseek3-671b_ep64.json"
"$bin" trace model_name=mixtral-8x7b sparse_matmul=false capacity_factor=1.25 ici_expert_parallelism=4 --devices 8 \
  -o "$out/trace_mixtral-8x7b_dense_dropping.txt"
"$bin" dump model_name=deepseek2-16b ici_expert_parallelism=4 --devices 16 -o "$out/input_shardings_deepseek2-16b.json"
"$bin" trace base_emb_dim=16 base_mlp_dim=32 base_moe_mlp_dim=32 num_experts=8 num_experts_per_tok=2 \
  max_target_length=8 per_device_batch_size=1 decoder_block=mixtral dtype=float32 ici_expert_parallelism=4 \
  --devices 8 --numeric --seed 1 -o "$out/trace_small_ep4_numeric.txt"
"$bin" check testdata/goldens/* -o "$out/golden_check.txt"
# The whole training step on a slice (fit) and the meshes that fit it (plan).
"$bin" fit model_name=mixtral-8x7b compile_topology=v5p-64 -o "$out/fit_mixtral-8x7b_v5p-64.txt"
"$bin" fit model_name=mixtral-8x7b compile_topology=v5p-64 --format html -o "$out/fit_mixtral-8x7b_v5p-64.html"
"$bin" plan model_name=mixtral-8x7b compile_topology=v5p-64 --top 5 --quiet -o "$out/plan_mixtral-8x7b_v5p-64.txt"
report="$out/render_deepseek3-671b_ep64.html"
"$bin" render model_name=deepseek3-671b ici_expert_parallelism=64 --devices 256 --format html -o "$report"
echo "shardtrace demo: wrote"
for f in "$out"/*; do printf '  %s\n' "$f"; done
tail -n 1 "$out/golden_check.txt"
head -n 1 "$out/fit_mixtral-8x7b_v5p-64.txt"
head -n 1 "$out/plan_mixtral-8x7b_v5p-64.txt"
echo "shardtrace demo: the HTML report of the main job (open it in a browser): $report"
