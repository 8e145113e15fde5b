#!/usr/bin/env bash
# One H200 call (issue 16, the padding sink): configs/serving.json (the sink padding mode mixed with
# the default) on cuda and triton, 50,000 cases each, concurrently; compare triton vs cuda on it
# (sinks compare equal whatever padding row they hold). Run from the repo root on the GPU machine
# with build-h200/bin/kvfuzz carried (strip -o build-h200/bin/kvfuzz build/kvfuzz) and OUT set:
#   OUT=DIR bash reports/gpu/2026-12-01-h200-serving/serving.sh
export KVFUZZ_PYTHON=python3
source scripts/gpu/preamble.sh  # $B, $P, $OUT/device.txt
s=$SECONDS
timeout 200 $B run --target cuda --config configs/serving.json --cases 50000 --seed 16 -j 8 --stats --json $OUT/serving-cuda.json --corpus-out $OUT/f-cuda > $OUT/serving-cuda.log 2>&1 &
timeout 200 $B run --target triton --config configs/serving.json --cases 50000 --seed 17 -j 7 --stats --json $OUT/serving-triton.json --corpus-out $OUT/f-triton > $OUT/serving-triton.log 2>&1 &
wait
echo "campaigns: $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 120 $B compare --target triton --against cuda --config configs/serving.json --cases 20000 --seed 18 -j 8 > $OUT/compare.log 2>&1
echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
for f in serving-cuda serving-triton; do tail -3 $OUT/$f.log; done; tail -3 $OUT/compare.log; cat $OUT/device.txt
