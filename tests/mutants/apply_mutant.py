#!/usr/bin/env python3
"""Writes a mutated copy of kernels/cuda for one rule of tests/mutants/mutants.json.

    apply_mutant.py MUTANTS_JSON KERNEL_DIR NAME OUT_DIR

Copies every file of KERNEL_DIR into OUT_DIR, then replaces the rule's `find` text (which must
occur exactly once in its `file`) with `replace`. A rule whose text no longer matches fails the
build: a mutant that silently stops applying would make its test pass by construction.
"""
import json
import pathlib
import shutil
import sys


def main() -> int:
    mutants_json, kernel_dir, name, out_dir = sys.argv[1:5]
    rules = {m["name"]: m for m in json.loads(pathlib.Path(mutants_json).read_text())["mutants"]}
    if name not in rules:
        print(f"apply_mutant: no mutant named {name!r} in {mutants_json}", file=sys.stderr)
        return 2
    rule = rules[name]
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for src in pathlib.Path(kernel_dir).iterdir():
        if src.is_file():
            shutil.copyfile(src, out / src.name)
    target = out / rule["file"]
    text = target.read_text()
    count = text.count(rule["find"])
    if count != 1:
        print(f"apply_mutant: {name}: the find text occurs {count} times in {rule['file']} (expected exactly 1);"
              " update tests/mutants/mutants.json to the kernel's current source", file=sys.stderr)
        return 1
    target.write_text(text.replace(rule["find"], rule["replace"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
