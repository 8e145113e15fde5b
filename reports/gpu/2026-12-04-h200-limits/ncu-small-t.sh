#!/usr/bin/env bash
# Issue 20: Nsight Compute on one small append (T = 1, bf16 NHD, H 8 D 128), the minimal kernel of
# bench/stage_cost.cu beside the CUDA kernel's aligned path through bench.py, from the repository
# root with OUT set:   OUT=DIR bash reports/gpu/2026-12-04-h200-limits/ncu-small-t.sh
# Carried: build-h200/probe/stage_cost (nvcc -O3 -std=c++20 -arch=sm_90 bench/stage_cost.cu),
# build-h200/bench/libkvf_cuda.so (bench/build_cuda_entry.sh). ncu leaves the clocks alone.
set -u
mkdir -p $OUT
N="ncu --clock-control none --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats --section Occupancy --metrics smsp__inst_executed.sum,sm__cycles_active.max,gpu__time_duration.sum"
STAGE_COST_T=1 STAGE_COST_D=128 timeout 120 $N --kernel-name regex:bf16_rows --launch-count 1 build-h200/probe/stage_cost 5 5 > $OUT/ncu-minimal.txt 2>&1; echo "minimal rc=$?"
timeout 200 $N --kernel-name regex:aligned --launch-count 1 python3 bench/bench.py --cuda-lib cuda=build-h200/bench/libkvf_cuda.so --cases nhd-bf16-h8-d128-t1 --no-triton --no-torch --triton-variants "" --reps 5 --out $OUT/b > $OUT/ncu-cuda.txt 2>&1; echo "cuda rc=$?"
