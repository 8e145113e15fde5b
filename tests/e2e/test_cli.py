"""End-to-end tests of the kvfuzz command line (run by ctest as e2e.cli).

Each test runs the real binary ($KVFUZZ_BIN) and checks its exit code, its output and the files it
writes. Exit codes: 0 clean, 1 findings, 2 usage or bad input, 3 infrastructure.
"""
import json
import os
import pathlib
import signal
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CORPUS = SRC / "corpus"
LAYOUTS = {"paged_nhd", "paged_hnd", "contiguous_bshd", "contiguous_bhsd", "packed_kv_nhd"}


def kvfuzz(*args, timeout=600, **kw):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


class Basics(unittest.TestCase):
    def test_version_and_targets(self):
        p = kvfuzz("--version")
        self.assertEqual(p.returncode, 0)
        self.assertIn("kvfuzz", p.stdout)
        p = kvfuzz("targets")
        self.assertEqual(p.returncode, 0)
        self.assertIn("cuda-emu", p.stdout)
        self.assertIn("values checked: exact", p.stdout)
        self.assertIn("\nplugin:PATH.so\n", p.stdout)  # targets named by an argument are listed too
        self.assertIn("\npython:MODULE:FUNCTION\n", p.stdout)

    def test_usage_errors_exit_2(self):
        for args in (["bogus"], ["run", "--no-such-flag"], ["run", "--cases", "-5"], ["replay"],
                     ["run", "--target", "no-such-target", "--cases", "1"],
                     ["run", "--config", "/nonexistent/profile.json"]):
            with self.subTest(args=args):
                p = kvfuzz(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertTrue(p.stderr.strip(), "a usage error must say what is wrong")

    def test_unknown_target_names_the_known_ones(self):
        p = kvfuzz("run", "--target", "no-such-target", "--cases", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("cuda-emu", p.stderr)


class Campaign(unittest.TestCase):
    def test_default_campaign_passes_and_ends_with_the_summary_line(self):
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", "cuda-emu", "--cases", 300, "--seed", 7, "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 300 passed, 0 failed")
            s = json.loads(summary.read_text())
            self.assertEqual(s["schema"], "kvfuzz-summary")
            self.assertEqual(s["seed"], "7")  # seeds are strings: jq and JavaScript lose uint64 precision
            self.assertEqual((s["cases"], s["passed"], s["failed"]), (300, 300, 0))
            self.assertGreater(s["cases_per_second"], 0)
            self.assertFalse((pathlib.Path(d) / "found").exists(), "a clean run writes no findings")

    def test_seconds_budget_stops_an_unbounded_run(self):
        start = time.monotonic()
        p = kvfuzz("run", "--cases", 0, "--seconds", 1, "--seed", 3)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(time.monotonic() - start, 30)
        self.assertRegex(last_line(p.stdout), r"^kvfuzz: \d+ passed, 0 failed$")

    def test_sigint_stops_cleanly_with_a_summary(self):
        proc = subprocess.Popen([BIN, "run", "--cases", "0", "--seed", "11"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, err)  # 128 + SIGINT: interrupted, nothing found (docs/exit-codes.md)
        self.assertIn("interrupted", out)
        self.assertRegex(last_line(out), r"^kvfuzz: \d+ passed, 0 failed$")

    def test_same_seed_generates_the_same_cases(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = pathlib.Path(d) / "a", pathlib.Path(d) / "b"
            for out in (a, b):
                self.assertEqual(kvfuzz("generate", "--seed", 5, "--cases", 25, "-o", out).returncode, 0)
            names_a = sorted(f.name for f in a.iterdir())
            self.assertEqual(names_a, sorted(f.name for f in b.iterdir()))
            self.assertGreater(len(names_a), 20)
            for name in names_a:  # same batch, byte for byte, apart from the command line that wrote it
                ja, jb = json.loads((a / name).read_text()), json.loads((b / name).read_text())
                ja["provenance"].pop("command_line"), jb["provenance"].pop("command_line")
                self.assertEqual(ja, jb)


class Replay(unittest.TestCase):
    def test_corpus_replays_clean(self):
        files = sorted(CORPUS.glob("**/*.json"))
        self.assertGreaterEqual(len(files), 10)
        p = kvfuzz("replay", CORPUS, "--target", "cuda-emu")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(last_line(p.stdout), f"kvfuzz: {len(files)} passed, 0 failed")

    def test_corpus_covers_every_layout(self):
        layouts = {json.loads(f.read_text())["cache"]["layout"] for f in CORPUS.glob("**/*.json")}
        self.assertEqual(layouts, LAYOUTS)

    def test_corpus_covers_every_quantised_dtype_and_scale_kind(self):
        kinds = {(c["shape"]["cache_dtype"], c["quant"]["scale_kind"])
                 for c in (json.loads(f.read_text()) for f in CORPUS.glob("**/*.json"))}
        for dtype in ("fp8_e4m3", "fp8_e5m2", "int8"):
            for kind in ("per_tensor", "per_head", "per_block", "per_token_head"):
                self.assertIn((dtype, kind), kinds)

    def test_passing_case_has_nothing_to_shrink(self):
        case = sorted(CORPUS.glob("*.json"))[0]
        with tempfile.TemporaryDirectory() as d:
            p = kvfuzz("shrink", case, "-o", d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("nothing to shrink", p.stdout)
            self.assertEqual(list(pathlib.Path(d).iterdir()), [])

    def test_expected_failure_that_passes_is_reported(self):
        case = json.loads(sorted(CORPUS.glob("*.json"))[0].read_text())
        case["expect"] = {"outcome": "fail", "finding_kind": "cross_request_write"}
        with tempfile.TemporaryDirectory() as d:
            f = pathlib.Path(d) / "c.json"
            f.write_text(json.dumps(case))
            # --expect-saved: the record is checked, and a pinned failure that passes is a mismatch.
            p = kvfuzz("replay", f, "--expect-saved")
            self.assertEqual(p.returncode, 1)
            self.assertIn("expected fail:cross_request_write, got pass", p.stdout)
            self.assertIn(f"kvfuzz replay {f}", p.stdout)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 0 passed, 1 failed")
            # Default: the kernel gives no finding, so the recorded failure is fixed: it passes.
            p = kvfuzz("replay", f)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn(f"kvfuzz: fixed: {f} (recorded fail:cross_request_write) passes now", p.stdout)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")


class BadInput(unittest.TestCase):
    """Every malformed case file: exit 2, the file named, no crash, no hang, nothing run."""

    def good_case(self):
        return json.loads(sorted(CORPUS.glob("*.json"))[0].read_text())

    def check_refused(self, content, *must_mention):
        with tempfile.TemporaryDirectory() as d:
            f = pathlib.Path(d) / "bad.json"
            f.write_bytes(content if isinstance(content, bytes) else content.encode())
            p = kvfuzz("replay", f, timeout=60)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(str(f), p.stderr)
            for m in must_mention:
                self.assertIn(m, p.stderr)
            self.assertNotIn("passed", p.stdout, "nothing may run when an input is bad")

    def test_truncated(self):
        text = json.dumps(self.good_case())
        self.check_refused(text[: len(text) // 2])

    def test_empty(self):
        self.check_refused(b"")

    def test_binary(self):
        self.check_refused(bytes(range(256)) * 4)

    def test_wrong_type(self):
        c = self.good_case()
        c["shape"]["num_heads"] = "eight"
        self.check_refused(json.dumps(c), "/shape/num_heads")

    def test_absurd_size(self):
        c = self.good_case()
        c["cache"]["buffer_elems"] = 10**15
        self.check_refused(json.dumps(c), "/cache", "limit")

    def test_newer_schema_version(self):
        c = self.good_case()
        c["version"] = 99
        self.check_refused(json.dumps(c), "newer kvfuzz")

    def test_bad_file_in_a_directory_stops_the_replay(self):
        with tempfile.TemporaryDirectory() as d:
            good = sorted(CORPUS.glob("*.json"))[0]
            (pathlib.Path(d) / good.name).write_text(good.read_text())
            (pathlib.Path(d) / "zz-bad.json").write_text("{")
            p = kvfuzz("replay", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("zz-bad.json", p.stderr)

    def test_missing_file(self):
        p = kvfuzz("replay", "/nonexistent/case.json")
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent/case.json", p.stderr)


if __name__ == "__main__":
    unittest.main()
