#!/usr/bin/env bash
# Runs kvfuzz's GPU checks on a machine with a CUDA device and packs the results.
#
#   reports/gpu/2026-11-30-h200/h200-session.sh BIN_DIR OUT_DIR [JOBS]
#
# BIN_DIR holds kvfuzz and the kvfuzz-mutant-* binaries built with -DKVFUZZ_GPU_MUTANTS=ON
# (reports/gpu/2026-11-30-h200/pack-binaries.sh makes such a folder). Run from the repository root (it reads
# corpus/ and configs/). Writes OUT_DIR/summary.txt and OUT_DIR/results.tar.gz (logs, JSON
# summaries, any findings, built in a temporary folder). Every step runs even if one fails.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; JOBS=${3:-8}
mkdir -p "$OUT"
W=$(mktemp -d)/work
mkdir -p "$W/mutants"
S="$OUT/summary.txt"
step() { echo "== $*" | tee -a "$S"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
"$BIN/kvfuzz" --version | tee -a "$S"
"$BIN/kvfuzz" targets > "$W/targets.txt" 2>&1

step "corpus replay on cuda"
"$BIN/kvfuzz" replay corpus --target cuda --json "$W/replay-corpus.json" > "$W/replay-corpus.log" 2>&1
echo "exit $?: $(tail -1 "$W/replay-corpus.log")" | tee -a "$S"

run_campaign() {  # name, then kvfuzz run arguments
  local name=$1; shift
  step "campaign $name: kvfuzz run $*"
  "$BIN/kvfuzz" run "$@" --json "$W/run-$name.json" --corpus-out "$W/findings-$name" > "$W/run-$name.log" 2>&1
  echo "exit $?: $(grep 'cases/s' "$W/run-$name.log" | tail -1) | $(tail -1 "$W/run-$name.log")" | tee -a "$S"
}
run_campaign default-cuda --target cuda --cases 60000 --seed 1 -j "$JOBS"
run_campaign quant-cuda --target cuda --config configs/quant.json --cases 40000 --seed 11 -j "$JOBS"
run_campaign default-cuda-1job --target cuda --cases 3000 --seed 7 -j 1
run_campaign default-emu-same-seed --target cuda-emu --cases 60000 --seed 1 -j "$JOBS"

step "mutants on cuda (each: kvfuzz-mutant-NAME run --target cuda --cases 2000 --seed 1)"
for m in "$BIN"/kvfuzz-mutant-*; do
  name=${m##*/kvfuzz-mutant-}
  config=()
  case "$name" in
    quant-*|fp8-*|e4m3-*|int8-*|per-block-*|per-head-*|kv-scales-*|zero-row-*|dynamic-scale-*) config=(--config configs/quant.json) ;;
  esac
  "$m" run --target cuda --cases 2000 --seed 1 "${config[@]}" --json "$W/mutants/$name.json" \
      --corpus-out "$W/mutants/$name" > "$W/mutants/$name.log" 2>&1
  rc=$?
  kind=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); f=s['failures']; print(f[0]['findings'][0]['kind'] + ' after ' + str(f[0]['case_index']+1) + ' cases' if f else 'SURVIVED')" "$W/mutants/$name.json" 2>/dev/null || echo "no summary")
  echo "$name: exit $rc, $kind" | tee -a "$S"
done

step "compute-sanitizer memcheck over the corpus (in-process launches)"
compute-sanitizer --tool memcheck --error-exitcode 99 "$BIN/kvfuzz" replay corpus --target cuda --no-fork \
    > "$W/memcheck.log" 2>&1
echo "exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tail -1) | $(grep -E '^kvfuzz:' "$W/memcheck.log" | tail -1)" | tee -a "$S"

tar -C "$(dirname "$W")" -czf "$OUT/results.tar.gz" work
echo "packed $OUT/results.tar.gz" | tee -a "$S"
