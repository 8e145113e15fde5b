#!/usr/bin/env bash
# One H200 call (issue 16, ring caches): configs/serving.json (sink, CSR, rings with both window
# inputs, and the default) on cuda and triton, 50,000 cases each, concurrently; compare triton vs cuda.
# build-h200/bin/kvfuzz carried (strip -o build-h200/bin/kvfuzz build/kvfuzz); OUT set:
#   OUT=DIR bash reports/gpu/2026-12-01-h200-serving-ring/serving-ring.sh
source scripts/gpu/preamble.sh  # $B, $P, $OUT/device.txt
s=$SECONDS
timeout 200 $B run --target cuda --config configs/serving.json --cases 50000 --seed 26 -j 8 --stats --json $OUT/serving-cuda.json --corpus-out $OUT/f-cuda > $OUT/serving-cuda.log 2>&1 &
timeout 200 $B run --target triton --config configs/serving.json --cases 50000 --seed 27 -j 7 --stats --json $OUT/serving-triton.json --corpus-out $OUT/f-triton > $OUT/serving-triton.log 2>&1 &
wait
echo "campaigns: $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 120 $B compare --target triton --against cuda --config configs/serving.json --cases 20000 --seed 28 -j 8 > $OUT/compare.log 2>&1
echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
rm -rf $OUT/f-cuda/*.report $OUT/f-triton/*.report
for f in serving-cuda serving-triton compare; do echo "== $f"; grep -E "^kvfuzz: .*(passed|identical)" $OUT/$f.log | tail -3; done
cat $OUT/device.txt
