#!/usr/bin/env bash
# One H200 call (issue 20): where the fuzzer's host time goes, per case and stage (`run --stats`:
# draw, arena fill, golden model, hand-off to the worker, target run, copy back, diff), for the
# default profile on `cuda` with 8 and 16 campaign threads (and 8 without workers) and on `golden`
# (no GPU) with 16, with its worker processes and without them (--no-fork: no hand-off, so the difference is the worker
# round trip's cost on that host).
# Carried: build-h200/bin/kvfuzz (strip -o build-h200/bin/kvfuzz build/kvfuzz). Run from the repo
# root with OUT set:   OUT=DIR bash reports/gpu/2026-12-04-h200-latency/host-stages.sh
source scripts/gpu/preamble.sh  # $B, $OUT/device.txt
for spec in cuda:8 cuda:16 cuda-nofork:8 golden:16 golden-nofork:16; do
  name=${spec%%:*} j=${spec##*:}
  t=${name%-nofork} extra=()
  [ "$name" != "$t" ] && extra=(--no-fork)
  s=$SECONDS
  timeout 150 $B run --target $t --cases 20000 --seed 1 -j $j --stats ${extra[@]+"${extra[@]}"} --json $OUT/$name-j$j.json > $OUT/$name-j$j.log 2>&1
  echo "$name -j $j rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
  grep -E "^kvfuzz: (host time|host CPU|[0-9]+ cases in)" $OUT/$name-j$j.log
done
cat $OUT/device.txt
