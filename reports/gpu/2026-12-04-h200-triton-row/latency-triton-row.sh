#!/usr/bin/env bash
# Issue 20: the Triton row kernel (kv_append_row_kernel, what kv_append runs for a plain call), in one
# H200 call from the repository root with OUT set:
#   OUT=DIR bash reports/gpu/2026-12-04-h200-triton-row/latency-triton-row.sh [bench|all]
# bench: bench.py (cuda, triton = the row kernel, its warp counts w1/w2/w8 and the general kernel's
# token/head variants at every T, copy) and bench/triton_floor.py. all: that, then the Triton suite on
# CUDA tensors with every direct launch checked against the JIT, python-cuda campaigns of the torch API
# (default, quant), a mutated package that must be caught through it, and the AOT `triton` target
# (the general kernel) on 100,000 default cases.
# Carried: build-h200/bin/kvfuzz (with the triton target), build-h200/bench/libkvf_cuda.so.
source scripts/gpu/preamble.sh  # $B, log, campaign, $OUT/device.txt
export TRITON_CACHE_DIR=$(mktemp -d)/triton-cache  # shared by the campaign's jobs, not packed
s=$SECONDS
PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench.py --cuda-lib "cuda=build-h200/bench/libkvf_cuda.so" \
  --cases nhd-bf16,hnd-bf16,nhd-fp8,hnd-fp8 --no-torch --triton-variants 1,16,256,4096,65536 --budget-s 280 \
  --out "$OUT/bench" > "$OUT/bench.log" 2>&1
log "bench rc=$? $((SECONDS - s)) s"
s=$SECONDS
timeout 120 python3 bench/triton_floor.py > "$OUT/triton_floor.md" 2>&1
log "triton_floor rc=$? $((SECONDS - s)) s"
if [ "${1:-all}" = all ]; then
  s=$SECONDS
  KVFUZZ_TRITON_GPU=1 KVFUZZ_TRITON_DIRECT_LAUNCH=check timeout 240 python3 -m pytest -q -p no:cacheprovider tests/triton \
    > "$OUT/pytest-gpu-check.log" 2>&1
  log "pytest tests/triton on the GPU, direct launches checked: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/pytest-gpu-check.log")"
  export KVFUZZ_TRITON_PKG=$PWD/kernels/triton KVFUZZ_PYTHON=python3
  T=python-cuda:kvfuzz_triton.api:kv_append
  campaign api-default $B --target $T --cases 3000 --seed 2001 -j 8
  campaign api-quant $B --target $T --config configs/quant.json --cases 1500 --seed 2002 -j 8
  # The catalogue's row-kernel mutant, applied to a copy of the package, through the same target.
  M=$(mktemp -d)/pkg; cp -r kernels/triton "$M"
  python3 - "$M/kvfuzz_triton/kv_append.py" <<'EOF'
import json, sys
rule = next(r for r in json.load(open("tests/mutants/mutants.json"))["mutants"] if r["name"] == "triton-row-v-quantised-with-k-scales")
src = open(sys.argv[1]).read()
assert src.count(rule["find"]) == 1
open(sys.argv[1], "w").write(src.replace(rule["find"], rule["replace"]))
EOF
  KVFUZZ_TRITON_PKG=$M campaign api-mutant-row-v-quantised-with-k-scales $B --target $T --config configs/quant.json \
    --cases 300 --seed 1
  unset KVFUZZ_TRITON_PKG
  campaign triton-aot-default-100k $B --target triton --cases 100000 --seed 2003 -j 8
  campaign triton-aot-quant $B --target triton --config configs/quant.json --cases 30000 --seed 2004 -j 8
fi
cat "$OUT/device.txt"
