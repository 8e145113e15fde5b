#!/usr/bin/env bash
# Copies kvfuzz and the mutant binaries of BUILD_DIR (configured with -DKVFUZZ_GPU_MUTANTS=ON),
# stripped, into OUT_DIR as one xz tarball small enough to carry to a GPU machine.
#   reports/gpu/2026-11-30-h200/pack-binaries.sh BUILD_DIR OUT_DIR      ->  OUT_DIR/bin.tar.xz (unpacks to bin/)
set -euo pipefail
BUILD=$1; OUT=$2
tmp=$(mktemp -d)
mkdir -p "$tmp/bin" "$OUT"
strip -o "$tmp/bin/kvfuzz" "$BUILD/kvfuzz"
for m in "$BUILD"/tests/mutants/kvfuzz-mutant-*; do strip -o "$tmp/bin/${m##*/}" "$m"; done
tar -C "$tmp" -cJf "$OUT/bin.tar.xz" bin
rm -rf "$tmp"
ls -la "$OUT/bin.tar.xz"
