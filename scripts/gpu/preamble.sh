# preamble.sh — sourced by scripts/gpu/flashinfer.sh and by the one-call scripts kept beside their
# reports (reports/*/*/*.sh, as `source scripts/gpu/preamble.sh` from the repository root): the carried
# kvfuzz ($B = $KVFUZZ_CARRY/bin/kvfuzz) and plugins ($P = $KVFUZZ_CARRY/plugins), KVFUZZ_CARRY
# defaulting to ./build-h200; $OUT (created) and $OUT/device.txt (date, GPU, driver, memory, clocks,
# kvfuzz version, host cores); log LINE... appends a line to device.txt; campaign NAME BINARY ARGS...
# runs `BINARY run ARGS` (150 s at most) with its summary JSON, log and findings under OUT, and logs its
# status and totals. Needs OUT set.
set -u
B=${KVFUZZ_CARRY:-$PWD/build-h200}/bin/kvfuzz
P=${KVFUZZ_CARRY:-$PWD/build-h200}/plugins
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader; $B --version; nproc; } > $OUT/device.txt 2>&1
log() { echo "$*" >> "$OUT/device.txt"; }
campaign() {
  local name=$1 bin=$2; shift 2; local s=$SECONDS
  timeout 150 $bin run "$@" --json "$OUT/$name.json" --corpus-out "$OUT/findings-$name" > "$OUT/$name.log" 2>&1
  log "$name rc=$? $((SECONDS - s)) s: $(grep -E '^kvfuzz: [0-9]+ (cases in|passed)' "$OUT/$name.log" | tr '\n' ' ')"
}
