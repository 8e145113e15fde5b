#!/usr/bin/env bash
# Compiles every Triton rule of tests/mutants/mutants.json ("kernel": "triton") into its own set of
# AOT cubins, for running the Triton mutants on a GPU with the `triton` target:
#
#   scripts/gpu/triton-mutants-pack.sh OUT_DIR          # here (no GPU needed; needs build/venv-triton)
#   KVFUZZ_TRITON_KERNELS=OUT_DIR/<name> kvfuzz run --target triton ...   # there
#
# Each rule's find text must occur exactly once in its file (else this script fails: stale rule).
set -euo pipefail
OUT=$1
PY=${KVFUZZ_TRITON_PYTHON:-build/venv-triton/bin/python}
mkdir -p "$OUT"
"$PY" - "$OUT" <<'PYEOF'
import json, pathlib, shutil, subprocess, sys, tempfile
out = pathlib.Path(sys.argv[1])
rules = [r for r in json.load(open("tests/mutants/mutants.json"))["mutants"] if r.get("kernel") == "triton"]
for r in rules:
    src = pathlib.Path(tempfile.mkdtemp())
    shutil.copytree("kernels/triton/kvfuzz_triton", src / "kvfuzz_triton")
    f = src / "kvfuzz_triton" / r["file"]
    text = f.read_text()
    if text.count(r["find"]) != 1:
        sys.exit(f"stale rule {r['name']}: find text occurs {text.count(r['find'])} times in {r['file']}")
    f.write_text(text.replace(r["find"], r["replace"]))
    subprocess.run([sys.executable, "kernels/triton/aot_compile.py", "--source-dir", str(src),
                    "--out-dir", str(out / r["name"]), "--jobs", "2"], check=True)
    print(r["name"], "compiled", flush=True)
PYEOF
