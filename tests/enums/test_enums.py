#!/usr/bin/env python3
"""The one enum table (kernels/enums.json, scripts/gen-enums.py): the generated C++, C-ABI and Python
spellings in the tree are the table's, a drift planted in a copy of any of them is named by --check,
and the spellings agree with one another value for value."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
GEN = SRC / "scripts" / "gen-enums.py"
GENERATED = ["kernels/cuda/kv_enums.h", "src/case/enum_names.h", "include/kvfuzz_plugin.h", "kernels/triton/kvfuzz_triton/enums.py"]


def check(root):
    return subprocess.run([sys.executable, GEN, "--check", "--root", str(root)], capture_output=True, text=True)


class EnumTable(unittest.TestCase):
    def test_the_tree_is_the_table(self):
        r = check(SRC)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_drift_in_any_generated_file_is_named(self):
        for rel in GENERATED:
            with self.subTest(rel), tempfile.TemporaryDirectory() as tmp:
                root = pathlib.Path(tmp)
                for f in GENERATED + ["kernels/enums.json"]:
                    (root / f).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(SRC / f, root / f)
                text = (root / rel).read_text()
                # a value renumbered in the C ABI's generated block; a name misspelt elsewhere
                drifted = text.replace("KVFZ_QUANT_MXFP4 = 4", "KVFZ_QUANT_MXFP4 = 5") if rel.endswith("plugin.h") else text.replace("mxfp4", "mxfp4x", 1)
                self.assertNotEqual(drifted, text)
                (root / rel).write_text(drifted)
                r = check(root)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(rel, r.stdout)
                self.assertEqual(r.stdout.count("differs"), 1, r.stdout)

    def test_the_spellings_agree_value_for_value(self):
        table = json.loads((SRC / "kernels/enums.json").read_text())
        header = (SRC / "include/kvfuzz_plugin.h").read_text()
        py = {}
        exec((SRC / "kernels/triton/kvfuzz_triton/enums.py").read_text(), py)
        cpp = (SRC / "kernels/cuda/kv_enums.h").read_text()
        for e in table["enums"]:
            names = [v["name"] for v in e["values"]]
            self.assertEqual(list(py[e["python"]]), names, e["name"])
            block = re.search(r"typedef enum %s \{(.*?)\} %s;" % (e["c_name"], e["c_name"]), header, re.S).group(1)
            c = [(m.group(1), int(m.group(2))) for m in re.finditer(r"(KVFZ_\w+) = (\d+)", block)]
            self.assertEqual(c, [(e["c_prefix"] + n.upper(), i) for i, n in enumerate(names)], e["name"])
            body = re.search(r"enum class %s : uint8_t \{(.*?)\};" % e["name"], cpp, re.S).group(1)
            body = re.sub(r"//[^\n]*", "", body)
            self.assertEqual([x.strip() for x in body.split(",") if x.strip()], names, e["name"])


if __name__ == "__main__":
    unittest.main()
