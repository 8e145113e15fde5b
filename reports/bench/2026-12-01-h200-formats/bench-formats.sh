#!/usr/bin/env bash
# One H200 call (2026-12-01, issue 14): bench rows of the x-packed (vllm_legacy) and MLA formats
# against the copy ceiling, with the paged NHD/HND rows of this kernel and of the kernel at 24534f0
# (before the format families) as the baseline measured in the same run. Run from the repo root on
# the GPU machine with build-h200/base/kernels/cuda carried (git archive 24534f0 kernels/cuda | tar
# -x -C build-h200/base) and OUT set:   OUT=DIR bash reports/bench/2026-12-01-h200-formats/bench-formats.sh
set -u
mkdir -p /tmp/kvf-bench
bench/build_cuda_entry.sh kernels/cuda /tmp/kvf-bench/cuda.so > $OUT/build.log 2>&1 &
bench/build_cuda_entry.sh build-h200/base/kernels/cuda /tmp/kvf-bench/base.so >> $OUT/build.log 2>&1 &
wait
PYTHONUNBUFFERED=1 timeout 400 python3 bench/bench.py \
  --cuda-lib cuda=/tmp/kvf-bench/cuda.so \
  --cuda-lib base@nhd-bf16-h8-d128,hnd-bf16-h8-d128,nhd-fp8-per-tensor,hnd-fp8-per-tensor,vllm_legacy=/tmp/kvf-bench/base.so \
  --cases nhd-bf16-h8-d128,hnd-bf16-h8-d128,nhd-fp8-per-tensor,hnd-fp8-per-tensor,vllm_legacy,mla \
  --out $OUT > $OUT/bench.log 2>&1
echo "bench rc=$?" >> $OUT/bench.log
tail -40 $OUT/bench.log
