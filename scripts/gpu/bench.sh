#!/usr/bin/env bash
# Runs the kernel benchmark (bench/bench.py, issue 7) on a machine with a CUDA GPU, torch and triton.
#
#   scripts/gpu/bench.sh LIB_DIR OUT_DIR [bench.py options...]
#
# LIB_DIR holds libkvf_cuda.so, bench/cuda_entry.cu built with kernels/cuda by
#   bench/build_cuda_entry.sh kernels/cuda LIB_DIR/libkvf_cuda.so
# (build it where nvcc is, e.g. here, and carry it; the GPU machine has nvcc too). Any other
# libkvf_*.so in LIB_DIR (builds of other kernel versions) is timed too, on the h8-d128 cases, named
# after the file (libkvf_v0.so -> v0). Run from the repository root. Writes OUT_DIR/bench.json,
# OUT_DIR/bench.md and OUT_DIR/log.txt; exits with bench.py's status (0 all verified, 1 a
# verification failed, 2 bad arguments, 3 no GPU).
set -uo pipefail
LIB=${1:?usage: scripts/gpu/bench.sh LIB_DIR OUT_DIR [bench.py options...]}; OUT=${2:?usage: scripts/gpu/bench.sh LIB_DIR OUT_DIR [options]}
shift 2
[ -f "$LIB/libkvf_cuda.so" ] || { echo "bench.sh: $LIB/libkvf_cuda.so missing (bench/build_cuda_entry.sh)" >&2; exit 2; }
libs=(--cuda-lib "cuda=$LIB/libkvf_cuda.so")
for f in "$LIB"/libkvf_*.so; do
  name=${f##*/libkvf_}; name=${name%.so}
  [ "$name" = cuda ] || libs+=(--cuda-lib "$name@h8-d128=$f")
done
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/log.txt" 2>&1
PYTHONUNBUFFERED=1 python3 bench/bench.py "${libs[@]}" --out "$OUT" "$@" 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
