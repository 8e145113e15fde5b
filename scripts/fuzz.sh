#!/usr/bin/env bash
# Fuzzes kvfuzz's own readers of user input with libFuzzer: builds tests/fuzz/ with clang,
# -fsanitize=fuzzer,address,undefined into build-fuzz/ (no CUDA), then runs each target for SECONDS
# (default 60; both at once when there are two cores or more), seeded with corpus/*.json (cases),
# configs/*.json (profiles), tests/fuzz/seeds/ and tests/fuzz/regressions/, with tests/fuzz/json.dict.
#   scripts/fuzz.sh [SECONDS]             what CI runs (ctest test hardening.fuzz): 60 s per target
#   scripts/fuzz.sh 3600                  a long session; the grown corpus stays in build-fuzz/corpus/
# A crash, hang (> 10 s), leak, sanitizer report or oracle failure (tests/fuzz/oracles.h) stops the
# target and fails the script; the input is in build-fuzz/artifacts/<target>/. After fixing the bug,
# copy it to tests/fuzz/regressions/<target>/ (kvfuzz_fuzz_regression_tests replays it in every build).
# Exit status: 0 clean, 1 a finding or build failure, 77 no clang/libFuzzer here (ctest: skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build=build-fuzz
cxx="${KVFUZZ_FUZZ_CXX:-clang++}"
targets=(fuzz_case_reader fuzz_profile_reader)

if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found (scripts/setup.sh installs clang and libclang-rt-14-dev); skipped" >&2
  exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    "$cxx" -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "fuzz: $cxx cannot link libFuzzer (install libclang-rt-14-dev); skipped" >&2
  exit 77
fi

# One run at a time per build directory (ctest and a developer may both start one).
mkdir -p "$build"
exec 9>"$build/.lock"
flock -n 9 || { echo "${0##*/}: waiting for another run using $build/" >&2; flock 9; }
start=$SECONDS
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVFUZZ_CUDA=OFF \
  -DKVFUZZ_FUZZ=ON -DKVFUZZ_SANITIZE=address,undefined >/dev/null
if ! cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >"$build/build.log" 2>&1; then
  grep -E -A5 'error|Error' "$build/build.log" | head -n 60 >&2
  echo "fuzz: build failed (full log: $build/build.log)" >&2
  exit 1
fi
echo "fuzz: built ${targets[*]} in $((SECONDS - start)) s; fuzzing each for $seconds s"

export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

# fuzz TARGET SEEDS...: one bounded session; the first directory is the (growing) working corpus.
fuzz() {
  local target="$1"; shift
  local corpus="$build/corpus/$target" artifacts="$build/artifacts/$target/"
  mkdir -p "$corpus" "$artifacts"
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -dict=tests/fuzz/json.dict -artifact_prefix="$artifacts" -print_final_stats=1 \
    "$corpus" "$@" >"$build/$target.log" 2>&1
}
seeds_of() {  # the read-only seed directories of a target
  case "$1" in
    fuzz_case_reader) echo corpus tests/fuzz/seeds/fuzz_case_reader tests/fuzz/regressions/fuzz_case_reader ;;
    fuzz_profile_reader) echo configs tests/fuzz/seeds/fuzz_profile_reader tests/fuzz/regressions/fuzz_profile_reader ;;
  esac
}

declare -A pid status
for t in "${targets[@]}"; do
  # shellcheck disable=SC2046
  if [ "$(nproc)" -ge 2 ]; then fuzz "$t" $(seeds_of "$t") & pid[$t]=$!; else fuzz "$t" $(seeds_of "$t") && status[$t]=0 || status[$t]=$?; fi
done
for t in "${targets[@]}"; do
  if [ -n "${pid[$t]:-}" ]; then wait "${pid[$t]}" && status[$t]=0 || status[$t]=$?; fi
done

failed=0
for t in "${targets[@]}"; do
  log="$build/$t.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -n 1 || true)
  if [ "${status[$t]}" -eq 0 ]; then
    echo "fuzz: ok $t: ${runs:-?} executions in $seconds s (${speed:-?}/s), $cov"
  else
    failed=1
    echo "fuzz: FAILED $t (exit ${status[$t]}); log: $log" >&2
    grep -E -B2 -A40 '^==[0-9]+==ERROR|runtime error:|^fuzz_[a-z_]+: |ALARM|deadly signal|out-of-memory' "$log" | head -n 80 >&2 || tail -n 60 "$log" >&2
    ls "$build/artifacts/$t/" >&2
    echo "fuzz: reproduce with $build/tests/fuzz/$t $build/artifacts/$t/<file>; after the fix keep the input in tests/fuzz/regressions/$t/" >&2
  fi
done
[ "$failed" -eq 0 ] && echo "fuzz: clean in $((SECONDS - start)) s"
exit "$failed"
