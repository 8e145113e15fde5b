"""The README's walkthrough, run as a user would run it: its two C files as printed, its build
command, and every `$ command` of its output blocks, whose printed lines must be what kvfuzz prints
(stdout; a line holding `...` stands for what it leaves out, and timings are not compared).

    KVFUZZ_BIN=build/kvfuzz KVFUZZ_SOURCE_DIR=. python3 -m unittest -v test_readme   # from tests/e2e
"""
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", "../..")).resolve()
BIN = pathlib.Path(shutil.which(os.environ.get("KVFUZZ_BIN", "kvfuzz")) or os.environ.get("KVFUZZ_BIN", "kvfuzz")).resolve()
TIMING = re.compile(r"^kvfuzz: (\d+) cases? in [0-9.e+-]+ s \(\d+ cases/s\), seed (\d+)$")


def walkthrough():
    text = (SOURCE / "README.md").read_text()
    section = text[text.index("## 10-minute walkthrough"):text.index("### 6. Next steps")]
    return re.findall(r"```(\w*)\n(.*?)```", section, re.S)


def matches(want, got):
    """One printed line against kvfuzz's: `...` leaves out anything; timings are not compared."""
    if "..." in want:
        head, tail = want.split("...", 1)
        return got.startswith(head.rstrip() if not head.strip() else head) and got.endswith(tail)
    w, g = TIMING.match(want), TIMING.match(got)
    if w and g:
        return w.groups() == g.groups()
    return want == got


class Walkthrough(unittest.TestCase):
    def shell(self, d, command):
        env = dict(os.environ, KVFUZZ=str(SOURCE), PATH=f"{BIN.parent}:{os.environ['PATH']}", CI="1")
        env.pop("KVFUZZ_PYTHON", None)
        return subprocess.run(["sh", "-c", command], cwd=d, env=env, capture_output=True, text=True, timeout=600)

    def expect(self, d, block):
        """Runs each `$ command` of an output block; checks its printed lines and its exit code."""
        steps = re.split(r"^\$ ", block, flags=re.M)[1:]
        for step in steps:
            command, *lines = step.rstrip("\n").split("\n")
            p = self.shell(d, command)
            code = 0
            printed = []
            for line in lines:
                m = re.search(r"\s+# exit code (\d+)$", line)
                if m:
                    code = int(m.group(1))
                    line = line[:m.start()]
                printed.append(line)
            if printed and printed[-1].startswith("kvfuzz: ") and not any("# exit code" in l for l in lines):
                code = 1 if re.search(r", [1-9]\d* failed$", printed[-1]) else 0
            self.assertEqual(p.returncode, code, f"$ {command}\n{p.stdout}{p.stderr}")
            got = p.stdout.rstrip("\n").split("\n")
            i = 0  # the printed lines appear in kvfuzz's output in order; `...` alone skips lines
            for want in printed:
                if want.strip() == "...":
                    continue
                while i < len(got) and not matches(want, got[i]):
                    self.assertTrue(any(w.strip() == "..." for w in printed),
                                    f"$ {command}: README line\n  {want}\nnot next in the output:\n{p.stdout}")
                    i += 1
                self.assertLess(i, len(got), f"$ {command}: README line\n  {want}\nnot in the output:\n{p.stdout}")
                i += 1

    def test_the_walkthrough_reproduces(self):
        blocks = walkthrough()
        sources = {m.group(1): b for lang, b in blocks if lang == "c" and (m := re.match(r"/\* (\S+\.c):", b))}
        self.assertEqual(set(sources), {"reshape_and_cache.c", "adapter.c"})
        build = next(b for lang, b in blocks if lang == "sh" and b.startswith("cc ")).split("\n")[0]
        outputs = [b for lang, b in blocks if lang == "" and b.startswith("$ ")]
        fix = next(b for lang, b in blocks if lang == "c" and "if (slot < 0) continue;" in b)
        self.assertEqual(len(outputs), 3)
        with tempfile.TemporaryDirectory() as d:
            for name, text in sources.items():
                (pathlib.Path(d) / name).write_text(text)
            p = self.shell(d, build)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.expect(d, outputs[0])  # run: the finding
            self.expect(d, outputs[1])  # replay: still failing
            kernel = pathlib.Path(d) / "reshape_and_cache.c"
            first, second = [l.strip() for l in fix.strip().split("\n")]
            text = kernel.read_text()
            self.assertIn(first, text)
            kernel.write_text(text.replace(first, first + "\n    " + second, 1))
            self.expect(d, outputs[2])  # rebuild, replay: fixed; a longer run passes


if __name__ == "__main__":
    unittest.main()
