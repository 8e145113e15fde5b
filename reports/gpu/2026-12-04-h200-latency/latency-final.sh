#!/usr/bin/env bash
# Issue 20, the closing measurements in two H200 calls, from the repository root with OUT set:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-latency/latency-final.sh bench       # bench.py, every case, cuda (+ v0) / triton / flashinfer / copy
#   OUT=DIR bash reports/gpu/2026-12-04-h200-latency/latency-final.sh campaigns   # 100,000 default cases on cuda and on triton, 50,000 quant on cuda
# Carried (built where nvcc is, no GPU needed): build-h200/bin/kvfuzz (strip -o build-h200/bin/kvfuzz
# build/kvfuzz), build-h200/bench/libkvf_cuda.so (bench/build_cuda_entry.sh kernels/cuda ...),
# build-h200/bench/libkvf_v0.so (the same with the previous commit's kernels/cuda) and
# build-h200/peers/flashinfer_bench.so (examples/peers/flashinfer/build.sh -t bench -o ...).
set -u
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader; nproc
  build-h200/bin/kvfuzz --version; git rev-parse HEAD 2>/dev/null; } > "$OUT/device.txt" 2>&1
case "${1:?bench or campaigns}" in
  bench)
    s=$SECONDS
    timeout 330 bash scripts/gpu/bench.sh build-h200/bench "$OUT/bench" --peer flashinfer=build-h200/peers/flashinfer_bench.so \
      --budget-s 260 --triton-variants "" --no-torch > /dev/null 2>&1
    echo "bench rc=$? $((SECONDS - s)) s" >> "$OUT/device.txt" ;;
  campaigns)
    K=build-h200/bin/kvfuzz
    step() {  # step NAME ARGS...: a campaign, its summary JSON, log and findings under OUT
      local name=$1; shift; local s=$SECONDS
      timeout 420 $K run "$@" --json "$OUT/$name.json" --corpus-out "$OUT/findings-$name" > "$OUT/$name.log" 2>&1
      echo "$name rc=$? $((SECONDS - s)) s: $(tail -n 1 "$OUT/$name.log")" >> "$OUT/device.txt"
    }
    step cuda-default --target cuda --cases 100000 --seed 2001 -j 6 &
    step cuda-quant --target cuda --config configs/quant.json --cases 50000 --seed 2002 -j 3 &
    step triton-default --target triton --cases 100000 --seed 2003 -j 6 &
    wait ;;
esac
cat "$OUT/device.txt"
