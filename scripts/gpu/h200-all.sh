#!/usr/bin/env bash
# Every GPU check of issues 4, 5, 7, 8 and 10 in one call on one H200 (the device tool allows few,
# full calls). Run from the repository root of the commit under test, on the GPU machine:
#
#   scripts/gpu/h200-all.sh CARRY_DIR OUT_DIR
#
# CARRY_DIR is made here (no GPU needed) by scripts/gpu/h200-all-pack.sh. Phase 1 runs the benchmark
# alone on a quiet GPU; phase 2 runs four groups of correctness checks concurrently (the host side of
# every campaign is CPU-bound; the GPU is not the bottleneck). Every step has its own time limit and
# runs even if an earlier one failed. Writes OUT_DIR/summary.txt (all groups), OUT_DIR/bench.md,
# OUT_DIR/bench.json and OUT_DIR/results.tar.gz (every log, JSON summary and saved case).
# GROUP_LIMIT_S (default 470) bounds each group of phase 2.
set -u
usage="usage: scripts/gpu/h200-all.sh CARRY_DIR OUT_DIR"
C=$(cd "${1:?$usage}" && pwd) || exit 2; OUT=$(mkdir -p "${2:?$usage}" && cd "$2" && pwd) || exit 2
W=$(mktemp -d)/h200-all; mkdir -p "$W"
BIN=$C/bin
export KVFUZZ_PYTHON=python3 TRITON_CACHE_DIR=$W/triton-cache
unset TRITON_INTERPRET
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  "$BIN/kvfuzz" --version; git rev-parse HEAD 2>/dev/null; } > "$W/00-device.txt" 2>&1

# One kvfuzz command with a time limit: NAME LIMIT_S command...; appends one line to the group's summary.
step() {
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$W/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - start)) s | $(grep -h 'cases/s' "$W/$name.log" | tail -1) | $(tail -1 "$W/$name.log")"
  echo "   \$ ${*#$BIN/}" | sed "s#$BIN/##g; s#$C/##g"
}

# ---- phase 1: benchmark alone --------------------------------------------------------------------
start=$SECONDS
scripts/gpu/bench.sh "$C/bench" "$W/bench" > "$W/bench-stdout.log" 2>&1
echo "bench: exit $?, $((SECONDS - start)) s" > "$W/01-bench.txt"
cp "$W/bench/bench.md" "$W/bench/bench.json" "$OUT/" 2>/dev/null

