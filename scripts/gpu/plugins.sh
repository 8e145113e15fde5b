#!/usr/bin/env bash
# Plugin targets on a GPU machine (issue 10): kernels/cuda through the plugin ABI on the device.
#
#   scripts/gpu/plugins.sh pack BUILD_DIR OUT_DIR      (here, where the build and nvcc are)
#   scripts/gpu/plugins.sh run BIN_DIR OUT_DIR [JOBS]  (on the GPU machine, from the repository root)
#
# pack: copies BUILD_DIR's kvfuzz (a CUDA build) and plugins (BUILD_DIR/plugins/*.so), stripped, and
# builds two device plugins from mutated copies of kernels/cuda (tests/mutants/apply_mutant.py):
# padding-not-skipped (a wrong write: oob_write / padding_leak) and wild-write (a faulting kernel:
# a crash, and the campaign goes on). Writes OUT_DIR/plugins-bin.tar.xz (unpacks to plugins-bin/).
# run: campaigns of the device plugin (default and quant profiles, clean), the same seed on the
# built-in `cuda` target for comparison, the two mutant device plugins (each must be caught), the
# host plugins as a control, and a bad --device (exit 3). Writes OUT_DIR/summary.txt and
# OUT_DIR/plugins-results.tar.gz. Every step runs even if one fails. CASES (default 30000) sets the
# size of the large device-plugin campaigns (the others scale with it) to fit a time budget.
set -u
usage() { echo "usage: $0 pack BUILD_DIR OUT_DIR | run BIN_DIR OUT_DIR [JOBS]" >&2; exit 2; }
[ $# -ge 3 ] || usage
mode=$1

if [ "$mode" = pack ]; then
  set -eo pipefail
  BUILD=$2; OUT=$3
  SRC=$(cd "$(dirname "$0")/../.." && pwd)
  CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
  ARCH=${KVFUZZ_CUDA_ARCH:-90}
  [ -f "$BUILD/plugins/kvfuzz_cuda_plugin_device.so" ] || { echo "$BUILD/plugins/kvfuzz_cuda_plugin_device.so missing: build target kvfuzz_cuda_plugin_device (needs nvcc)" >&2; exit 2; }
  tmp=$(mktemp -d)
  mkdir -p "$tmp/plugins-bin" "$OUT"
  strip -o "$tmp/plugins-bin/kvfuzz" "$BUILD/kvfuzz"
  for p in "$BUILD"/plugins/*.so; do strip -o "$tmp/plugins-bin/${p##*/}" "$p"; done
  for m in padding-not-skipped wild-write; do
    dir=$tmp/src-$m
    python3 "$SRC/tests/mutants/apply_mutant.py" "$SRC/tests/mutants/mutants.json" "$SRC/kernels/cuda" "$m" "$dir"
    # The device build of examples/plugins/cuda/plugin.cpp (as kvfuzz_add_cuda_plugin(... DEVICE)).
    nvcc -std=c++17 -O3 -arch=sm_$ARCH -Xcompiler -fPIC,-fvisibility=hidden -I"$dir" -c "$dir/kv_append.cu" -o "$dir/kv_append.o"
    c++ -std=c++20 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -DKVFUZZ_PLUGIN_DEVICE -I"$dir" \
        -isystem "$CUDA_INC" -I"$SRC/include" -c "$SRC/examples/plugins/cuda/plugin.cpp" -o "$dir/plugin.o"
    c++ -shared -o "$tmp/plugins-bin/device-mutant-$m.so" "$dir/plugin.o" "$dir/kv_append.o" \
        -L"$(dirname "$CUDA_INC")/lib64" -l:libcudart_static.a -ldl -lrt -lpthread -Wl,--exclude-libs,ALL
    strip "$tmp/plugins-bin/device-mutant-$m.so"
  done
  tar -C "$tmp" -cJf "$OUT/plugins-bin.tar.xz" plugins-bin
  rm -rf "$tmp"
  ls -la "$OUT/plugins-bin.tar.xz"
  exit 0
