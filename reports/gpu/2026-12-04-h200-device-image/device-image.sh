#!/usr/bin/env bash
# One H200 call (issue 20): DeviceImage (targets/cuda/cuda_status.h) now stages the arena's copies for
# the cuda, triton and device-plugin targets alike. Before/after on the triton target and the device
# plugin without workers (where the threads share one context), the cuda target's campaigns on the
# shared code, and scripts/gpu/plugins.sh's device-plugin run (campaigns, the two mutant device
# plugins: a wrong write and a faulting kernel, each must be caught).
# Carried: build-pack/h200.tar.xz (build-h200/bin/kvfuzz this commit, kvfuzz-before the commit
# before) and build-pack/plugins-bin.tar.xz (scripts/gpu/plugins.sh pack build build-pack).
# Run from the repo root:   OUT=DIR bash reports/gpu/2026-12-04-h200-device-image/device-image.sh
tar -xJf build-pack/h200.tar.xz && tar -xJf build-pack/plugins-bin.tar.xz
source scripts/gpu/preamble.sh  # $B, $OUT/device.txt, log, campaign
A=$PWD/build-h200/bin/kvfuzz-before
DEV="plugin:$PWD/plugins-bin/kvfuzz_cuda_plugin_device.so"
log "before: $($A --version)"
stages() {  # NAME BINARY ARGS...: default cases, seed 1, the stage table
  local name=$1 bin=$2; shift 2; local s=$SECONDS
  timeout 150 $bin run --seed 1 --stats "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  log "$name rc=$? $((SECONDS - s)) s: $(grep -E '^kvfuzz: ([0-9]+ cases in|[0-9]+ passed|host time)' "$OUT/$name.log" | tr '\n' ' ')"
}
for who in before after; do
  bin=$B; [ $who = before ] && bin=$A
  stages $who-triton-nofork-j16 $bin --target triton --cases 20000 --no-fork -j 16
  stages $who-plugin-nofork-j16 $bin --target "$DEV" --cases 20000 --no-fork -j 16
done
stages after-triton-fork-j16 $B --target triton --cases 20000 -j 16
campaign cuda-default-nofork-j16 $B --target cuda --cases 100000 --seed 6301 --no-fork -j 16
campaign cuda-default-fork-j16 $B --target cuda --cases 100000 --seed 6302 -j 16
campaign cuda-quant-fork-j16 $B --target cuda --config configs/quant.json --cases 20000 --seed 6303 -j 16
campaign triton-default-nofork-j16 $B --target triton --cases 100000 --seed 6304 --no-fork -j 16
CASES=6000 timeout 240 bash scripts/gpu/plugins.sh run plugins-bin $OUT/plugins 16 > $OUT/plugins.log 2>&1
log "plugins.sh rc=$?"
cat $OUT/device.txt
cat $OUT/plugins/summary.txt
