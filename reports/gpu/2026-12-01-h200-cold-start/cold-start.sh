#!/usr/bin/env bash
# Issue 18 on a GPU machine, in one bounded call: the spurious cold-start `timeout` reproduced with
# the build before the fix, cold-start rounds with the fix, then a -j 16 soak for the time left.
#
#   reports/gpu/2026-12-01-h200-cold-start/cold-start.sh CARRY_DIR OUT_DIR [OLD_ROUNDS=4] [NEW_ROUNDS=10] [TOTAL_SECONDS=560]
#
# CARRY_DIR/bin holds `kvfuzz-old` (the build before the fix) and `kvfuzz` (this build). A round is
# four `run --target triton -j 5` campaigns started together from cold (fresh processes, fresh CUDA
# contexts), as in the issue's report. Each campaign writes its JSON summary; rounds.tsv has one line
# per campaign (build, round, exit code, cases, failed, first finding kind, slowest worker start);
# soak.json is the soak's summary and soak-rss.tsv the RSS of kvfuzz and its workers over time.
set -uo pipefail
C=$1; O=$2; OLD_ROUNDS=${3:-4}; NEW_ROUNDS=${4:-10}; TOTAL=${5:-560}
mkdir -p "$O/runs"
start=$(date +%s)
printf 'build\tround\tcampaign\texit\tcases\tfailed\tfirst_kind\tslowest_start_s\tseconds\n' > "$O/rounds.tsv"

round() {  # round BUILD N
  local bin=$C/bin/$1 n=$2 pids=() k
  for k in 0 1 2 3; do
    "$bin" run --target triton --cases 3000 -j 5 --seed $((1000 * n + k)) --corpus-out "$O/runs/$1-$n-$k" \
      --json "$O/runs/$1-$n-$k.json" > "$O/runs/$1-$n-$k.out" 2> "$O/runs/$1-$n-$k.err" &
    pids+=($!)
  done
  for k in 0 1 2 3; do
    wait "${pids[$k]}"; local rc=$?
    python3 - "$1" "$n" "$k" "$rc" "$O/runs/$1-$n-$k.json" >> "$O/rounds.tsv" <<'PY'
import json, sys
build, n, k, rc, path = sys.argv[1:]
try:
    s = json.load(open(path))
except Exception:
    s = {}
kinds = [f["findings"][0]["kind"] for f in s.get("failures", []) if f.get("findings")]
w = s.get("workers", {})
print("\t".join(map(str, [build, n, k, rc, s.get("cases", "?"), s.get("failed", "?"), kinds[0] if kinds else "-",
                          w.get("slowest_start_seconds", "n/a"), round(s.get("seconds", 0), 1)])))
PY
  done
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$O/device.txt"
for n in $(seq 1 "$OLD_ROUNDS"); do round kvfuzz-old "$n"; done
for n in $(seq 1 "$NEW_ROUNDS"); do
  [ $(( $(date +%s) - start )) -lt $((TOTAL - 150)) ] || { echo "no time for round $n of the fixed build" >&2; break; }
  round kvfuzz "$n"
done
cat "$O/rounds.tsv"

left=$((TOTAL - ($(date +%s) - start) - 25))
if [ "$left" -gt 30 ]; then
  "$C/bin/kvfuzz" run --target triton --cases 0 --seconds "$left" -j 16 --seed 77 --corpus-out "$O/runs/soak" \
    --json "$O/soak.json" > "$O/runs/soak.out" 2> "$O/runs/soak.err" &
  soak=$!
  printf 'seconds\tkvfuzz_rss_kib\tworkers\tworkers_rss_kib\n' > "$O/soak-rss.tsv"
  t0=$(date +%s)
  while kill -0 "$soak" 2>/dev/null; do
    kids=$(cat /proc/$soak/task/*/children 2>/dev/null)
    wr=0; nw=0
    for p in $kids; do r=$(awk '/^VmRSS:/{print $2}' /proc/$p/status 2>/dev/null); wr=$((wr + ${r:-0})); nw=$((nw + 1)); done
    printf '%s\t%s\t%s\t%s\n' $(( $(date +%s) - t0 )) "$(awk '/^VmRSS:/{print $2}' /proc/$soak/status 2>/dev/null)" "$nw" "$wr" >> "$O/soak-rss.tsv"
    sleep 15
  done
  wait "$soak"; echo "soak exit $?" >> "$O/soak-rss.tsv"
  tail -n 4 "$O/runs/soak.out"; cat "$O/soak-rss.tsv"
fi
tar -C "$O" -czf "$O/runs.tgz" runs && rm -rf "$O/runs"
