#!/usr/bin/env python3
"""The floors check (scripts/check-layers.py, docs/layout.md): it passes on src/ as it is, and it fails,
naming the file, line and both floors, on an upward include planted in a copy of src/."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
FLOORS = os.environ.get("KVFUZZ_FLOORS", "").split(";")
CHECK = SRC / "scripts" / "check-layers.py"


def check(src):
    return subprocess.run([sys.executable, CHECK, "--src", src, "--floors", *FLOORS], capture_output=True, text=True)


class Floors(unittest.TestCase):
    def setUp(self):
        self.assertGreater(len(FLOORS), 5, "KVFUZZ_FLOORS (CMakeLists.txt) not passed")
        self.tmp = tempfile.TemporaryDirectory()
        self.copy = pathlib.Path(self.tmp.name) / "src"
        shutil.copytree(SRC / "src", self.copy)

    def tearDown(self):
        self.tmp.cleanup()

    def plant(self, file, line):
        path = self.copy / file
        text = path.read_text().splitlines(keepends=True)
        at = next(i for i, l in enumerate(text) if l.startswith("#include")) + 1
        text.insert(at, line + "\n")
        path.write_text("".join(text))
        return at + 1  # 1-based line of the planted include

    def test_src_has_no_upward_include(self):
        r = check(SRC / "src")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^check-layers: \d+ includes in \d+ files, none goes up")

    def test_an_upward_include_is_named_with_its_floors(self):
        line = self.plant("case/types.h", '#include "campaign/campaign.h"')
        r = check(self.copy)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        case, campaign = FLOORS.index("case"), FLOORS.index("campaign")
        self.assertIn(f"src/case/types.h:{line}: case (floor {case}) includes campaign/campaign.h of campaign "
                      f"(floor {campaign}), a higher floor", r.stdout)
        self.assertIn("check-layers: 1 upward include(s)", r.stdout)

    def test_a_relative_upward_include_is_caught_as_the_compiler_resolves_it(self):
        # values sits below golden: the payload must not reach for the golden model.
        line = self.plant("values/payload.cpp", '#include "../golden/golden.h"')
        r = check(self.copy)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"src/values/payload.cpp:{line}: values (floor {FLOORS.index('values')}) includes "
                      f"../golden/golden.h of golden", r.stdout)

    def test_includes_of_the_same_or_a_lower_floor_and_outside_src_pass(self):
        self.plant("golden/golden.cpp", '#include "values/payload.h"')
        self.plant("arena/arena.cpp", '#include "base/json.h"')
        self.plant("case/types.h", '#include "kvfuzz_plugin.h"')  # not a file of src/: no floor
        r = check(self.copy)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_folder_without_a_floor_fails(self):
        (self.copy / "extra").mkdir()
        (self.copy / "extra" / "x.h").write_text("#pragma once\n")
        r = check(self.copy)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("src/extra/: a folder that is no floor", r.stdout)


if __name__ == "__main__":
    unittest.main()
