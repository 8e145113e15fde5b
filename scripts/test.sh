#!/usr/bin/env bash
# Sets up (scripts/setup.sh: packages + build) and runs the whole test suite with ctest.
#   scripts/test.sh                 everything that runs without a GPU
#   scripts/test.sh -L mutant       only the mutation tests (ctest arguments pass through)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
