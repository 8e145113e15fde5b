#!/usr/bin/env bash
# One H200 call (issue 16, context-parallel shards): configs/serving.json (the sink, CSR, rings,
# shards with both inputs, and the default) on cuda and triton, 50,000 cases each, concurrently;
# compare triton vs cuda; then the CUDA kernel as a device plugin (its slot-mapping producer through
# kvfuzz_plugin_cp_slot_mapping), 20,000 cases; the Triton pytest on the GPU (torch API). Carried: build-h200/bin/kvfuzz (strip -o
# build-h200/bin/kvfuzz build/kvfuzz) and build-h200/plugins/kvfuzz_cuda_plugin_device.so. OUT set:
#   OUT=DIR bash reports/gpu/2026-12-01-h200-serving-cp/serving-cp.sh
source scripts/gpu/preamble.sh  # $B, $P, $OUT/device.txt
s=$SECONDS
timeout 240 $B run --target cuda --config configs/serving.json --cases 50000 --seed 36 -j 8 --stats --json $OUT/serving-cuda.json --corpus-out $OUT/f-cuda > $OUT/serving-cuda.log 2>&1 &
timeout 240 $B run --target triton --config configs/serving.json --cases 50000 --seed 37 -j 7 --stats --json $OUT/serving-triton.json --corpus-out $OUT/f-triton > $OUT/serving-triton.log 2>&1 &
wait
echo "campaigns: $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 120 $B compare --target triton --against cuda --config configs/serving.json --cases 20000 --seed 38 -j 8 > $OUT/compare.log 2>&1
echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 120 $B run --target plugin:$P/kvfuzz_cuda_plugin_device.so --config configs/serving.json --cases 20000 --seed 39 -j 8 --stats --json $OUT/plugin-device.json --corpus-out $OUT/f-plugin > $OUT/plugin-device.log 2>&1
echo "device plugin rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
KVFUZZ_TRITON_GPU=1 timeout 150 python3 -m pytest -q -x tests/triton > $OUT/pytest-gpu.log 2>&1
echo "pytest rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
rm -rf $OUT/f-cuda/*.report $OUT/f-triton/*.report $OUT/f-plugin/*.report
tail -3 $OUT/pytest-gpu.log
for f in serving-cuda serving-triton compare plugin-device; do echo "== $f"; grep -E "^kvfuzz: .*(passed|identical|skipped)" $OUT/$f.log | tail -3; grep -E "context_parallel=" $OUT/$f.log; done
cat $OUT/device.txt
