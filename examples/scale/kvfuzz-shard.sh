#!/usr/bin/env bash
# One shard of a kvfuzz campaign: the step every Slurm array task (slurm/kvfuzz-array.sbatch) and
# every pod of the Kubernetes Indexed Job (k8s/kvfuzz-job.yaml) runs (docs/scale.md).
#
#   KVFUZZ_SHARD   slurm | k8s/N | i/N      which shard (kvfuzz run --shard)
#   KVFUZZ_SEED    the campaign seed, the same for every shard (required)
#   KVFUZZ_CASES   cases of the whole campaign (default 100000)
#   KVFUZZ_OUT     a folder every shard and the merge step see (shared file system or volume)
#   KVFUZZ         the kvfuzz binary (default: kvfuzz on PATH)
#   KVFUZZ_ARGS    more options for `kvfuzz run` (--target cuda -j 8 --config ..., word-split)
#
# Writes KVFUZZ_OUT/summaries/shard-<index>.json and KVFUZZ_OUT/findings/shard-<index>/. A rerun of
# the same shard (a requeued task, a retried pod) does the same work and replaces its own summary.
# Exit status: 0 when kvfuzz exits 0 or 1 (findings are in the summary; the merge step reports them,
# and a scheduler must not retry a shard for finding a bug), else kvfuzz's code (2 bad input,
# 3 infrastructure, 130/143 interrupted): those are worth a retry or a look.
set -euo pipefail
: "${KVFUZZ_SHARD:?set KVFUZZ_SHARD to slurm, k8s/N or i/N}"
: "${KVFUZZ_SEED:?set KVFUZZ_SEED: every shard must use the same seed}"
: "${KVFUZZ_OUT:?set KVFUZZ_OUT to a folder every shard and the merge step see}"
kvfuzz="${KVFUZZ:-kvfuzz}"
case "$KVFUZZ_SHARD" in
  slurm) index="${SLURM_ARRAY_TASK_ID:?not in a Slurm array task}" ;;
  k8s/*) index="${JOB_COMPLETION_INDEX:?not in a pod of an Indexed Job}" ;;
  *) index="${KVFUZZ_SHARD%%/*}" ;;
esac
mkdir -p "$KVFUZZ_OUT/summaries" "$KVFUZZ_OUT/findings/shard-$index"
set +e
# shellcheck disable=SC2086
"$kvfuzz" run --shard "$KVFUZZ_SHARD" --seed "$KVFUZZ_SEED" --cases "${KVFUZZ_CASES:-100000}" --keep-going \
  --corpus-out "$KVFUZZ_OUT/findings/shard-$index" --json "$KVFUZZ_OUT/summaries/shard-$index.json" ${KVFUZZ_ARGS:-}
rc=$?
set -e
case $rc in
  0 | 1) exit 0 ;;
  *) echo "kvfuzz-shard: shard $index: kvfuzz exit code $rc (docs/exit-codes.md)" >&2; exit "$rc" ;;
esac
