#!/usr/bin/env bash
# One H200 call (issue 15, quantised formats): configs/quant-formats.json on cuda and triton, 50,000
# cases each, concurrently; compare triton vs cuda (20,000 cases) beside the Triton pytest on the GPU
# (the torch API; the format tests pass host buffers and are interpreter-only); then the bench rows of NVFP4 and MXFP8 E4M3 against
# the copy of their bytes, with nhd-bf16-h8-d128 for context (bench/bench.py, alone on the GPU).
# Every step runs under its own timeout (about 560 s in all) and logs its exit code to device.txt.
# Carried: build-h200/bin/kvfuzz (strip -o build-h200/bin/kvfuzz build/kvfuzz: the cuda target for
# sm_90 and the Triton AOT cubins) and, optionally, build-h200/bench/libkvf_cuda.so
# (bench/build_cuda_entry.sh kernels/cuda build-h200/bench/libkvf_cuda.so; else built here, ~90 s,
# during the campaigns). Run from the repo root with OUT set:
#   OUT=DIR bash reports/gpu/2026-12-02-h200-quant-formats/quant-formats.sh
source scripts/gpu/preamble.sh  # $B, $P, $OUT/device.txt
cfg=configs/quant-formats.json
lib=$PWD/build-h200/bench/libkvf_cuda.so
build=
if [ ! -f "$lib" ]; then
  lib=/tmp/kvf-bench/libkvf_cuda.so
  timeout 200 bench/build_cuda_entry.sh kernels/cuda "$lib" > $OUT/bench-build.log 2>&1 &
  build=$!
fi
s=$SECONDS
timeout 200 $B run --target cuda --config $cfg --cases 50000 --seed 7 -j 8 --stats --json $OUT/quant-cuda.json --corpus-out $OUT/f-cuda > $OUT/quant-cuda.log 2>&1 &
pc=$!
timeout 200 $B run --target triton --config $cfg --cases 50000 --seed 7 -j 7 --stats --json $OUT/quant-triton.json --corpus-out $OUT/f-triton > $OUT/quant-triton.log 2>&1 &
pt=$!
wait $pc; echo "cuda campaign rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
wait $pt; echo "triton campaign rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 150 $B compare --target triton --against cuda --config $cfg --cases 20000 --seed 8 -j 12 -o $OUT/compare-case > $OUT/compare.log 2>&1 &
pc=$!
KVFUZZ_TRITON_GPU=1 timeout 150 python3 -m pytest -q tests/triton > $OUT/pytest-gpu.log 2>&1 &
pp=$!
wait $pc; echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
wait $pp; echo "pytest rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
if [ -n "$build" ]; then wait $build; echo "bench entry build rc=$?" >> $OUT/device.txt; fi
s=$SECONDS
KVFUZZ_BENCH_COMMIT=${KVFUZZ_BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} PYTHONUNBUFFERED=1 timeout 170 \
  python3 bench/bench.py --cuda-lib cuda=$lib --cases nvfp4,mxfp8,nhd-bf16-h8-d128 --budget-s 130 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
rm -rf $OUT/f-cuda/*.report $OUT/f-triton/*.report
for f in quant-cuda quant-triton compare; do echo "== $f"; grep -E "^kvfuzz: .*(passed|identical|skipped)" $OUT/$f.log | tail -3; done
echo "== pytest"; tail -3 $OUT/pytest-gpu.log
echo "== bench"; grep -E "^\[|VERIFY|bench:" $OUT/bench.log | tail -20
cat $OUT/device.txt
