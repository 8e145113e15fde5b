#!/usr/bin/env python3
"""Prints the mutation-test results (build/tests/mutants/results/*.json) as a Markdown table.

    python3 tests/mutants/summarize.py [RESULTS_DIR]
"""
import json
import pathlib
import statistics
import sys

results_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/tests/mutants/results")
rows = [json.loads(p.read_text()) for p in sorted(results_dir.glob("*.json"))]
if not rows:
    sys.exit(f"no results in {results_dir}; run `ctest --test-dir build -L mutant` first")
print("| mutant | pattern | killed | first finding | cases to kill | time to find (s) | shrink steps | shrunk to (requests / slots / heads / head_dim) |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    s = r["shrunk"]
    print(f"| {r['mutant']} | {r['pattern']} | {'yes' if r['killed'] else 'NO'} | {r['first_kind']} | {r['cases_to_kill']} | "
          f"{r['seconds_to_find']:.2f} | {r['shrink_steps']} | {s['requests']} / {s['slots']} / {s['heads']} / {s['head_dim']} |")
print(f"\n{len(rows)} mutants, {sum(r['killed'] for r in rows)} killed; median cases to kill "
      f"{statistics.median(r['cases_to_kill'] for r in rows)}")
