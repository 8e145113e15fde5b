#!/usr/bin/env bash
# Issue 20: what each stage of the CUDA kernel costs on the final kernel, one H200 call, from the
# repository root with OUT set:   OUT=DIR bash reports/gpu/2026-12-04-h200-limits/latency-stages.sh
# bench.py with the kernel (cuda) and bench/kernel_variant.py's copies of it: nocap, shift16, off32,
# minimal (stages left out, exact for bench.py's inputs) on bf16 and fp8 per-tensor H 8 D 128 at
# T <= 4096; div2 and amax2 (a stage done twice) on fp8 per-token-head (and div2 on per-tensor).
# Carried: build-h200/bench/libkvf_{cuda,nocap,shift16,off32,minimal,div2,amax2}.so
# (bench/build_cuda_entry.sh on kernels/cuda and on `python3 bench/kernel_variant.py NAME DIR`).
set -u
mkdir -p "$OUT"
L=build-h200/bench
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader; } > "$OUT/device.txt" 2>&1
libs=(--cuda-lib "cuda=$L/libkvf_cuda.so" --cuda-lib "div2@fp8=$L/libkvf_div2.so" --cuda-lib "amax2@per-token-head=$L/libkvf_amax2.so")
for v in nocap shift16 off32 minimal; do libs+=(--cuda-lib "$v@nhd-bf16,nhd-fp8-per-tensor=$L/libkvf_$v.so"); done
s=$SECONDS
PYTHONUNBUFFERED=1 timeout 400 python3 bench/bench.py "${libs[@]}" --cases nhd-bf16-h8-d128,nhd-fp8-per-tensor-h8-d128,nhd-fp8-per-token-head-h8-d128 \
  --no-triton --no-torch --triton-variants "" --budget-s 330 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
echo "bench rc=$? $((SECONDS - s)) s" >> "$OUT/device.txt"
cat "$OUT/device.txt"
