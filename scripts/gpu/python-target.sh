#!/usr/bin/env bash
# The Python-kernel target on a GPU (issue 10): kvfuzz_triton's own torch API, fuzzed through
# python-cuda:kvfuzz_triton.api:kv_append on CUDA tensors, plus a mutated copy of the package that
# must be caught. Needs a Python with torch (CUDA) and triton 3.6 (the H200 machine's python3).
#
#   scripts/gpu/python-target.sh BIN_DIR OUT_DIR [CASES] [JOBS]
#
# BIN_DIR holds kvfuzz (scripts/gpu/pack-binaries.sh). Run from the repository root: the worker
# imports kvfuzz_triton from ./kernels/triton (KVFUZZ_TRITON_PKG) with $KVFUZZ_PYTHON (default
# python3). The first case of each kernel specialisation includes Triton's JIT compile (seconds;
# the on-disk cache is shared by the jobs), hence the modest case counts. Writes OUT_DIR/summary.txt
# and OUT_DIR/results.tar.gz (logs, JSON summaries, findings). Every step runs even if one fails.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; CASES=${3:-2000}; JOBS=${4:-4}
mkdir -p "$OUT"
W=$(mktemp -d)/python-target
mkdir -p "$W"
S="$OUT/summary.txt"
step() { echo "== $*" | tee -a "$S"; }
export KVFUZZ_TRITON_PKG=$PWD/kernels/triton
export KVFUZZ_PYTHON=${KVFUZZ_PYTHON:-python3}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$(dirname "$W")/triton-cache}  # not packed
unset TRITON_INTERPRET
TARGET=python-cuda:kvfuzz_triton.api:kv_append

step "device and versions"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
"$BIN/kvfuzz" --version | tee -a "$S"
"$KVFUZZ_PYTHON" -c "import sys, torch, triton, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)" 2>&1 | tee -a "$S"
git rev-parse HEAD 2>/dev/null | tee -a "$S"

run_campaign() {  # name, then kvfuzz run arguments
  local name=$1; shift
  step "campaign $name: kvfuzz run $*"
  local start=$SECONDS
  "$BIN/kvfuzz" run "$@" --json "$W/run-$name.json" --corpus-out "$W/findings-$name" > "$W/run-$name.log" 2>&1
  echo "exit $?: $(grep 'cases/s' "$W/run-$name.log" | tail -1) | $(tail -1 "$W/run-$name.log") | $((SECONDS - start)) s wall" | tee -a "$S"
}
run_campaign default --target "$TARGET" --cases "$CASES" --seed 1 -j "$JOBS"
run_campaign quant --target "$TARGET" --config configs/quant.json --cases "$((CASES / 2))" --seed 11 -j "$JOBS"

# A mutated copy (padding slot -1 is written) must be caught through the same target.
step "mutated kvfuzz_triton copy (write = slot >= 0 -> write = slot >= -1): must exit 1"
M=$W/mutant-pkg
cp -r kernels/triton "$M"
sed -i 's/write = slot >= 0 /write = slot >= -1 /' "$M/kvfuzz_triton/kv_append.py"
grep -c "write = slot >= -1 " "$M/kvfuzz_triton/kv_append.py" | sed 's/^/mutation sites: /' | tee -a "$S"
KVFUZZ_TRITON_PKG=$M "$BIN/kvfuzz" run --target "$TARGET" --cases 500 --seed 2 --json "$W/run-mutant.json" \
    --corpus-out "$W/findings-mutant" > "$W/run-mutant.log" 2>&1
echo "exit $?: $(grep -E '^kvfuzz: FAIL case' "$W/run-mutant.log" | head -1) | $(tail -1 "$W/run-mutant.log")" | tee -a "$S"

tar -C "$(dirname "$W")" -czf "$OUT/results.tar.gz" python-target
echo "packed $OUT/results.tar.gz" | tee -a "$S"
