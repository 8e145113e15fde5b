#!/usr/bin/env bash
# One H200 call (2026-12-01, issue 14): the Triton kernel's format families on the GPU — formats.json
# on the AOT `triton` target, compare triton vs cuda, and the Triton pytest suite with the torch API
# on CUDA. Run from the repo root with build-h200/bin/kvfuzz carried and OUT set:
#   OUT=DIR bash reports/gpu/2026-12-01-h200-triton-families/triton-families.sh
set -u
B=$PWD/build-h200/bin/kvfuzz
export KVFUZZ_PYTHON=python3
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $B --version; } > $OUT/device.txt 2>&1
s=$SECONDS
timeout 200 $B run --target triton --config configs/formats.json --cases 100000 --seed 17 -j 12 --json $OUT/formats-triton.json > $OUT/formats-triton.log 2>&1
echo "triton rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 150 $B compare --target triton --against cuda --config configs/formats.json --cases 30000 --seed 18 -j 12 > $OUT/compare.log 2>&1
echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
KVFUZZ_TRITON_GPU=1 timeout 200 python3 -m pytest -q tests/triton > $OUT/pytest-gpu.log 2>&1
echo "pytest rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
tail -2 $OUT/formats-triton.log; tail -2 $OUT/compare.log; tail -15 $OUT/pytest-gpu.log; cat $OUT/device.txt
