#!/usr/bin/env bash
# One-hour CPU soak: kvfuzz run --target cuda-emu --seconds 3600 -j 2, RSS sampled every 60 s.
cd /tmp/soak
CI=1 nice -n 10 ./kvfuzz run --target cuda-emu --cases 0 --seconds 3600 -j 2 --seed 2026 --corpus-out findings --json soak.json > soak.out 2> soak.err &
pid=$!
printf 'seconds\tkvfuzz_rss_kib\tworkers\tworkers_rss_kib\n' > rss.tsv
t0=$(date +%s)
while kill -0 $pid 2>/dev/null; do
  kids=$(cat /proc/$pid/task/*/children 2>/dev/null); wr=0; nw=0
  for p in $kids; do r=$(awk '/^VmRSS:/{print $2}' /proc/$p/status 2>/dev/null); wr=$((wr + ${r:-0})); nw=$((nw + 1)); done
  printf '%s\t%s\t%s\t%s\n' $(( $(date +%s) - t0 )) "$(awk '/^VmRSS:/{print $2}' /proc/$pid/status 2>/dev/null)" "$nw" "$wr" >> rss.tsv
  sleep 60
done
wait $pid; echo "exit $?" >> rss.tsv
