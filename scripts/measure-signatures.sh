#!/usr/bin/env bash
# measure-signatures.sh — "one bug, one finding" (issue 37): runs each buggy example plugin with
# --keep-going over seeds 21..25 x 1500 cases and prints, per plugin, the failing cases, the case
# files written, the distinct signature ids over the five findings indexes, and the head count of
# each saved minimal case. Results: reports/cpu/2026-12-07-signatures/README.md.
#
#   scripts/measure-signatures.sh [BUILD_DIR] [OUT_DIR]      (defaults: build-sig, /tmp/kvfuzz-sigs)
set -euo pipefail
BUILD=${1:-build-sig}
OUT=${2:-/tmp/kvfuzz-sigs}
SEEDS=${SEEDS:-"21 22 23 24 25"}
CASES=${CASES:-1500}
rm -rf "$OUT" && mkdir -p "$OUT"

# name | plugin | extra options
PLUGINS=(
  "head-stride|$BUILD/plugins/naive-mutant-head-stride.so|"
  "padding|$BUILD/plugins/naive-mutant-padding.so|"
  "xpacked_capped|$BUILD/plugins/xpacked_capped.so|--config configs/formats.json"
)

printf '%-16s %-14s %6s %8s %6s %6s  %s\n' plugin seeds cases failing files sigs "minimal case heads"
for p in "${PLUGINS[@]}"; do
  IFS='|' read -r name so extra <<<"$p"
  for seed in $SEEDS; do
    d="$OUT/$name/$seed"
    mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/kvfuzz" run --target "plugin:$(realpath "$so")" --keep-going --seed "$seed" --cases "$CASES" $extra \
      --corpus-out "$d/f" --json "$d/s.json" >"$d/stdout" 2>"$d/stderr" || true
  done
  python3 - "$OUT/$name" "$SEEDS" "$CASES" "$name" <<'PY'
import json, re, sys, pathlib
root, seeds, cases, name = pathlib.Path(sys.argv[1]), sys.argv[2].split(), int(sys.argv[3]), sys.argv[4]
failing = files = 0
sigs, heads, bad = {}, [], []
for seed in seeds:
    d = root / seed
    folder = d / "f"
    # Case files written: the saved cases (FOLDER/*.json) and the flaky ones (FOLDER/flaky/*.json);
    # each saved case also gets a FOLDER/<name>.report/ folder, not counted.
    files += len(list(folder.glob("*.json"))) + len(list(folder.glob("flaky/*.json")))
    index = folder / "signatures.kvfuzz-index"
    idx = json.loads(index.read_text())["signatures"] if index.exists() else {}
    for k, e in idx.items():
        sigs.setdefault(k, e["signature"])
        heads.append(json.loads((folder / e["file"]).read_text())["shape"]["num_heads"])
    out = (d / "stdout").read_text() + (d / "stderr").read_text()
    m = re.search(r"(\d+) passed, (\d+) failed", out)
    failing += int(m.group(2)) if m else 0
    bad += [x for x in re.findall(r"more failures? of signature ([0-9a-f]{16})", out) if x not in idx]
print(f"{name:<16} {seeds[0] + '..' + seeds[-1]:<14} {cases * len(seeds):>6} {failing:>8} {files:>6} {len(sigs):>6}  {sorted(set(heads))}")
for k, t in sorted(sigs.items(), key=lambda kv: kv[1]):
    print(f"    {k}  {t}")
if bad:
    print(f"    'N more failures of signature X' naming an X not in the index: {sorted(set(bad))}")
PY
done
