#!/usr/bin/env bash
# One H200 call (issue 16, CSR addressing): FlashInfer's own append kernel (flashinfer-python 0.7.4,
# examples/peers/flashinfer) fuzzed through its CSR convention with configs/serving.json, and our CUDA
# kernel on the same profile (CSR and slot_mapping cases). Run from the repo root on the GPU machine
# with these built here and carried in build-h200/:
#   strip -o build-h200/bin/kvfuzz build/kvfuzz
#   examples/peers/flashinfer/fetch-headers.sh
#   examples/peers/flashinfer/build.sh -o build-h200/plugins/flashinfer_append.so
#   NVCC_FLAGS=-DKVFZ_FLASHINFER_SKIP_EMPTY examples/peers/flashinfer/build.sh -o build-h200/plugins/flashinfer_append_skip_empty.so
#   OUT=DIR bash scripts/gpu/flashinfer.sh
source "$(dirname "$0")/preamble.sh"  # $B, $P, $OUT/device.txt
s=$SECONDS
# Empty appends (nnz = 0) skipped: everything else FlashInfer declares.
timeout 240 $B run --target plugin:$P/flashinfer_append_skip_empty.so --config configs/serving.json --cases 30000 --seed 1 -j 8 \
  --keep-going --stats --json $OUT/flashinfer.json --corpus-out $OUT/f-flashinfer > $OUT/flashinfer.log 2>&1 &
timeout 240 $B run --target cuda --config configs/serving.json --cases 50000 --seed 19 -j 6 --stats --json $OUT/serving-cuda.json \
  --corpus-out $OUT/f-cuda > $OUT/serving-cuda.log 2>&1 &
wait
echo "campaigns: $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
# The plugin as built by default: an empty append is sent to FlashInfer.
timeout 100 $B run --target plugin:$P/flashinfer_append.so --config configs/serving.json --cases 3000 --seed 2 -j 8 \
  --keep-going --json $OUT/flashinfer-empty.json --corpus-out $OUT/f-flashinfer-empty > $OUT/flashinfer-empty.log 2>&1
echo "empty run rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
for f in flashinfer serving-cuda flashinfer-empty; do echo "== $f"; grep -E "^kvfuzz: |skipped|FAIL" $OUT/$f.log | tail -12; done
cat $OUT/device.txt