fi

[ "$mode" = run ] || usage
BIN=$(cd "$2" && pwd); OUT=$3; JOBS=${4:-8}; CASES=${CASES:-30000}
mkdir -p "$OUT"
W=$(mktemp -d)/plugins
mkdir -p "$W"
S="$OUT/summary.txt"
step() { echo "== $*" | tee -a "$S"; }
K="$BIN/kvfuzz"
DEV="plugin:$BIN/kvfuzz_cuda_plugin_device.so"

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$S"
"$K" --version | tee -a "$S"

run_campaign() {  # name, then kvfuzz run arguments
  local name=$1; shift
  step "campaign $name: kvfuzz run $*"
  "$K" run "$@" --json "$W/run-$name.json" --corpus-out "$W/findings-$name" > "$W/run-$name.log" 2>&1
  echo "exit $?: $(grep 'cases/s' "$W/run-$name.log" | tail -1) | $(tail -1 "$W/run-$name.log")" | tee -a "$S"
}
run_campaign device-plugin-default --target "$DEV" --cases "$CASES" --seed 1 -j "$JOBS"
run_campaign device-plugin-quant --target "$DEV" --config configs/quant.json --cases $((CASES * 2 / 3)) --seed 11 -j "$JOBS"
run_campaign device-plugin-1job --target "$DEV" --cases $((CASES / 15)) --seed 7 -j 1
run_campaign cuda-same-seed --target cuda --cases "$CASES" --seed 1 -j "$JOBS"
run_campaign host-cuda-plugin --target "plugin:$BIN/kvfuzz_cuda_plugin.so" --cases 3000 --seed 1 -j "$JOBS"
run_campaign host-naive-plugin --target "plugin:$BIN/naive.so" --cases 3000 --seed 1 -j "$JOBS"

step "corpus replay on the device plugin"
"$K" replay corpus --target "$DEV" --json "$W/replay-corpus.json" > "$W/replay-corpus.log" 2>&1
echo "exit $?: $(tail -1 "$W/replay-corpus.log")" | tee -a "$S"

step "mutant device plugins (each must exit 1 with the expected kind)"
# padding-not-skipped: stop at the first failure (it fails on most cases; --keep-going would confirm and
# shrink every one). wild-write: --keep-going over 10 cases, every one a crash in a fresh worker.
for m in padding-not-skipped wild-write; do
  opts=(--cases 2000); [ "$m" = wild-write ] && opts=(--cases 10 --keep-going --confirm-runs 1 --max-shrink-tries 3)
  "$K" run --target "plugin:$BIN/device-mutant-$m.so" "${opts[@]}" --seed 1 \
      --json "$W/mutant-$m.json" --corpus-out "$W/findings-mutant-$m" > "$W/mutant-$m.log" 2>&1
  rc=$?
  kinds=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(s['findings_by_kind'], s['passed'], 'passed', s['failed'], 'failed')" "$W/mutant-$m.json" 2>/dev/null || echo "no summary")
  echo "$m: exit $rc, $kinds" | tee -a "$S"
done

step "a device that does not exist (expect exit 3)"
"$K" run --target "$DEV" --device 99 --cases 5 > "$W/bad-device.log" 2>&1
echo "exit $?: $(tail -1 "$W/bad-device.log")" | tee -a "$S"

step "compute-sanitizer memcheck: device plugin, 300 cases in-process"
if command -v compute-sanitizer > /dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 99 "$K" run --target "$DEV" --cases 300 --seed 3 --no-fork \
      --corpus-out "$W/findings-memcheck" > "$W/memcheck.log" 2>&1
  echo "exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tail -1) | $(grep -E '^kvfuzz:' "$W/memcheck.log" | tail -1)" | tee -a "$S"
else
  echo "compute-sanitizer not found; skipped" | tee -a "$S"
fi

tar -C "$(dirname "$W")" -czf "$OUT/plugins-results.tar.gz" plugins
echo "packed $OUT/plugins-results.tar.gz" | tee -a "$S"
