#!/usr/bin/env bash
# Issue 20 (Python API host time <= 15 µs per call), one call of the GPU machine, nothing to build or
# carry: bench/api_overhead.py (kv_append's cached launcher, through fastlaunch.c and through Triton's
# launcher, against Triton's JIT path, verified bit for
# bit first, with a breakdown of the cached path), then the Triton pytest on the GPU twice: with
# KVFUZZ_TRITON_DIRECT_LAUNCH=check (every launch-plan and compiled-kernel hit re-derived by the full
# validation and Triton's own binder and cache, and required equal) and with the default (=1), both
# with the default launcher (the fast one).
# Run from the repo root with OUT set:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-quant-plans/api-overhead.sh
# Writes OUT/device.txt (date, GPU, driver, versions, cores, then each step's exit code and seconds),
# OUT/api_overhead.md and .json, OUT/bench.log, OUT/pytest-check.log, OUT/pytest-default.log.
# Under 10 minutes: the steps' timeouts add up to 550 s (about 3.5 minutes expected).
set -u
: "${OUT:?usage: OUT=DIR bash reports/gpu/2026-12-04-h200-quant-plans/api-overhead.sh}"
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  echo "cores: $(nproc)"; git rev-parse --short HEAD 2>/dev/null; } > "$OUT/device.txt" 2>&1
s=$SECONDS
timeout 270 python3 bench/api_overhead.py --out "$OUT" > "$OUT/bench.log" 2>&1
echo "bench rc=$? $((SECONDS - s)) s" >> "$OUT/device.txt"
s=$SECONDS
KVFUZZ_TRITON_GPU=1 KVFUZZ_TRITON_DIRECT_LAUNCH=check timeout 180 python3 -m pytest -q -p no:cacheprovider tests/triton \
  > "$OUT/pytest-check.log" 2>&1
echo "pytest check rc=$? $((SECONDS - s)) s" >> "$OUT/device.txt"
s=$SECONDS
KVFUZZ_TRITON_GPU=1 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/triton > "$OUT/pytest-default.log" 2>&1
echo "pytest default rc=$? $((SECONDS - s)) s" >> "$OUT/device.txt"
cat "$OUT/api_overhead.md" 2>/dev/null || tail -20 "$OUT/bench.log"
echo "== pytest check"; tail -3 "$OUT/pytest-check.log"
echo "== pytest default"; tail -3 "$OUT/pytest-default.log"
cat "$OUT/device.txt"
