#!/usr/bin/env bash
# Sets up (scripts/setup.sh: packages + build) and runs the whole test suite with ctest.
#   scripts/test.sh                 everything that runs without a GPU
#   scripts/test.sh -L mutant       only the mutation tests (ctest arguments pass through)
#   scripts/test.sh -LE 'sanitize|fuzz'   everything but the ASan/UBSan build and the parser fuzzers
# "Everything" includes hardening.sanitize (scripts/sanitize.sh: build-asan/) and hardening.fuzz
# (scripts/fuzz.sh 60: build-fuzz/), which ctest runs alone, so its summary stays the last output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-triton.sh   # venv for the Triton tests and the triton target's build (KVFUZZ_NO_TRITON=1 skips)
scripts/setup.sh --all    # after the venv: the build compiles the Triton kernels with it (kernels/triton/aot.cmake)
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
