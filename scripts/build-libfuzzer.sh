#!/usr/bin/env bash
# Builds kvfuzz-libfuzzer (src/libfuzzer/kvfuzz_libfuzzer.cpp) with clang and libFuzzer, without
# CMake and without the CUDA toolkit (src/libfuzzer/cuda_host/ stands in for its headers): what
# .clusterfuzzlite/build.sh runs inside OSS-Fuzz's base-builder image, and what CI runs here
# (tests/e2e/test_libfuzzer.py). Only the kernel (kernels/cuda/kv_append_emu.cpp, where kv_append.cuh's
# body is instantiated) gets coverage instrumentation, so libFuzzer's coverage is the kernel's; the
# harness (golden model, arena, diff) always comes from this tree, as in the CMake mutant builds.
#
#   scripts/build-libfuzzer.sh OUT_DIR                  OUT_DIR/kvfuzz-libfuzzer, .dict, .options, _seed_corpus.zip
#   KVFUZZ_KERNEL_DIR=DIR scripts/build-libfuzzer.sh OUT_DIR    the kernel from DIR (a mutant's rewritten copy)
#
# The OSS-Fuzz variables are honoured when set: CXX, CXXFLAGS (sanitizers; -fsanitize=fuzzer-no-link
# and -fsanitize-coverage=... are kept for the kernel only), LIB_FUZZING_ENGINE, WORK (objects of the
# harness, reused between builds of different kernels). Defaults: clang++, ASan + UBSan,
# -fsanitize=fuzzer, WORK=OUT_DIR/obj.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: scripts/build-libfuzzer.sh OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cxx="${CXX:-clang++}"
flags="${CXXFLAGS:--O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link}"
engine="${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}"
kernel="$(cd "${KVFUZZ_KERNEL_DIR:-$src/kernels/cuda}" && pwd)"
work="${WORK:-$out/obj}/kvfuzz-libfuzzer"
version="$(sed -n 's/^project(kvfuzz VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"

# The harness is not instrumented for coverage: drop libFuzzer's coverage flags from its flags.
harness_flags=()
for f in $flags; do
  case "$f" in -fsanitize=fuzzer-no-link | -fsanitize-coverage=*) ;; *) harness_flags+=("$f") ;; esac
done
read -r -a kernel_flags <<<"$flags"
common=(-std=c++20 -DKVFUZZ_VERSION="\"$version\"" -isystem "$src/src/libfuzzer/cuda_host" -I "$src/src")

# Every source of the base floor, the case model, the values, the golden model and the arena (globbed: a file added there is
# linked here without editing this list), plus what the harness needs from the generator, the verdict and campaign.
harness=()
for f in "$src"/src/{base,case,values,golden,arena}/*.cpp; do
  f="${f#"$src/src/"}"
  [ "$f" = arena/outside_scan_cpu.cpp ] || harness+=("${f%.cpp}")  # needs Thrust; only the CLI targets use it
done
harness+=(gen/materialize report/verdict campaign/signature libfuzzer/kvfuzz_libfuzzer)
mkdir -p "$work/harness" "$work/kernel"
objects=()
jobs_max="$(nproc 2>/dev/null || echo 2)"
n=0
compile() {  # compile OBJECT SOURCE FLAGS...: in the background, at most nproc at once; status in OBJECT.rc
  local obj="$1" source="$2"; shift 2
  objects+=("$obj")
  if [ -f "$obj" ] && [ "$obj" -nt "$source" ] && [ "$obj" -nt "$0" ]; then return; fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 0.2; done
  rm -f "$obj" "$obj.rc"
  (if "$cxx" "${common[@]}" "$@" -c "$source" -o "$obj"; then echo 0; else echo 1; fi >"$obj.rc") &
  n=$((n + 1))
}
for s in "${harness[@]}"; do
  compile "$work/harness/${s//\//_}.o" "$src/src/$s.cpp" "${harness_flags[@]}" -I "$src/kernels/cuda"
done
compile "$work/harness/targets_cuda_emu.o" "$src/src/targets/cuda_emu.cpp" "${harness_flags[@]}" -I "$src/kernels/cuda"
# The kernel from KVFUZZ_KERNEL_DIR (rebuilt every time: one file), the only code with coverage.
rm -f "$work/kernel/"*.o
# As in the CMake kernel libraries, its functions get names of their own (KVF_KERNEL_NS=kernel,
# kv_layout.cuh): the kernel's copies of inline functions such as cache_elem_offset must not be
# merged with the harness's, since a mutant rewrites them and the linker keeps one weak definition
# for both (the golden model would run the mutant's, or the kernel the clean one).
compile "$work/kernel/kv_append_emu.o" "$kernel/kv_append_emu.cpp" "${kernel_flags[@]}" -DKVF_KERNEL_NS=kernel -I "$kernel"
wait
for o in "${objects[@]}"; do
  if [ -f "$o.rc" ] && [ "$(cat "$o.rc")" != 0 ] || [ ! -f "$o" ]; then echo "build-libfuzzer: compiling ${o##*/} failed" >&2; exit 1; fi
done
# shellcheck disable=SC2086
"$cxx" "${harness_flags[@]}" $engine "${objects[@]}" -o "$out/kvfuzz-libfuzzer"

# What OSS-Fuzz and ClusterFuzzLite pick up beside the binary: a dictionary, options, a seed corpus.
cp "$src/src/libfuzzer/kvfuzz-libfuzzer.dict" "$out/kvfuzz-libfuzzer.dict"
printf '[libfuzzer]\ndict = kvfuzz-libfuzzer.dict\nmax_len = 256\ntimeout = 10\n' >"$out/kvfuzz-libfuzzer.options"
if command -v zip >/dev/null; then
  rm -f "$out/kvfuzz-libfuzzer_seed_corpus.zip"
  (cd "$src/src/libfuzzer/seeds" && zip -q -r "$out/kvfuzz-libfuzzer_seed_corpus.zip" .)
fi
echo "build-libfuzzer: $out/kvfuzz-libfuzzer (kernel from $kernel)"
