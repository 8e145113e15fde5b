#!/usr/bin/env bash
# Builds kvfuzz's host code (harness, golden model, cuda-emu, tests) with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-asan/ (no CUDA), then runs under them, halting on the first
# report: the unit tests (ctest -L unit), a default-profile campaign, a quantised campaign, a replay
# of corpus/ and a mutant campaign that finds, shrinks, saves and reports a failure.
#   scripts/sanitize.sh                   what CI runs (ctest test hardening.sanitize)
#   KVFUZZ_SANITIZE_CASES=30000 scripts/sanitize.sh   a longer campaign (default 3000 cases)
# Exit status: 0 clean; non-zero on a build failure, a failing test or any sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan
cases="${KVFUZZ_SANITIZE_CASES:-3000}"
sanitizers=address,undefined,float-cast-overflow  # GCC leaves float-cast-overflow out of "undefined"
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

# abort_on_error: a report is fatal even where a test framework would catch it; exitcode 23 names it.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:exitcode=23"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:exitcode=23"
export CI=1  # plain progress lines

# One run at a time per build directory (ctest and a developer may both start one).
mkdir -p "$build"
exec 9>"$build/.lock"
flock -n 9 || { echo "${0##*/}: waiting for another run using $build/" >&2; flock 9; }
start=$SECONDS
# -O1 -g1, as the ASan documentation advises: usable stack traces, a faster build than -O2 -g; and
# assert() is on (no NDEBUG).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DKVFUZZ_CUDA=OFF \
  -DKVFUZZ_SANITIZE="$sanitizers" >/dev/null
# Every unit-test binary, the golden model's code table (golden.ml_dtypes runs it) and the CLI (with
# one mutant kernel), but not the other mutants: they are
# the same host code as kvfuzz with a rewritten kernel.
mapfile -t test_binaries < <(cmake --build "$build" --target help | sed -n 's/^\.\.\. \(kvfuzz[a-z0-9_]*_tests\)$/\1/p')
if ! cmake --build "$build" -j"$(nproc)" --target kvfuzz kvfuzz-mutant-padding-not-skipped kvfuzz_minifloat_table "${test_binaries[@]}" \
     >"$build/build.log" 2>&1; then
  grep -E -A5 'error|Error' "$build/build.log" | head -n 60 >&2
  echo "sanitize: build failed (full log: $build/build.log)" >&2
  exit 1
fi
echo "sanitize: built ${#test_binaries[@]} test binaries and kvfuzz with -fsanitize=$sanitizers in $((SECONDS - start)) s"

work="$build/sanitize-work"
rm -rf "$work" && mkdir -p "$work"
# Sanitizer reports in the files of a step: every "runtime error:" line and every SUMMARY line,
# except those whose location matches $allow (set for the mutant step only).
reports() {
  grep -hE 'runtime error:|^SUMMARY: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)' "$@" |
    { if [ -n "${allow:-}" ]; then grep -vE "$allow"; else cat; fi; } || true
}
step() {  # step NAME EXPECTED_STATUS COMMAND...: runs COMMAND, requires EXPECTED_STATUS and no sanitizer report
  local name="$1" want="$2"; shift 2
  local t0=$SECONDS status=0
  "$@" >"$work/$name.out" 2>"$work/$name.err" || status=$?
  if [ "$status" -ne "$want" ] || [ -n "$(reports "$work/$name.err" "$work/$name.out")" ]; then
    echo "sanitize: FAILED $name (exit $status, expected $want)" >&2
    reports "$work/$name.err" "$work/$name.out" | head -n 5 >&2
    tail -n 60 "$work/$name.err" >&2
    tail -n 20 "$work/$name.out" >&2
    exit 1
  fi
  echo "sanitize: ok $name ($((SECONDS - t0)) s): $(tail -n 1 "$work/$name.out")"
}

step unit-tests 0 ctest --test-dir "$build" -L unit -j"$(nproc)" --output-on-failure
step campaign-default 0 "$build/kvfuzz" run --cases "$cases" --seed 1 -j 2 --corpus-out "$work/default-findings"
step campaign-quant 0 "$build/kvfuzz" run --config configs/quant.json --cases $((cases * 2 / 3)) --seed 2 \
  --corpus-out "$work/quant-findings"
step replay-corpus 0 "$build/kvfuzz" replay corpus
# A failing campaign exercises confirm, shrink, save and the report writers. This mutant's kernel
# handles padding slots (-1, INT64_MIN, ...) as real ones: undefined behaviour and wild writes are
# its bug, so reports located in its rewritten sources (tests/mutants/src/) are expected (the worker
# dies: a `crash` finding), and handle_segv=0 keeps its faults plain signals. Any other report fails.
allow='/tests/mutants/src/'
step campaign-mutant 1 env ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0" \
  "$build/tests/mutants/kvfuzz-mutant-padding-not-skipped" run --cases 40 --seed 1 --keep-going -j 2 \
  --corpus-out "$work/mutant-findings" --json "$work/mutant-summary.json" --junit "$work/mutant-junit.xml"
unset allow
echo "sanitize: clean in $((SECONDS - start)) s"
