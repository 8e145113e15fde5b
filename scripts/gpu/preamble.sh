# preamble.sh — sourced by the scripts/gpu/*.sh of one H200 call: the carried kvfuzz ($B) and plugins
# ($P), $OUT (created) and $OUT/device.txt (date, GPU, driver, memory, clocks, kvfuzz version, host
# cores); log LINE... appends a line to device.txt; campaign NAME BINARY ARGS... runs `BINARY run ARGS`
# (150 s at most) with its summary JSON, log and findings under OUT, and logs its status and totals.
# Needs OUT set.
set -u
B=$PWD/build-h200/bin/kvfuzz
P=$PWD/build-h200/plugins
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader; $B --version; nproc; } > $OUT/device.txt 2>&1
log() { echo "$*" >> "$OUT/device.txt"; }
campaign() {
  local name=$1 bin=$2; shift 2; local s=$SECONDS
  timeout 150 $bin run "$@" --json "$OUT/$name.json" --corpus-out "$OUT/findings-$name" > "$OUT/$name.log" 2>&1
  log "$name rc=$? $((SECONDS - s)) s: $(grep -E '^kvfuzz: [0-9]+ (cases in|passed)' "$OUT/$name.log" | tr '\n' ' ')"
}
