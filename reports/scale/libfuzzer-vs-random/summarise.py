"""Reads run.sh's per-mutant outputs (WORK_DIR/<mutant>/random.json, lf.log) and writes results.tsv
and results.md beside this file. A libFuzzer kill is a kvfuzz-libfuzzer FINDING (its count of inputs)
or a sanitizer report from the kernel (a write outside the arena, a misaligned store: the units
libFuzzer's final statistics count, or, without them, its last status line, a lower bound marked ~)."""
import json
import os
import pathlib
import re
import sys

here = pathlib.Path(__file__).parent
work = pathlib.Path(os.environ.get("WORK_DIR", "/tmp/kvfuzz-lf-vs-random"))
rows = []


def libfuzzer(path):
    """(inputs to kill, how) from one kvfuzz-libfuzzer log."""
    log = path.read_text(errors="replace")
    found = re.search(r"after (\d+) inputs", log)
    crashed = re.search(r"(?:SUMMARY|ERROR): (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)", log)
    status = re.findall(r"^#(\d+)\s", log, re.M)
    executed = re.search(r"stat::number_of_executed_units: (\d+)", log)
    if found:
        return found.group(1), re.search(r"FINDING signature \S+: v1 ([a-z_]+)", log).group(1)
    if crashed:  # -print_final_stats counts the units run, the crashing one included
        return (executed.group(1) if executed else "~" + (status[-1] if status else "1")), "crash (" + crashed.group(1) + ")"
    return f"survived {executed.group(1) if executed else (status[-1] if status else '?')}", ""


for d in sorted(p for p in work.iterdir() if (p / "lf.log").exists() and (p / "random.json").exists()):
    s = json.loads((d / "random.json").read_text())
    f = s["failing_cases"]
    random_kill = str(f[0]["case_index"] + 1) if f else f"survived {s['cases']}"
    random_s = s["failures"][0]["seconds_to_find"] if f else s["seconds"]
    lf_kill, kind = libfuzzer(d / "lf.log")
    seeded, seeded_kind = libfuzzer(d / "lf-seeded.log") if (d / "lf-seeded.log").exists() else ("-", "")
    rows.append((d.name, random_kill, f"{random_s:.2f}", lf_kill, kind, seeded, seeded_kind))
with open(here / "results.tsv", "w") as t, open(here / "results.md", "w") as m:
    t.write("mutant\trandom_cases_to_kill\trandom_seconds_to_kill\tlibfuzzer_inputs_to_kill\tlibfuzzer_kill\t"
            "libfuzzer_seeded_inputs_to_kill\tlibfuzzer_seeded_kill\n")
    m.write("| mutant | random: cases to kill | random: s | libFuzzer, empty corpus: inputs to kill | how | "
            "libFuzzer, seed corpus + dict: inputs to kill | how |\n|---|---:|---:|---:|---|---:|---|\n")
    for r in rows:
        t.write("\t".join(r) + "\n")
        m.write("| " + " | ".join(r) + " |\n")
print((here / "results.md").read_text())
