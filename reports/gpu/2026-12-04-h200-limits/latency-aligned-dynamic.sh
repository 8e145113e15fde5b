#!/usr/bin/env bash
# Issue 20: the CUDA kernel's aligned per-token-head path (KernelPath::aligned_dynamic) and the
# aligned path for static scales at >= 4096 rows, in one H200 call, from the repository root:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-limits/latency-aligned-dynamic.sh
# bench.py on the fp8 (per-tensor, per-token-head) and bf16 h8-d128 cases: cuda (this tree), v0 (the
# previous kernel), aligned_static (bench/kernel_variant.py aligned_static on this tree, fp8
# per-tensor only); then `cuda` campaigns of configs/quant.json and the default profile, and the
# GPU-only mutant of the new path.
# Carried (built where nvcc is): build-h200/bin/kvfuzz (strip of build/kvfuzz), build-h200/bench/
# libkvf_{cuda,v0,aligned_static}.so (bench/build_cuda_entry.sh), build-h200/mutants/
# kvfuzz-mutant-NAME (built with -DKVFUZZ_GPU_MUTANTS=ON, stripped).
source scripts/gpu/preamble.sh  # $B, log, campaign, $OUT/device.txt
L=build-h200/bench

s=$SECONDS
PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench.py --cuda-lib "cuda=$L/libkvf_cuda.so" --cuda-lib "v0@h8-d128=$L/libkvf_v0.so" \
  --cuda-lib "aligned_static@fp8-per-tensor=$L/libkvf_aligned_static.so" \
  --cases nhd-fp8-per-tensor-h8-d128,hnd-fp8-per-tensor-h8-d128,nhd-fp8-per-token-head-h8-d128,hnd-fp8-per-token-head-h8-d128,nhd-bf16-h8-d128 \
  --no-triton --no-torch --triton-variants "" --budget-s 240 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
log "bench rc=$? $((SECONDS - s)) s"

campaign cuda-quant $B --target cuda --config configs/quant.json --cases 50000 --seed 7001 -j 8
campaign cuda-default $B --target cuda --cases 40000 --seed 7002 -j 8
for m in build-h200/mutants/kvfuzz-mutant-*; do
  campaign "mutant-${m##*/kvfuzz-mutant-}" "$m" --target cuda --config configs/quant.json --cases 3000 --seed 1
done
cat "$OUT/device.txt"
