#!/usr/bin/env bash
# Issue 20: the kernel with both aligned paths (static scales at any T, per-token-head), in two H200
# calls, from the repository root with OUT set:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-triton-row/latency-aligned-final.sh bench      # bench.py: every bf16/fp8 case of H 8 D 128, D 96 and
#                                                                # H 32; cuda, earlier kernels (H 8 D 128), triton, copy
#   OUT=DIR bash reports/gpu/2026-12-04-h200-triton-row/latency-aligned-final.sh campaigns  # cuda campaigns of six profiles, GPU-only mutants
# Carried (built where nvcc is): build-h200/bin/kvfuzz (strip of build/kvfuzz), build-h200/bench/
# libkvf_cuda.so and earlier kernels' libkvf_NAME.so (bench/build_cuda_entry.sh), build-h200/mutants/kvfuzz-mutant-NAME (built with
# -DKVFUZZ_GPU_MUTANTS=ON, stripped).
source scripts/gpu/preamble.sh  # $B, log, campaign, $OUT/device.txt
L=build-h200/bench
case "${1:?bench or campaigns}" in
  bench)
    s=$SECONDS
    libs=(--cuda-lib "cuda=$L/libkvf_cuda.so")
    for f in "$L"/libkvf_*.so; do  # earlier kernels (v0, prev) on the H 8 D 128 cases
      n=${f##*/libkvf_}; n=${n%.so}; [ "$n" = cuda ] || libs+=(--cuda-lib "$n@h8-d128=$f")
    done
    PYTHONUNBUFFERED=1 timeout 540 python3 bench/bench.py "${libs[@]}" \
      --cases nhd-bf16,hnd-bf16,nhd-fp8,hnd-fp8 --no-torch --triton-variants "" --budget-s 480 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
    log "bench rc=$? $((SECONDS - s)) s" ;;
  campaigns)
    campaign cuda-default-100k $B --target cuda --cases 100000 --seed 8001 -j 8
    campaign cuda-quant $B --target cuda --config configs/quant.json --cases 50000 --seed 8002 -j 8
    for c in serving formats placement quant-formats; do
      campaign cuda-$c $B --target cuda --config configs/$c.json --cases 20000 --seed 8003 -j 8
    done
    for m in build-h200/mutants/kvfuzz-mutant-*; do  # the GPU-only mutants carried (the per-token-head ones on quant)
      n=${m##*/kvfuzz-mutant-}; cfg=()
      case $n in aligned-dynamic-*) cfg=(--config configs/quant.json) ;; esac
      campaign "mutant-$n" "$m" --target cuda ${cfg[@]+"${cfg[@]}"} --cases 3000 --seed 1
    done ;;
esac
cat "$OUT/device.txt"