# ---- phase 2: correctness, four groups at once ---------------------------------------------------
group_triton() {  # issue 5: 100,000 cases on the AOT triton target, triton == cuda, Triton mutants
  step triton-default 240 "$BIN/kvfuzz" run --target triton --cases 60000 --seed 101 -j 5 --json "$W/triton-default.json" --corpus-out "$W/f-triton-default"
  step triton-quant 200 "$BIN/kvfuzz" run --target triton --config configs/quant.json --cases 40000 --seed 102 -j 5 --json "$W/triton-quant.json" --corpus-out "$W/f-triton-quant"
  step compare-triton-cuda 90 "$BIN/kvfuzz" compare --target triton --against cuda --cases 10000 --seed 103 -j 4 -o "$W/cmp-triton-cuda"
  step compare-triton-cuda-quant 60 "$BIN/kvfuzz" compare --target triton --against cuda --config configs/quant.json --cases 5000 --seed 104 -j 4 -o "$W/cmp-triton-cuda-q"
  step triton-replay-corpus 30 "$BIN/kvfuzz" replay corpus --target triton
  for m in "$C"/triton-mutants/*/; do  # each rule's profile and case bound from mutants.json
    m=${m%/}; n=${m##*/}
    read -r -a opts < <(python3 -c "import json,sys; r={x['name']:x for x in json.load(open('tests/mutants/mutants.json'))['mutants']}[sys.argv[1]]; print(*(['--config', r['config']] if 'config' in r else []), '--cases', r.get('max_cases', 2000))" "$n")
    step "mutant-$n" 60 env KVFUZZ_TRITON_KERNELS="$m" "$BIN/kvfuzz" run --target triton "${opts[@]}" --seed 1 --json "$W/mutant-$n.json" --corpus-out "$W/f-mutant-$n"
  done
}
group_cuda() {  # issues 4 and 7: the tuned CUDA kernel, large caches, GPU-only mutants, faults
  step cuda-default 90 "$BIN/kvfuzz" run --target cuda --cases 30000 --seed 201 -j 4 --json "$W/cuda-default.json" --corpus-out "$W/f-cuda-default"
  step cuda-quant 90 "$BIN/kvfuzz" run --target cuda --config configs/quant.json --cases 20000 --seed 202 -j 4 --json "$W/cuda-quant.json" --corpus-out "$W/f-cuda-quant"
  step compare-cuda-emu 60 "$BIN/kvfuzz" compare --target cuda --against cuda-emu --cases 3000 --seed 203 -j 4 -o "$W/cmp-cuda-emu"
  step cuda-large 120 "$BIN/kvfuzz" run --target cuda --config configs/large.json --cases 1000000 --seconds 60 --seed 204 -j 4 --max-shrink-tries 20 --json "$W/cuda-large.json" --corpus-out "$W/f-cuda-large"
  step compare-cuda-emu-large 120 "$BIN/kvfuzz" compare --target cuda --against cuda-emu --config configs/large.json --cases 40 --seed 205 -j 4 -o "$W/cmp-large"
  step mutant-address-product-large 120 "$BIN/kvfuzz-mutant-address-product-in-32-bit" run --target cuda --config configs/large.json --cases 200 --seed 1 --max-shrink-tries 30 --json "$W/mutant-address-product.json" --corpus-out "$W/f-mutant-address-product"
  step wild-write-keep-going 120 "$BIN/kvfuzz-mutant-wild-write" run --target cuda --cases 20 --seed 1 --keep-going --confirm-runs 1 --max-shrink-tries 3 --json "$W/wild-write.json" --corpus-out "$W/f-wild-write"
  for n in misaligned-vector-store next-slot-race empty-batch-launched; do
    step "mutant-$n" 90 "$BIN/kvfuzz-mutant-$n" run --target cuda --cases 2000 --seed 1 --json "$W/mutant-$n.json" --corpus-out "$W/f-mutant-$n"
  done
  step memcheck-corpus 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/kvfuzz" replay corpus --target cuda --no-fork
}
group_python() {  # issues 5 and 10: the torch API through python-cuda:, GPU pytest
  export KVFUZZ_TRITON_PKG=$PWD/kernels/triton
  step python-cuda-default 150 "$BIN/kvfuzz" run --target python-cuda:kvfuzz_triton.api:kv_append --cases 1500 --seed 301 -j 4 --json "$W/python-cuda-default.json" --corpus-out "$W/f-python-cuda"
  step python-cuda-quant 100 "$BIN/kvfuzz" run --target python-cuda:kvfuzz_triton.api:kv_append --config configs/quant.json --cases 600 --seed 302 -j 4 --json "$W/python-cuda-quant.json" --corpus-out "$W/f-python-cuda-q"
  step pytest-triton-gpu 120 env KVFUZZ_TRITON_GPU=1 python3 -m pytest tests/triton -q -x -p no:cacheprovider
}
group_plugins() {  # issue 10: the device build of our kernel through the C ABI
  mkdir -p "$W/plugins"
  CASES=10000 timeout 400 scripts/gpu/plugins.sh run "$C/plugins-bin" "$W/plugins" 3 > "$W/plugins-stdout.log" 2>&1
  echo "plugins.sh: exit $?"; cat "$W/plugins/summary.txt" 2>/dev/null
}
# Each group is bounded so that the whole call stays inside the device tool's 10-minute limit
# (GROUP_LIMIT_S, default 470); a group cut short keeps the lines it has written.
export -f step group_triton group_cuda group_python group_plugins
export W BIN C
L=${GROUP_LIMIT_S:-470}
timeout "$L" bash -c group_triton > "$W/10-triton.txt" 2>&1 &
timeout "$L" bash -c group_cuda > "$W/20-cuda.txt" 2>&1 &
timeout "$L" bash -c group_python > "$W/30-python.txt" 2>&1 &
timeout "$L" bash -c group_plugins > "$W/40-plugins.txt" 2>&1 &
wait
cat "$W"/[0-9]*.txt > "$OUT/summary.txt"
tar -czf "$OUT/results.tar.gz" -C "$(dirname "$W")" --exclude=triton-cache h200-all
cat "$OUT/summary.txt"
