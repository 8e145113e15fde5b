#!/usr/bin/env python3
"""check-layers.py — fails when a folder of src/ includes a folder of a higher floor (docs/layout.md).

    scripts/check-layers.py --src SRC --floors base case gen values ... cli

The floors are given lowest first (CMakeLists.txt's KVFUZZ_FLOORS, the one list). Every #include
"..." of every C++/CUDA file under SRC is resolved the way the compiler resolves it (beside the file,
then SRC, which is on every library's include path); an include of a file in another folder of SRC
must name a floor at or below the including file's. Files outside SRC (kernels/, include/, system
headers) are not floors and may be included from anywhere. A folder of SRC that is not a floor is an
error too, so a new folder must be placed.

Exit 0 and one summary line when every include goes down; exit 1 with one line per upward include
(FILE:LINE: FOLDER (floor i) includes HEADER of FOLDER (floor j), a higher floor); exit 2 on bad
arguments.
"""
import argparse
import os
import re
import sys

SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cuh", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def resolve(src, including, header):
    """The path (relative to src) the compiler opens for `#include "header"` in `including`, or None
    when it lies outside src or does not exist."""
    for base in (os.path.dirname(including), src):
        candidate = os.path.normpath(os.path.join(base, header))
        if os.path.isfile(candidate):
            rel = os.path.relpath(candidate, src)
            return None if rel.startswith("..") else rel
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="the src/ folder")
    ap.add_argument("--floors", nargs="+", required=True, help="src/'s folders, lowest floor first")
    args = ap.parse_args()
    src = os.path.abspath(args.src)
    if not os.path.isdir(src):
        print(f"check-layers: {args.src} is not a directory", file=sys.stderr)
        return 2
    floor = {name: i for i, name in enumerate(args.floors)}
    problems, files, includes = [], 0, 0
    for folder in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, folder)) and folder not in floor:
            problems.append(f"src/{folder}/: a folder that is no floor; add it to KVFUZZ_FLOORS in CMakeLists.txt "
                            f"(and docs/layout.md)")
    for root, _, names in os.walk(src):
        for name in sorted(names):
            if not name.endswith(SUFFIXES):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            folder = rel.split(os.sep)[0]
            if folder not in floor:
                continue  # a file directly in src/, or a folder reported above
            files += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = resolve(src, path, m.group(1))
                    if target is None:
                        continue
                    includes += 1
                    to = target.split(os.sep)[0]
                    if to in floor and floor[to] > floor[folder]:
                        problems.append(f"src/{rel}:{number}: {folder} (floor {floor[folder]}) includes {m.group(1)} "
                                        f"of {to} (floor {floor[to]}), a higher floor")
    if problems:
        print("\n".join(problems))
        print(f"check-layers: {len(problems)} upward include(s); floors, lowest first: {' < '.join(args.floors)}")
        return 1
    print(f"check-layers: {includes} includes in {files} files, none goes up ({' < '.join(args.floors)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
