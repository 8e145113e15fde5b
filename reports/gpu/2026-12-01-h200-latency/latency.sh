#!/usr/bin/env bash
# Issue 20 (decode-time latency), one call of the GPU machine: benchmark first (GPU alone), then
# 100,000-case cuda and triton campaigns on the tuned kernels, side by side.
#
#   reports/gpu/2026-12-01-h200-latency/latency.sh CARRY_DIR OUT_DIR [BENCH_BUDGET_S]      (SKIP_TRITON=1: cuda campaigns only)
#
# CARRY_DIR (built here, no GPU needed): libs/libkvf_cuda.so (bench/build_cuda_entry.sh kernels/cuda),
# libs/libkvf_v0.so (the same entry built with the previous kernel, timed in the same run on the
# h8-d128 cases) and kvfuzz (stripped build with KVFUZZ_CUDA=ON and the Triton AOT cubins).
# Writes OUT_DIR/summary.txt (exit code, seconds and last lines of every step), bench.md and
# bench.json, and results.tar.gz (bench log, campaign JSON summaries and logs, saved failures).
set -uo pipefail
C=${1:?usage: latency.sh CARRY_DIR OUT_DIR [BENCH_BUDGET_S]}; OUT=${2:?usage}; BUDGET=${3:-220}
FINAL=$OUT; OUT=$(mktemp -d)/latency; mkdir -p "$OUT" "$FINAL"
S="$OUT/summary.txt"
step() {  # step NAME CMD...: runs CMD, logs it, appends "name rc seconds last-line" to summary.txt
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s :: $(tail -n 2 "$OUT/$name.log" | tr '\n' ' ') :: $*" >> "$S"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
step bench bash scripts/gpu/bench.sh "$C/libs" "$OUT/bench" --budget-s "$BUDGET" --triton-variants "" --no-torch
K="$C/kvfuzz"
step cuda-default "$K" run --target cuda --cases 70000 --seed 2001 -j 4 --seconds 300 --json "$OUT/cuda-default.json" --corpus-out "$OUT/f-cuda-default" &
step cuda-quant "$K" run --target cuda --config configs/quant.json --cases 30000 --seed 2002 -j 3 --seconds 300 --json "$OUT/cuda-quant.json" --corpus-out "$OUT/f-cuda-quant" &
[ "${SKIP_TRITON:-0}" = 1 ] || step triton-default "$K" run --target triton --cases 60000 --seed 2003 -j 5 --seconds 300 --json "$OUT/triton-default.json" --corpus-out "$OUT/f-triton-default" &
[ "${SKIP_TRITON:-0}" = 1 ] || step triton-quant "$K" run --target triton --config configs/quant.json --cases 40000 --seed 2004 -j 4 --seconds 300 --json "$OUT/triton-quant.json" --corpus-out "$OUT/f-triton-quant" &
wait
cp "$S" "$FINAL/"; cp "$OUT/bench/bench.md" "$OUT/bench/bench.json" "$FINAL/" 2>/dev/null
tar -C "$(dirname "$OUT")" -czf "$FINAL/results.tar.gz" latency
cat "$S"
