#!/usr/bin/env bash
# Makes the CARRY_DIR that scripts/gpu/h200-all.sh runs on the GPU machine, from a build configured
# with -DKVFUZZ_GPU_MUTANTS=ON (nvcc and the Triton venv needed here; no GPU):
#
#   scripts/gpu/h200-all-pack.sh BUILD_DIR CARRY_DIR
#
# bin/: kvfuzz and the GPU mutants the session runs (stripped); plugins-bin/: scripts/gpu/plugins.sh
# pack; bench/libkvf_cuda.so: bench/build_cuda_entry.sh; triton-mutants/: scripts/gpu/triton-mutants-pack.sh.
set -euo pipefail
BUILD=$1; C=$2
mkdir -p "$C/bin"
cmake --build "$BUILD" -j2 --target kvfuzz kvfuzz_cuda_plugin_device kvfuzz_cuda_plugin naive \
  kvfuzz-mutant-misaligned-vector-store kvfuzz-mutant-next-slot-race kvfuzz-mutant-empty-batch-launched \
  kvfuzz-mutant-wild-write kvfuzz-mutant-address-product-in-32-bit
strip -o "$C/bin/kvfuzz" "$BUILD/kvfuzz"
for m in "$BUILD"/tests/mutants/kvfuzz-mutant-{misaligned-vector-store,next-slot-race,empty-batch-launched,wild-write,address-product-in-32-bit}; do
  strip -o "$C/bin/${m##*/}" "$m"
done
scripts/gpu/plugins.sh pack "$BUILD" "$C"
tar -xJf "$C/plugins-bin.tar.xz" -C "$C" && rm "$C/plugins-bin.tar.xz"
[ -f "$C/bench/libkvf_cuda.so" ] || bench/build_cuda_entry.sh kernels/cuda "$C/bench/libkvf_cuda.so"
[ -d "$C/triton-mutants" ] || scripts/gpu/triton-mutants-pack.sh "$C/triton-mutants"
rm -rf "$C"/triton-mutants/*/cache "$C"/triton-mutants/*/embed.cpp   # only cubins + manifest.json travel
du -sh "$C"
