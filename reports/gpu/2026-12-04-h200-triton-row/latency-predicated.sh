#!/usr/bin/env bash
# Issue 20: the aligned path's stores predicated on the slot's check instead of skipped by a branch
# (ptxas had sunk the rows' loads below that branch), in one H200 call from the repository root with
# OUT set:  OUT=DIR bash reports/gpu/2026-12-04-h200-triton-row/latency-predicated.sh
# The SASS order of the bf16 aligned kernel's loads, exit and stores in both kernels (cuobjdump), then
# latency-aligned-final.sh's bench (this kernel as `cuda`, b0fae6b's as `prev` on the H 8 D 128 cases)
# and campaigns (six profiles, the GPU-only mutants carried).
# Carried: build-h200/bin/kvfuzz, build-h200/bench/libkvf_cuda.so (this kernel) and libkvf_prev.so
# (b0fae6b), build-h200/mutants/kvfuzz-mutant-NAME.
source scripts/gpu/preamble.sh  # $B, log, campaign, $OUT/device.txt
K=_ZN3kvf24kv_append_aligned_kernelI13__nv_bfloat16S1_lLb0EEEvNS_12KvAppendCoreE
for lib in prev cuda; do
  cuobjdump -sass -fun "$K" build-h200/bench/libkvf_$lib.so > "$OUT/aligned-bf16-$lib.sass" 2>&1
  log "SASS $lib: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$OUT/aligned-bf16-$lib.sass") instructions; order: $(grep -oE 'LDG\.E\.(128|64)|@!?P[0-9] EXIT|EXIT|STG\.E[.A-Z0-9]*' "$OUT/aligned-bf16-$lib.sass" | tr '\n' ' ')"
done
OUT=$OUT/bench-run bash reports/gpu/2026-12-04-h200-triton-row/latency-aligned-final.sh bench
OUT=$OUT/campaigns bash reports/gpu/2026-12-04-h200-triton-row/latency-aligned-final.sh campaigns
