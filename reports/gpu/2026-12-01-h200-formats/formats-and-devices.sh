#!/usr/bin/env bash
# One H200 call (2026-12-01): issue 14's configs/formats.json on cuda and triton (100,000 cases each,
# concurrently), compare triton vs cuda on it, and issue 19's gpu.devices test. Run from the repo root
# on the GPU machine with build-h200/bin/kvfuzz carried (strip -o build-h200/bin/kvfuzz build/kvfuzz)
# and OUT set:   OUT=DIR bash reports/gpu/2026-12-01-h200-formats/formats-and-devices.sh
set -u
B=$PWD/build-h200/bin/kvfuzz
export KVFUZZ_PYTHON=python3
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $B --version; nproc; } > $OUT/device.txt 2>&1
s=$SECONDS
timeout 240 $B run --target cuda --config configs/formats.json --cases 100000 --seed 14 -j 8 --stats --json $OUT/formats-cuda.json --corpus-out $OUT/f-cuda > $OUT/formats-cuda.log 2>&1 &
timeout 240 $B run --target triton --config configs/formats.json --cases 100000 --seed 15 -j 7 --stats --json $OUT/formats-triton.json --corpus-out $OUT/f-triton > $OUT/formats-triton.log 2>&1 &
wait
echo "campaigns: $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
timeout 200 $B compare --target triton --against cuda --config configs/formats.json --cases 20000 --seed 16 -j 8 > $OUT/compare.log 2>&1
echo "compare rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
KVFUZZ_BIN=$B timeout 300 python3 tests/gpu/test_devices.py -v > $OUT/devices.log 2>&1
echo "devices rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
for f in formats-cuda formats-triton; do tail -3 $OUT/$f.log; done; tail -4 $OUT/compare.log; tail -8 $OUT/devices.log; cat $OUT/device.txt
