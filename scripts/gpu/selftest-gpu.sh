#!/usr/bin/env bash
# The GPU part of the mutation self-test: runs every CUDA rule of tests/mutants/mutants.json on the
# GPU (the cuda target of its kvfuzz-mutant-<name> binary), the GPU-only rules (a misaligned vector
# store, a race between programs writing the same slot, a zero-size grid launch) included, which
# `kvfuzz selftest` skips on the CPU.
#
#   scripts/gpu/selftest-gpu.sh BIN_DIR OUT_DIR [GPU_ONLY]
#
# BIN_DIR holds the kvfuzz-mutant-* binaries of a build configured with -DKVFUZZ_GPU_MUTANTS=ON: its
# tests/mutants/ folder, or a stripped copy to carry (for m in BUILD/tests/mutants/kvfuzz-mutant-*; do
# strip -o BIN_DIR/${m##*/} $m; done).
# Run from the repository root (reads tests/mutants/mutants.json and configs/). GPU_ONLY=1 runs only
# the gpu_only rules. Writes OUT_DIR/selftest-gpu.md (a table, for reports/) and
# OUT_DIR/selftest-gpu.tar.gz (logs, JSON summaries, shrunk cases). Exit 0 when every rule run was
# caught (a race may be caught as flaky: it fails on some runs only, which still kills it), else 1.
set -u
BIN=$(cd "$1" && pwd); OUT=$2; GPU_ONLY=${3:-0}
mkdir -p "$OUT"
W=$(mktemp -d)/selftest-gpu
mkdir -p "$W"
python3 - "$BIN" "$W" "$OUT/selftest-gpu.md" "$GPU_ONLY" <<'EOF'
import json, pathlib, subprocess, sys, time
bin_dir, work, table, gpu_only = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
rules = [r for r in json.load(open("tests/mutants/mutants.json"))["mutants"] if r.get("kernel", "cuda") == "cuda"]
if gpu_only:
    rules = [r for r in rules if r.get("gpu_only")]
rows, failed = [], 0
for r in rules:
    name, exe = r["name"], bin_dir / f"kvfuzz-mutant-{r['name']}"
    summary = work / f"{name}.json"
    cmd = [str(exe), "run", "--target", "cuda", "--cases", str(r.get("max_cases", 2000)), "--seed", "1",
           "--json", str(summary), "--corpus-out", str(work / name)]
    if r.get("config"):
        cmd += ["--config", r["config"]]
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        rc, log = p.returncode, p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        rc, log = -1, str(e)
    (work / f"{name}.log").write_text(log)
    seconds = time.monotonic() - start
    kind, cases, size, flaky = "-", "-", "-", False
    if rc == 1 and summary.exists():
        f = json.loads(summary.read_text())["failures"][0]
        kind, cases, flaky = f["findings"][0]["kind"], f["case_index"] + 1, f["flaky"]
        s = f["size"]
        size = f"{s['requests']}/{s['slots']}/{s['heads']}/{s['head_dim']}"
    killed = rc == 1 and (kind in r["expect"] or flaky)
    failed += not killed
    rows.append(f"| {name} | {r['pattern']} | {'yes' if r.get('gpu_only') else 'no'} | "
                f"{'yes' if killed else 'NO (exit %d)' % rc} | {cases} | {seconds:.1f} | {size} | {kind}{' (flaky)' if flaky else ''} |")
    print(rows[-1], flush=True)
with open(table, "w") as t:
    t.write("| mutant | pattern | GPU only | killed | cases to kill | time (s) | shrunk req/tok/heads/D | finding |\n")
    t.write("|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    t.write(f"\nkvfuzz: {len(rows) - failed} passed, {failed} failed\n")
print(f"kvfuzz: {len(rows) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
rc=$?
tar -C "$(dirname "$W")" -czf "$OUT/selftest-gpu.tar.gz" selftest-gpu
exit $rc
