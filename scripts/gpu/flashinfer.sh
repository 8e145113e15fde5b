#!/usr/bin/env bash
# A peer kernel on the GPU: FlashInfer's own append (flashinfer-python 0.7.4's AppendPagedKVCache,
# examples/peers/flashinfer) fuzzed through the plugin ABI and its CSR convention, beside our CUDA
# kernel on the same profile. Run from the repository root on the GPU machine:
#
#   scripts/gpu/flashinfer.sh CARRY_DIR OUT_DIR [CONFIG] [CASES] [CUDA_CASES] [EMPTY_CASES]
#
# CARRY_DIR is built where the build and nvcc are (the GPU machine fetches no headers):
#   strip -o CARRY_DIR/bin/kvfuzz build/kvfuzz
#   examples/peers/flashinfer/fetch-headers.sh
#   examples/peers/flashinfer/build.sh -o CARRY_DIR/plugins/flashinfer_append.so
#   NVCC_FLAGS=-DKVFZ_FLASHINFER_SKIP_EMPTY examples/peers/flashinfer/build.sh -o CARRY_DIR/plugins/flashinfer_append_skip_empty.so
# Runs, with CONFIG (default configs/serving.json): CASES (default 30000; seed 1, -j 8) on the plugin
# that skips empty appends (nnz = 0) and, at the same time, CUDA_CASES (50000; seed 19, -j 6) on the
# `cuda` target; then EMPTY_CASES (3000; seed 2, -j 8) on the plugin as built by default (an empty
# append is sent to FlashInfer). 0 cases skips a run. LIMIT_S (default 240) bounds the first two,
# EMPTY_LIMIT_S (100) the third. Writes OUT_DIR/device.txt (device, versions, exit codes, seconds),
# flashinfer.*, serving-cuda.* and flashinfer-empty.* (summary JSON, log) and the failures under f-*/.
# The defaults are the run of reports/gpu/2026-12-01-h200-flashinfer.
usage="usage: scripts/gpu/flashinfer.sh CARRY_DIR OUT_DIR [CONFIG] [CASES] [CUDA_CASES] [EMPTY_CASES]"
KVFUZZ_CARRY=$(cd "${1:?$usage}" && pwd) || exit 2
OUT=${2:?$usage}
CFG=${3:-configs/serving.json}; CASES=${4:-30000}; CUDA_CASES=${5:-50000}; EMPTY_CASES=${6:-3000}
LIMIT_S=${LIMIT_S:-240}; EMPTY_LIMIT_S=${EMPTY_LIMIT_S:-100}
source "$(dirname "$0")/preamble.sh"  # $B, $P, $OUT/device.txt, log
log "config $CFG, cases $CASES (flashinfer), $CUDA_CASES (cuda), $EMPTY_CASES (flashinfer, empty appends sent)"
s=$SECONDS
# Empty appends (nnz = 0) skipped: everything else FlashInfer declares.
[ "$CASES" -gt 0 ] && timeout "$LIMIT_S" $B run --target plugin:$P/flashinfer_append_skip_empty.so --config "$CFG" --cases "$CASES" --seed 1 -j 8 \
  --keep-going --stats --json $OUT/flashinfer.json --corpus-out $OUT/f-flashinfer > $OUT/flashinfer.log 2>&1 &
[ "$CUDA_CASES" -gt 0 ] && timeout "$LIMIT_S" $B run --target cuda --config "$CFG" --cases "$CUDA_CASES" --seed 19 -j 6 --stats --json $OUT/serving-cuda.json \
  --corpus-out $OUT/f-cuda > $OUT/serving-cuda.log 2>&1 &
wait
log "campaigns: $((SECONDS - s)) s"
s=$SECONDS
# The plugin as built by default: an empty append is sent to FlashInfer.
if [ "$EMPTY_CASES" -gt 0 ]; then
  timeout "$EMPTY_LIMIT_S" $B run --target plugin:$P/flashinfer_append.so --config "$CFG" --cases "$EMPTY_CASES" --seed 2 -j 8 \
    --keep-going --json $OUT/flashinfer-empty.json --corpus-out $OUT/f-flashinfer-empty > $OUT/flashinfer-empty.log 2>&1
  log "empty run rc=$? $((SECONDS - s)) s"
fi
for f in flashinfer serving-cuda flashinfer-empty; do
  [ -f $OUT/$f.log ] && { echo "== $f"; grep -E "^kvfuzz: |skipped|FAIL" $OUT/$f.log | tail -12; }
done
cat $OUT/device.txt
