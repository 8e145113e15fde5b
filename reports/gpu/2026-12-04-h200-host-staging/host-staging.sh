#!/usr/bin/env bash
# One H200 call (issue 20): the fuzzer's cases/s and host stages on `cuda` before and after the
# target's staged copies (a page-locked staging buffer and one wait a case, instead of a pageable
# copy in and a synchronous cudaMemcpy back on the legacy default stream), then the campaigns the
# change must still pass.
# Carried: build-h200/bin/kvfuzz (this commit) and build-h200/bin/kvfuzz-before (the commit before),
# each `strip -o` of build/kvfuzz. Run from the repo root:   OUT=DIR bash reports/gpu/2026-12-04-h200-host-staging/host-staging.sh
source scripts/gpu/preamble.sh  # $B, $OUT/device.txt, log, campaign
A=$PWD/build-h200/bin/kvfuzz-before
log "before: $($A --version)"
stages() {  # NAME BINARY ARGS...: 20,000 default cases, seed 1, with the stage table
  local name=$1 bin=$2; shift 2; local s=$SECONDS
  timeout 150 $bin run --target cuda --cases 20000 --seed 1 --stats "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  log "$name rc=$? $((SECONDS - s)) s: $(grep -E '^kvfuzz: ([0-9]+ cases in|host time)' "$OUT/$name.log" | tr '\n' ' ')"
}
for j in 8 16; do
  stages before-nofork-j$j $A --no-fork -j $j
  stages after-nofork-j$j $B --no-fork -j $j
  stages before-fork-j$j $A -j $j
  stages after-fork-j$j $B -j $j
done
stages after-nofork-j12 $B --no-fork -j 12
KVFUZZ_CUDA_SYNC=blocking stages after-nofork-j16-blocking $B --no-fork -j 16
KVFUZZ_CUDA_SYNC=yield stages after-nofork-j16-yield $B --no-fork -j 16
KVFUZZ_CUDA_PIN=1 stages after-fork-j16-pin $B -j 16
# The campaigns: 100,000 default cases both ways, then the other profiles.
campaign default-nofork-j16 $B --target cuda --cases 100000 --seed 6101 --no-fork -j 16
campaign default-fork-j16 $B --target cuda --cases 100000 --seed 6102 -j 16
for p in quant formats serving placement quant-formats; do
  campaign $p-nofork-j16 $B --target cuda --config configs/$p.json --cases 20000 --seed 6103 --no-fork -j 16
done
cat $OUT/device.txt
