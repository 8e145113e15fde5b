#!/usr/bin/env bash
# One H200 call (issue 20): bench/bench.py with FlashInfer's own append as a peer row (--peer
# flashinfer: flashinfer-python 0.7.4's AppendPagedKVCache through examples/peers/flashinfer/
# bench_driver.cu) beside our CUDA kernel, Triton, torch and the copy ceiling, every case of bench.py
# (FlashInfer's row reads n/a outside paged NHD/HND bf16 and at D 96). First the plugin's smoke check,
# since adapter.cu now goes through paged_append.cuh as the driver does. Built here and carried in
# build-h200/peers/ (the GPU machine has no network, so no headers are fetched there):
#   examples/peers/flashinfer/fetch-headers.sh
#   examples/peers/flashinfer/build.sh -t bench -o build-h200/peers/flashinfer_bench.so
#   examples/peers/flashinfer/build.sh -o build-h200/peers/flashinfer_append.so
#   c++ -std=c++17 -O2 -I include -isystem /usr/local/cuda/include examples/peers/flashinfer/smoke.cpp \
#       -L /usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt -o build-h200/peers/flashinfer_smoke
# The CUDA kernel's entry is built there with its nvcc (bench/build_cuda_entry.sh, about a minute).
# Run from the repo root, OUT set:   OUT=DIR bash scripts/gpu/flashinfer-bench.sh
set -u
P=$PWD/build-h200/peers
for f in flashinfer_bench.so flashinfer_append.so flashinfer_smoke; do
  [ -f $P/$f ] || { echo "flashinfer-bench.sh: $P/$f missing; build it here as this script's header says" >&2; exit 2; }
done
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader; nproc; } > $OUT/device.txt 2>&1
s=$SECONDS
timeout 60 $P/flashinfer_smoke $P/flashinfer_append.so > $OUT/smoke.log 2>&1
echo "plugin smoke rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
mkdir -p /tmp/kvf-bench
bench/build_cuda_entry.sh kernels/cuda /tmp/kvf-bench/cuda.so > $OUT/build.log 2>&1
echo "cuda entry build rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
s=$SECONDS
PYTHONUNBUFFERED=1 timeout 400 python3 bench/bench.py --cuda-lib cuda=/tmp/kvf-bench/cuda.so --peer flashinfer=$P/flashinfer_bench.so \
  --budget-s 300 --out $OUT > $OUT/bench.log 2>&1
echo "bench rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
tail -3 $OUT/smoke.log
grep -E "^\[|^bench:" $OUT/bench.log | cut -c1-220 | tail -60
cat $OUT/device.txt
