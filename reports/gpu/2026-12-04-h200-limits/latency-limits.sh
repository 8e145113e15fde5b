#!/usr/bin/env bash
# Issue 20: what limits the targets still missed, in one H200 call, from the repository root:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-limits/latency-limits.sh
# 1. bench/stage_cost.cu: the least a large append can take, stage by stage (layout write patterns,
#    the fp8 division, per-token-head maxima), beside the copy node;
# 2. bench/triton_floor.py: the least a Triton append of a few rows takes as a graph node;
# 3. bench.py on the fp8 and D 96 cases with the kernel and its stage-doubled variants
#    (bench/kernel_variant.py div2 / amax2): each variant's extra µs is that stage's cost;
# 4. the fuzzer's cases/s and per-stage host time with 1..16 worker processes, and with the CUDA MPS
#    server where the machine has one (processes then share one GPU context instead of time-slicing).
# Carried (built where nvcc is): build-h200/bin/kvfuzz (strip of build/kvfuzz), build-h200/probe/
# stage_cost (nvcc -O3 -std=c++20 -arch=sm_90 bench/stage_cost.cu), build-h200/bench/libkvf_{cuda,
# div2,amax2}.so (bench/build_cuda_entry.sh on kernels/cuda and on kernel_variant.py's copies).
source scripts/gpu/preamble.sh  # $B, log, campaign, $OUT/device.txt
L=build-h200/bench

s=$SECONDS; timeout 90 build-h200/probe/stage_cost > "$OUT/stage_cost.md" 2>&1; log "stage_cost rc=$? $((SECONDS - s)) s"
s=$SECONDS; timeout 90 python3 bench/triton_floor.py > "$OUT/triton_floor.md" 2>&1; log "triton_floor rc=$? $((SECONDS - s)) s"

s=$SECONDS
PYTHONUNBUFFERED=1 timeout 260 python3 bench/bench.py --cuda-lib "cuda=$L/libkvf_cuda.so" \
  --cuda-lib "div2@fp8=$L/libkvf_div2.so" --cuda-lib "amax2@per-token-head=$L/libkvf_amax2.so" \
  --cases fp8-per-tensor-h8-d128,fp8-per-token-head-h8-d128,bf16-h8-d96 --no-triton --no-torch --triton-variants "" \
  --budget-s 200 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
log "bench rc=$? $((SECONDS - s)) s"

fuzz() {  # fuzz NAME ARGS...: a campaign with --stats, its log and JSON under OUT
  local name=$1; shift; local s=$SECONDS
  timeout 90 $B run --target cuda --seed 1 --stats --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  log "$name rc=$? $((SECONDS - s)) s: $(grep -E '^kvfuzz: [0-9]+ cases in' "$OUT/$name.log" | tail -n 1)"
}
for j in 1 2 4 8 16; do fuzz workers-j$j --cases $((j < 4 ? 3000 : 12000)) -j $j; done
if command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
  nvidia-cuda-mps-control -d; log "mps daemon rc=$?"
  for j in 8 16; do fuzz mps-workers-j$j --cases 12000 -j $j; done
  fuzz mps-nofork-j16 --cases 12000 -j 16 --no-fork
  echo quit | nvidia-cuda-mps-control; log "mps quit rc=$?"
  cp -r "$CUDA_MPS_LOG_DIRECTORY" "$OUT/mps-log" 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  log "no nvidia-cuda-mps-control on this machine"
fi
fuzz nofork-j16 --cases 12000 -j 16 --no-fork
cat "$OUT/device.txt"
