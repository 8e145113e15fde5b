#!/usr/bin/env bash
# Regenerates reports/examples/: one report per mutant below. A bounded campaign of the mutant's
# kvfuzz finds, shrinks and saves its first failure; `kvfuzz report` writes the case's report.json,
# report.md and report.html next to a copy of the case (case.json).
#   scripts/regen-report-examples.sh [BUILD_DIR]     # default: build (as scripts/setup.sh --all makes it)
# Builds the mutant binaries it needs (tests/mutants). Deterministic: same sources, same reports.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=$(( $(nproc) < 2 ? 1 : 2 ))

# name                 mutant                      kind                 seed cases shrink-tries
# The example is the saved case of `kind` found first (preferring several requests and a float cache). A campaign of at most 100 cases runs with
# --keep-going (every failure saved); a larger one stops at its first failure. When a seed finds no
# failure of `kind`, the next seeds are tried (up to 10). 0 shrink tries keep the original random
# case: less minimal, more telling.
examples=(
  "cross-request-write  logical-block-for-physical  cross_request_write  1    40    0"
  "padding-leak         slot-narrowed-to-32-bit     padding_leak         2    2000  2000"
  "oob-write            invalid-slot-written        oob_write            1    2000  2000"
)
for e in "${examples[@]}"; do
  read -r name mutant kind seed cases tries <<<"$e"
  cmake --build "$build" -j"$jobs" --target "kvfuzz-mutant-$mutant" >/dev/null
  bin=$(cd "$build/tests/mutants" && pwd)/kvfuzz-mutant-$mutant
  keep_going=()
  [ "$cases" -le 100 ] && keep_going=(--keep-going)
  case_file=""
  s=$seed
  while [ -z "$case_file" ] && [ "$s" -lt $((seed + 10)) ]; do
    work=$build/report-examples/$name
    rm -rf "$work"
    "$bin" run --cases "$cases" --seed "$s" --max-shrink-tries "$tries" "${keep_going[@]}" --corpus-out "$work" \
      >/dev/null 2>&1 || true
    # The saved case of `kind` found first (lowest case index).
    case_file=$(python3 - "$work" "$kind" <<'PY'
import json, pathlib, sys
found = []
for f in pathlib.Path(sys.argv[1]).glob("*.json") if pathlib.Path(sys.argv[1]).is_dir() else []:
    c = json.loads(f.read_text())
    if c["expect"].get("finding_kind") == sys.argv[2]:
        # Prefer batches a reader learns most from: several requests, a float cache (values decodable).
        plain = len(c["requests"]) >= 2 and c["shape"]["cache_dtype"] in ("f16", "bf16", "f32")
        found.append((not plain, c["provenance"]["case_index"], str(f)))
print(min(found)[-1] if found else "")
PY
)
    s=$((s + 1))
  done
  [ -n "$case_file" ] || { echo "regen: $mutant found no $kind with seeds $seed..$((seed + 9))" >&2; exit 1; }
  out=reports/examples/$name
  rm -rf "$out"
  mkdir -p "$out"
  cp "$case_file" "$out/case.json"
  status=0
  # Invoked by name through PATH, so the committed reproduction lines name the mutant, not this machine's path.
  (cd "$out" && PATH="$(dirname "$bin"):$PATH" "kvfuzz-mutant-$mutant" report case.json -o . >/dev/null) || status=$?
  [ "$status" -eq 1 ] || { echo "regen: the report of $out/case.json did not fail (exit $status)" >&2; exit 1; }
  echo "regen: $out ($kind)"
done
