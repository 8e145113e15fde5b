#!/usr/bin/env bash
# The triton target (Triton kernels compiled ahead of time) on a GPU: campaigns, corpus replay, the
# comparison with the cuda target, two rewritten kernels that must be caught, and the GPU pytest.
#
#   reports/gpu/2026-11-30-h200-triton-aot/triton-aot.sh pack BUILD_DIR CARRY_DIR    on the build machine (no GPU needed):
#       strips BUILD_DIR/kvfuzz into CARRY_DIR and compiles two rewritten copies of kv_append.py
#       (kernels/triton/aot_compile.py) into CARRY_DIR/mutants/NAME/ (manifest.json + cubins)
#   reports/gpu/2026-11-30-h200-triton-aot/triton-aot.sh run CARRY_DIR OUT_DIR [JOBS]   on the GPU machine, from the
#       repository root (reads configs/, corpus/, tests/triton/): writes OUT_DIR/summary.txt and
#       OUT_DIR/logs.tar.gz. Every step runs even if one fails. SKIP_CUDA=1: no cuda campaigns.
#
# The rewritten kernels run through `KVFUZZ_TRITON_KERNELS=DIR kvfuzz run --target triton`:
#   dim-loop-first-tile   _append_rows stores only the first BLOCK_D dims of each row (missing writes
#                         for head_dim > 64, the AOT tile: the interpreter tests' tiles never loop)
#   padding-not-skipped   slot -1 is written like a real slot (a write before its block)
set -u
mode=${1:-}
case "$mode" in
pack)
  set -e
  BUILD=$2; CARRY=$3
  mkdir -p "$CARRY/mutants"
  strip -o "$CARRY/kvfuzz" "$BUILD/kvfuzz"
  py=${KVFUZZ_TRITON_PYTHON:-build/venv-triton/bin/python}
  for name in dim-loop-first-tile padding-not-skipped; do
    src=$(mktemp -d)
    cp -r kernels/triton/kvfuzz_triton "$src/"
    "$py" - "$src/kvfuzz_triton/kv_append.py" "$name" <<'EOF'
import sys
path, name = sys.argv[1], sys.argv[2]
rules = {
    "dim-loop-first-tile": ("    for d0 in range(0, head_dim, BLOCK_D):\n        dims = (d0 + tl.arange(0, BLOCK_D)).to(tl.int64)\n        mask = head_mask[:, None] & (dims < head_dim)[None, :]\n        src =",
                            "    for d0 in range(0, BLOCK_D, BLOCK_D):\n        dims = (d0 + tl.arange(0, BLOCK_D)).to(tl.int64)\n        mask = head_mask[:, None] & (dims < head_dim)[None, :]\n        src ="),
    "padding-not-skipped": ("    write = slot >= 0  # slot < 0: padding, skipped", "    write = slot >= -1  # slot < 0: padding, skipped"),
}
old, new = rules[name]
s = open(path).read()
assert s.count(old) == 1, f"{name}: the line to rewrite is not in {path} exactly once"
open(path, "w").write(s.replace(old, new))
EOF
    "$py" kernels/triton/aot_compile.py --source-dir "$src" --out-dir "$CARRY/mutants/$name"
    rm -rf "$CARRY/mutants/$name/cache" "$CARRY/mutants/$name/embed.cpp" "$src"
  done
  du -sh "$CARRY"
  ;;
run)
  CARRY=$(cd "$2" && pwd); OUT=$3; JOBS=${4:-8}
  BIN="$CARRY/kvfuzz"
  mkdir -p "$OUT"
  W=$(mktemp -d)/work
  mkdir -p "$W"
  S="$OUT/summary.txt"
  step() { echo "== $*" | tee -a "$S"; }
  last() { grep -E "$1" "$2" | tail -1; }

  step "device"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
  "$BIN" --version | tee -a "$S"
  "$BIN" targets > "$W/targets.txt" 2>&1
  grep -A1 '^triton$' "$W/targets.txt" | tee -a "$S"

  run_campaign() {  # name, then kvfuzz run arguments
    local name=$1; shift
    step "kvfuzz run $*"
    "$BIN" run "$@" --json "$W/run-$name.json" --corpus-out "$W/findings-$name" > "$W/run-$name.log" 2>&1
    echo "exit $?: $(last 'cases/s' "$W/run-$name.log") | $(tail -1 "$W/run-$name.log")" | tee -a "$S"
  }
  run_campaign default --target triton --cases 20000 --seed 1 -j "$JOBS"
  run_campaign quant --target triton --config configs/quant.json --cases 20000 --seed 1 -j "$JOBS"
  # The same cases on cuda: both held to the golden arena bit for bit, so passing both means
  # byte-identical arenas (SKIP_CUDA=1 skips these two).
  if [ "${SKIP_CUDA:-0}" != 1 ]; then
    run_campaign default-cuda --target cuda --cases 20000 --seed 1 -j "$JOBS"
    run_campaign quant-cuda --target cuda --config configs/quant.json --cases 20000 --seed 1 -j "$JOBS"
  fi

  step "kvfuzz replay corpus --target triton"
  "$BIN" replay corpus --target triton > "$W/replay.log" 2>&1
  echo "exit $?: $(tail -1 "$W/replay.log")" | tee -a "$S"

  if "$BIN" --help 2>&1 | grep -qE '^ +compare '; then
    for cfg in default quant; do
      args=(); [ "$cfg" = quant ] && args=(--config configs/quant.json)
      step "kvfuzz compare --target triton --against cuda --cases 5000 --seed 2 ${args[*]}"
      "$BIN" compare --target triton --against cuda --cases 5000 --seed 2 "${args[@]}" -j "$JOBS" \
          > "$W/compare-$cfg.log" 2>&1
      echo "exit $?: $(tail -2 "$W/compare-$cfg.log" | tr '\n' ' ')" | tee -a "$S"
    done
  else
    step "kvfuzz compare: not in this build (skipped)"
  fi

  for m in "$CARRY"/mutants/*/; do
    name=$(basename "$m")
    step "mutant $name: KVFUZZ_TRITON_KERNELS=mutants/$name kvfuzz run --target triton --cases 2000 --seed 1"
    KVFUZZ_TRITON_KERNELS="$m" "$BIN" run --target triton --cases 2000 --seed 1 -j "$JOBS" \
        --json "$W/mutant-$name.json" --corpus-out "$W/mutant-$name" > "$W/mutant-$name.log" 2>&1
    rc=$?
    kind=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); f=s['failures']; print(f[0]['findings'][0]['kind'] + ' after ' + str(f[0]['case_index']+1) + ' cases' if f else 'SURVIVED')" "$W/mutant-$name.json" 2>/dev/null || echo "no summary")
    echo "exit $rc (1 = caught): $kind | $(tail -1 "$W/mutant-$name.log")" | tee -a "$S"
  done

  step "KVFUZZ_TRITON_GPU=1 pytest tests/triton (the JIT-compiled kernel)"
  (cd tests/triton && KVFUZZ_TRITON_GPU=1 python3 -m pytest -q -p no:cacheprovider . > "$W/pytest-gpu.log" 2>&1)
  echo "exit $?: $(tail -1 "$W/pytest-gpu.log")" | tee -a "$S"

  tar -C "$(dirname "$W")" -czf "$OUT/logs.tar.gz" work
  echo "packed $OUT/logs.tar.gz" | tee -a "$S"
  ;;
*)
  sed -n '2,19p' "$0"
  exit 2
  ;;
esac
