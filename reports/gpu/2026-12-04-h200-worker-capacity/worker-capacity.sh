#!/usr/bin/env bash
# One H200 call (issue 20): the fuzzer with worker processes, before and after a worker's first
# shared arena became 256 MiB (a sparse memfd) instead of 1 MiB doubling: every growth had started a
# new worker and with it a new device context. Default profile on `cuda`, `run --stats`, workers
# started (summary JSON `workers.started`).
# Carried: build-h200/bin/kvfuzz (this commit) and build-h200/bin/kvfuzz-before (the commit before).
# Run from the repo root:   OUT=DIR bash reports/gpu/2026-12-04-h200-worker-capacity/worker-capacity.sh
source scripts/gpu/preamble.sh  # $B, $OUT/device.txt, log, campaign
A=$PWD/build-h200/bin/kvfuzz-before
log "before: $($A --version)"
stages() {  # NAME BINARY ARGS...: default cases with the stage table and the workers started
  local name=$1 bin=$2; shift 2; local s=$SECONDS
  timeout 150 $bin run --target cuda --seed 1 --stats "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  log "$name rc=$? $((SECONDS - s)) s: $(grep -E '^kvfuzz: ([0-9]+ cases in|host time)' "$OUT/$name.log" | tr '\n' ' ')" \
      "workers: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['workers'])" "$OUT/$name.json")"
}
for j in 8 16; do
  stages before-fork-j$j $A --cases 20000 -j $j
  stages after-fork-j$j $B --cases 20000 -j $j
done
stages after-fork-j16-100k $B --cases 100000 -j 16
stages after-nofork-j16-100k $B --cases 100000 --no-fork -j 16
campaign quant-fork-j16 $B --target cuda --config configs/quant.json --cases 20000 --seed 6203 -j 16
campaign large-fork-j4 $B --target cuda --config configs/large.json --cases 200 --seed 6204 -j 4
cat $OUT/device.txt
