#!/usr/bin/env bash
# One GPU call (issue 38): FlashInfer's MLA append (AppendPagedKVMlaCache, flashinfer-python 0.7.4)
# fuzzed through its CSR convention with configs/flashinfer-mla.json, as built by default and with
# empty appends skipped; FlashInfer's paged append again, now declaring stride_granularity 16 (no stride
# skips expected); and the near-edge values (value_dists edges of configs/quant-formats.json) on our
# cuda and triton kernels. Carried, built on a CPU machine (no GPU needed):
#   strip -o build-gpu/kvfuzz build/kvfuzz
#   examples/peers/flashinfer/fetch-headers.sh
#   examples/peers/flashinfer/build.sh -t mla -o build-gpu/flashinfer_mla_append.so
#   NVCC_FLAGS=-DKVFZ_FLASHINFER_SKIP_EMPTY examples/peers/flashinfer/build.sh -t mla -o build-gpu/flashinfer_mla_append_skip_empty.so
#   NVCC_FLAGS=-DKVFZ_FLASHINFER_SKIP_EMPTY examples/peers/flashinfer/build.sh -o build-gpu/flashinfer_append_skip_empty.so
# Run from the repository root: OUT=DIR bash reports/gpu/2026-12-07-flashinfer-mla/run.sh
set -u
K=$PWD/build-gpu/kvfuzz; G=$PWD/build-gpu
export KVFUZZ_PYTHON=python3 KVFUZZ_TRITON_PKG=$PWD/kernels/triton  # the GPU machine's torch and triton
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $K --version; nproc; } > $OUT/device.txt 2>&1
go() {  # NAME SECONDS ARGS...: one campaign, its log, JSON summary and findings under OUT
  local name=$1 t=$2; shift 2; local s=$SECONDS
  timeout $t $K run "$@" --stats --json $OUT/$name.json --corpus-out $OUT/f-$name > $OUT/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - s)) s" >> $OUT/device.txt
}
go mla-skip-empty 240 --target plugin:$G/flashinfer_mla_append_skip_empty.so --config configs/flashinfer-mla.json --cases 40000 --seed 1 -j 12 --keep-going &
go paged-skip-empty 200 --target plugin:$G/flashinfer_append_skip_empty.so --config configs/flashinfer.json --cases 30000 --seed 3 -j 4 --keep-going &
go edges-cuda 200 --target cuda --config configs/quant-formats.json --cases 20000 --seed 11 -j 3 --keep-going &
go edges-triton 200 --target triton --config configs/quant-formats.json --cases 20000 --seed 11 -j 3 --keep-going &
wait
go mla-default 100 --target plugin:$G/flashinfer_mla_append.so --config configs/flashinfer-mla.json --cases 3000 --seed 2 -j 8 --keep-going
for f in mla-skip-empty paged-skip-empty edges-cuda edges-triton mla-default; do
  echo "== $f"; grep -E "^kvfuzz: |skipped|FAIL|by the kernel" $OUT/$f.log | sort | uniq -c | sort -rn | head -14
done
rm -rf $OUT/f-*/*.report
cat $OUT/device.txt
