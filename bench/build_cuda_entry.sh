#!/usr/bin/env bash
# Builds bench/cuda_entry.cu with a kernel source folder into a shared object for bench/bench.py.
#   bench/build_cuda_entry.sh KERNEL_DIR OUT.so      (default KERNEL_DIR: kernels/cuda)
# Same compiler flags as the CMake build of the kernel (sm_90, -O3, C++20), static cudart.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kdir=${1:-$root/kernels/cuda}; out=${2:?usage: build_cuda_entry.sh KERNEL_DIR OUT.so}
mkdir -p "$(dirname "$out")"
${NVCC:-nvcc} -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden \
  -cudart static -I"$kdir" -I"$root/include" "$root/bench/cuda_entry.cu" "$kdir/kv_append.cu" -o "$out" \
  ${KVFUZZ_BENCH_NVCC_FLAGS:-}
