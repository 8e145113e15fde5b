#!/usr/bin/env bash
# Issue 20, the CUDA kernel's aligned path (KernelPath::aligned) and the fuzzer's host switches, in
# two H200 calls, from the repository root with OUT set:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-aligned/latency-aligned.sh bench       # bench.py: bf16 NHD/HND and fp8 per-tensor, cuda vs v0, copy
#   OUT=DIR bash reports/gpu/2026-12-04-h200-aligned/latency-aligned.sh campaigns   # 100,000 default cases on cuda, GPU-only mutants,
#                                                          # KVFUZZ_CUDA_SYNC / KVFUZZ_CUDA_PIN A/B
# Carried (built where nvcc is, no GPU needed): build-h200/bin/kvfuzz (strip -o build-h200/bin/kvfuzz
# build/kvfuzz), build-h200/bench/libkvf_cuda.so (bench/build_cuda_entry.sh kernels/cuda ...),
# build-h200/bench/libkvf_v0.so (the same with the previous kernel's kernels/cuda) and
# build-h200/mutants/kvfuzz-mutant-NAME (built with -DKVFUZZ_GPU_MUTANTS=ON, stripped).
set -u
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader; nproc
  build-h200/bin/kvfuzz --version; } > "$OUT/device.txt" 2>&1
K=build-h200/bin/kvfuzz
case "${1:?bench or campaigns}" in
  bench)
    s=$SECONDS
    timeout 420 bash scripts/gpu/bench.sh build-h200/bench "$OUT/bench" --cases nhd-bf16,hnd-bf16,fp8-per-tensor \
      --budget-s 330 --no-triton --no-torch --triton-variants "" > /dev/null 2>&1
    echo "bench rc=$? $((SECONDS - s)) s" >> "$OUT/device.txt" ;;
  campaigns)
    step() {  # step NAME ARGS...: a campaign, its summary JSON, log and findings under OUT
      local name=$1; shift; local s=$SECONDS
      timeout 200 env $ENVS $K run "$@" --json "$OUT/$name.json" --corpus-out "$OUT/findings-$name" > "$OUT/$name.log" 2>&1
      echo "$name [$ENVS] rc=$? $((SECONDS - s)) s: $(tail -n 1 "$OUT/$name.log")" >> "$OUT/device.txt"
    }
    ENVS= step cuda-default-100k --target cuda --cases 100000 --seed 6001 -j 8
    for m in build-h200/mutants/kvfuzz-mutant-*; do
      name=${m##*/kvfuzz-mutant-}; s=$SECONDS
      timeout 60 "$m" run --target cuda --cases 2000 --seed 1 --json "$OUT/mutant-$name.json" \
        --corpus-out "$OUT/findings-mutant-$name" > "$OUT/mutant-$name.log" 2>&1
      echo "mutant $name rc=$? $((SECONDS - s)) s: $(tail -n 1 "$OUT/mutant-$name.log")" >> "$OUT/device.txt"
    done
    i=0
    for j in 8 16; do
      for e in "" KVFUZZ_CUDA_SYNC=blocking KVFUZZ_CUDA_SYNC=yield KVFUZZ_CUDA_PIN=1 "KVFUZZ_CUDA_SYNC=blocking KVFUZZ_CUDA_PIN=1"; do
        i=$((i + 1)); ENVS=$e step "ab$i-j$j" --target cuda --cases 20000 --seed 1 -j $j --stats
      done
    done ;;
esac
cat "$OUT/device.txt"
