#!/usr/bin/env python3
"""Proves kvfuzz catches one mutant of the CUDA kernel (run by ctest as mutant.<name>).

A bounded cuda-emu campaign of the mutant binary must:
  * exit 1 with the closing line "kvfuzz: N passed, 1 failed";
  * save one shrunk case whose first finding kind is one the rule expects;
  * have shrunk it to a small case (the size is recorded, and bounded for the rules that need no size);
and the saved case must replay as a known failure on the mutant (exit 0: behaves as its `expect`)
and must fail on the clean kvfuzz (exit 1: the clean kernel passes what the file expects to fail),
so the case pins down this bug and nothing else. Results go to --results as JSON.
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import time

SEED = "1"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def fail(msg, proc=None):
    print(f"check_mutant: FAIL: {msg}", file=sys.stderr)
    if proc is not None:
        print("--- stdout ---\n" + proc.stdout[-6000:], file=sys.stderr)
        print("--- stderr ---\n" + proc.stderr[-6000:], file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutants", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--mutant-binary", required=True)
    ap.add_argument("--clean-binary", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()

    rule = {m["name"]: m for m in json.loads(pathlib.Path(a.mutants).read_text())["mutants"]}[a.name]
    work = pathlib.Path(a.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus, summary = work / "found", work / "summary.json"

    start = time.monotonic()
    config = ["--config", str(pathlib.Path(a.source_dir) / rule["config"])] if "config" in rule else []
    proc = run([a.mutant_binary, "run", "--target", "cuda-emu", "--cases", str(rule["max_cases"]), "--seed", SEED,
                "--corpus-out", str(corpus), "--json", str(summary), *config])
    elapsed = time.monotonic() - start
    if proc.returncode != 1:
        fail(f"mutant {a.name} survived {rule['max_cases']} cases (exit {proc.returncode}, expected 1)", proc)
    last = proc.stdout.strip().splitlines()[-1]
    if not (last.startswith("kvfuzz: ") and last.endswith(" passed, 1 failed")):
        fail(f"unexpected closing line {last!r}", proc)

    s = json.loads(summary.read_text())
    if len(s["failures"]) != 1:
        fail(f"expected one failure in the summary, got {len(s['failures'])}", proc)
    f = s["failures"][0]
    kind = f["findings"][0]["kind"]
    if kind not in rule["expect"]:
        fail(f"first finding kind {kind!r} not in the rule's expected kinds {rule['expect']}", proc)
    if f["flaky"]:
        fail("the failure was labelled flaky; the emulator is deterministic", proc)

    case_file = pathlib.Path(f["file"])
    case = json.loads(case_file.read_text())
    if case["expect"] != {"outcome": "fail", "finding_kind": kind}:
        fail(f"saved case's expect is {case['expect']}", proc)

    replay_mutant = run([a.mutant_binary, "replay", str(case_file), "--target", "cuda-emu"])
    if replay_mutant.returncode != 0:
        fail("the saved case does not replay as its expected failure on the mutant", replay_mutant)
    replay_clean = run([a.clean_binary, "replay", str(case_file), "--target", "cuda-emu"])
    if replay_clean.returncode != 1 or "expected fail:" not in replay_clean.stdout:
        fail("the saved case should fail its expectation on the clean kernel (which passes it)", replay_clean)

    result = {
        "mutant": a.name, "pattern": rule["pattern"], "config": rule.get("config", "default"), "killed": True, "first_kind": kind,
        "cases_to_kill": f["case_index"] + 1, "seconds_to_find": round(f["seconds_to_find"], 3),
        "campaign_seconds": round(elapsed, 3), "shrink_steps": f["shrink_steps"], "shrink_tries": f["shrink_tries"],
        "shrunk": f["size"], "sentence": f["findings"][0]["sentence"], "file": str(case_file),
    }
    out = pathlib.Path(a.results)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
