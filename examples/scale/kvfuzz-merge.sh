#!/usr/bin/env bash
# The merge step after every shard of a campaign (docs/scale.md): one result for the whole array.
#
#   KVFUZZ_OUT     the folder the shards wrote (kvfuzz-shard.sh)
#   KVFUZZ         the kvfuzz binary (default: kvfuzz on PATH)
#   KVFUZZ_TARGET  target the merged findings are re-run on (default cuda-emu)
#
# Writes KVFUZZ_OUT/merged.json (the shards' summaries merged: totals, failing cases by signature,
# missing shards) and KVFUZZ_OUT/findings/all/ (one case per signature, the smallest). Exits with
# the merged summary's code: 0 clean, 1 findings, 3 when a shard's summary is missing or a shard
# lost a finding (docs/exit-codes.md).
set -euo pipefail
: "${KVFUZZ_OUT:?set KVFUZZ_OUT to the folder the shards wrote}"
kvfuzz="${KVFUZZ:-kvfuzz}"
shopt -s nullglob
summaries=("$KVFUZZ_OUT"/summaries/shard-*.json)
folders=("$KVFUZZ_OUT"/findings/shard-*)
if ((${#summaries[@]} == 0)); then echo "kvfuzz-merge: no summaries in $KVFUZZ_OUT/summaries/" >&2; exit 3; fi
if ((${#folders[@]})); then "$kvfuzz" merge "$KVFUZZ_OUT/findings/all" "${folders[@]}" --target "${KVFUZZ_TARGET:-cuda-emu}"; fi
exec "$kvfuzz" merge "$KVFUZZ_OUT/merged.json" "${summaries[@]}"
