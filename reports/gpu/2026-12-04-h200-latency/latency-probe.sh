#!/usr/bin/env bash
# Issue 20, a probe call: what a small append costs as a graph node, stage by stage (bench/node_cost.cu),
# the bench on the h8-d128 cases at T <= 4096 (cuda, the previous kernel as v0, triton), whether Nsight
# Compute runs here, and the SASS of the bench libraries.
#   OUT=DIR bash reports/gpu/2026-12-04-h200-latency/latency-probe.sh
# Carried (built where nvcc is): build-h200/node_cost (nvcc -O3 -std=c++20 -arch=sm_90
# bench/node_cost.cu -o build-h200/node_cost) and build-h200/bench/libkvf_*.so (bench/build_cuda_entry.sh).
set -uo pipefail
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
git rev-parse HEAD >> "$OUT/gpu.txt" 2>&1
build-h200/node_cost 100 50 > "$OUT/node_cost.md" 2>&1
bash scripts/gpu/bench.sh build-h200/bench "$OUT/bench" --cases "${CASES:-h8-d128}" --tokens "${TOKENS:-1,16,256,4096}" \
  --triton-variants "" --no-torch --budget-s "${BUDGET:-150}" > /dev/null 2>&1
{ which ncu && ncu --version; } > "$OUT/ncu.txt" 2>&1
if command -v ncu > /dev/null; then
  timeout 120 ncu --target-processes all -k regex:kv_append_kernel -c 2 --section SpeedOfLight --section LaunchStats \
    --section WarpStateStats python3 bench/bench.py --cuda-lib cuda=build-h200/bench/libkvf_cuda.so \
    --cases nhd-bf16-h8-d128 --tokens 1 --no-triton --no-torch --reps 3 --out "$(mktemp -d)/b" >> "$OUT/ncu.txt" 2>&1
  echo "ncu rc=$?" >> "$OUT/ncu.txt"
fi
for f in build-h200/bench/libkvf_*.so; do
  n=${f##*/libkvf_}; cuobjdump --dump-sass "$f" 2>&1 | gzip > "$OUT/sass-${n%.so}.txt.gz"
done
cat "$OUT/node_cost.md"; tail -n 60 "$OUT/bench/bench.md"; tail -n 40 "$OUT/ncu.txt"
