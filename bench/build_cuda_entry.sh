#!/usr/bin/env bash
# Builds bench/cuda_entry.cu with a kernel source folder into a shared object for bench/bench.py.
#   bench/build_cuda_entry.sh KERNEL_DIR OUT.so      (default KERNEL_DIR: kernels/cuda)
# Same compiler flags as the CMake build of the kernel (sm_90, -O3, C++20), static cudart. A kernel
# folder with the quantised formats (QuantFormat in kv_append.cuh) takes its parameters from the
# example CUDA plugin's mapping (examples/plugins/cuda/plugin.cpp: KVFUZZ_BENCH_PLUGIN_PARAMS); an
# older one (a baseline commit) the field-by-field copy in cuda_entry.cu.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kdir=${1:-$root/kernels/cuda}; out=${2:?usage: build_cuda_entry.sh KERNEL_DIR OUT.so}
mapping=()
if grep -q QuantFormat "$kdir/kv_append.cuh"; then
  mapping=(-DKVFUZZ_BENCH_PLUGIN_PARAMS=1 -I"$root/examples/plugins/cuda")
fi
mkdir -p "$(dirname "$out")"
${NVCC:-nvcc} -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden \
  -cudart static "${mapping[@]}" -I"$kdir" -I"$root/include" "$root/bench/cuda_entry.cu" "$kdir/kv_append.cu" -o "$out" \
  ${KVFUZZ_BENCH_NVCC_FLAGS:-}
