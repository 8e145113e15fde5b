#!/usr/bin/env bash
# One H200 call (issue 16, CSR addressing on both kernels): configs/serving.json (sink, CSR and the
# default) on triton, 50,000 cases; compare triton vs cuda on it; FlashInfer's append through the
# adapter as built by default (empty appends sent), to see whether every failure is an empty append.
# Run from the repo root on the GPU machine with build-h200/ carried (scripts/gpu/flashinfer.sh says
# how it is built) and OUT set:
#   OUT=DIR bash reports/gpu/2026-12-01-h200-serving-csr/serving-csr.sh
source scripts/gpu/preamble.sh  # $B, $P, $OUT/device.txt
s=$SECONDS
timeout 150 $B run --target triton --config configs/serving.json --cases 50000 --seed 23 -j 8 --stats --json $OUT/serving-triton.json \
  --corpus-out $OUT/f-triton > $OUT/serving-triton.log 2>&1
echo "triton campaign: $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 120 $B compare --target triton --against cuda --config configs/serving.json --cases 20000 --seed 24 -j 8 > $OUT/compare.log 2>&1
echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 100 $B run --target plugin:$P/flashinfer_append.so --config configs/serving.json --cases 3000 --seed 2 -j 8 \
  --keep-going --json $OUT/flashinfer-empty.json --corpus-out $OUT/f-flashinfer-empty > $OUT/flashinfer-empty.log 2>&1
echo "flashinfer empty run rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
rm -rf $OUT/f-flashinfer-empty/flaky/*.report $OUT/f-flashinfer-empty/*.report
for f in serving-triton compare flashinfer-empty; do echo "== $f"; grep -E "^kvfuzz: .*(passed|identical|flaky)|did not fail" $OUT/$f.log | tail -6; done
cat $OUT/device.txt
