#!/usr/bin/env bash
# One H200 call (issue 16): FlashInfer 0.7.4's append (examples/peers/flashinfer, built with
# -DKVFZ_FLASHINFER_SKIP_EMPTY) under configs/flashinfer.json, the profile shaped to what it declares
# (CSR, paged, f16/bf16 copies, its head dims, few gapped strides), 100,000 cases. build-h200/ carried
# as scripts/gpu/flashinfer.sh says; OUT set:
#   OUT=DIR bash reports/gpu/2026-12-01-h200-flashinfer/flashinfer-profile.sh
source scripts/gpu/preamble.sh  # $B, $P, $OUT/device.txt
s=$SECONDS
timeout 400 $B run --target plugin:$P/flashinfer_append_skip_empty.so --config configs/flashinfer.json --cases 100000 --seed 3 -j 12 \
  --keep-going --stats --json $OUT/flashinfer.json --corpus-out $OUT/f-flashinfer > $OUT/flashinfer.log 2>&1
echo "campaign rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
rm -rf $OUT/f-flashinfer/*.report $OUT/f-flashinfer/flaky/*.report
grep -E "^kvfuzz: " $OUT/flashinfer.log | tail -8; cat $OUT/device.txt
