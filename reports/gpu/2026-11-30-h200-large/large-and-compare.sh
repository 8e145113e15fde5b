#!/usr/bin/env bash
# Issue 4 on a CUDA device: the large-cache profile on the cuda target, the differential test
# (`kvfuzz compare --target cuda --against cuda-emu`) on default and large cases, and the mutant only
# large caches catch (address-product-in-32-bit) on the GPU kernel.
#
#   reports/gpu/2026-11-30-h200-large/large-and-compare.sh BIN_DIR OUT_DIR [JOBS] [SECONDS]
#
# BIN_DIR holds kvfuzz (built with CUDA) and kvfuzz-mutant-address-product-in-32-bit built with
# -DKVFUZZ_GPU_MUTANTS=ON (its cuda target runs the mutated GPU kernel). Run from the repository root
# (it reads configs/). SECONDS bounds the large campaign (default 45). Writes OUT_DIR/summary.txt and
# OUT_DIR/results.tar.gz (logs and JSON summaries). Every step runs even if one fails. Large cases
# take 8-16 GiB of device memory per worker: JOBS (default 4) workers need up to 4 x 16.4 GiB.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; JOBS=${3:-4}; SECONDS_LARGE=${4:-45}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d)/large
mkdir -p "$W"
S="$OUT/summary.txt"
: > "$S"
step() { echo "== $*" | tee -a "$S"; }
result() { echo "exit $1: $(grep -h 'cases/s\|cases in' "$2" | tail -1) | $(tail -1 "$2")" | tee -a "$S"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
"$BIN/kvfuzz" --version | tee -a "$S"

step "large campaign on cuda: kvfuzz run --target cuda --config configs/large.json --cases 1000000 --seconds $SECONDS_LARGE --seed 1 -j $JOBS"
timeout $((SECONDS_LARGE + 60)) "$BIN/kvfuzz" run --target cuda --config configs/large.json --cases 1000000 --seconds "$SECONDS_LARGE" \
  --seed 1 -j "$JOBS" --max-shrink-tries 20 --json "$W/run-large-cuda.json" --corpus-out "$W/findings-large-cuda" \
  > "$W/run-large-cuda.log" 2>&1
result $? "$W/run-large-cuda.log"

step "compare cuda against cuda-emu, default profile: kvfuzz compare --target cuda --against cuda-emu --cases 400 --seed 2 -j $JOBS"
timeout 120 "$BIN/kvfuzz" compare --target cuda --against cuda-emu --cases 400 --seed 2 -j "$JOBS" -o "$W/compare-default" \
  > "$W/compare-default.log" 2>&1
result $? "$W/compare-default.log"

step "compare cuda against cuda-emu, large profile: kvfuzz compare --target cuda --against cuda-emu --config configs/large.json --cases 40 --seed 3 -j $JOBS"
timeout 120 "$BIN/kvfuzz" compare --target cuda --against cuda-emu --config configs/large.json --cases 40 --seed 3 -j "$JOBS" \
  -o "$W/compare-large" > "$W/compare-large.log" 2>&1
result $? "$W/compare-large.log"

M="$BIN/kvfuzz-mutant-address-product-in-32-bit"
step "mutant address-product-in-32-bit on cuda, large profile (must fail): run --target cuda --config configs/large.json --cases 200 --seed 1"
timeout 120 "$M" run --target cuda --config configs/large.json --cases 200 --seed 1 --max-shrink-tries 30 \
  --json "$W/mutant-large.json" --corpus-out "$W/findings-mutant-large" > "$W/mutant-large.log" 2>&1
result $? "$W/mutant-large.log"
grep -h "NEW-FAIL\|shrunk:" "$W/mutant-large.log" | head -3 | tee -a "$S"

step "mutant address-product-in-32-bit on cuda, default profile (survives): run --target cuda --cases 3000 --seed 1 -j $JOBS"
timeout 120 "$M" run --target cuda --cases 3000 --seed 1 -j "$JOBS" --json "$W/mutant-default.json" \
  --corpus-out "$W/findings-mutant-default" > "$W/mutant-default.log" 2>&1
result $? "$W/mutant-default.log"

tar -czf "$OUT/results.tar.gz" -C "$(dirname "$W")" large
echo "results: $OUT/summary.txt, $OUT/results.tar.gz"
