#!/usr/bin/env python3
"""CPU tests of bench/bench.py's non-GPU logic: arguments, cases, byte counts, targets, rendering."""
import contextlib
import io
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import bench  # noqa: E402


def fake_results(cases, us):
    """Rows with graph_us = us[impl](case) for every case and impl."""
    rows = []
    for c in cases:
        for impl, f in us.items():
            rows.append({"impl": impl, "case": c.name, "group": c.group, "tokens": c.tokens,
                         "bytes_moved": c.bytes_moved(), "graph_us": f(c), "stream_us": f(c) + 2.0,
                         "host_us": 10.0, "verify": "ok"})
    return bench.summarise(rows)


class Args(unittest.TestCase):
    def parse_error(self, argv):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            bench.parse_args(argv)
        return e.exception.code

    def test_lib_specs(self):
        a = bench.parse_args(["--out", "x", "--cuda-lib", "cuda=a.so", "--cuda-lib", "v0@h8-d128=b.so"])
        self.assertEqual(a.cuda_lib, [("cuda", "", "a.so"), ("v0", "h8-d128", "b.so")])

    def test_bad_arguments_exit_2(self):
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "noequals"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "triton=a.so"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "a=1.so", "--cuda-lib", "a=2.so"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--tokens", "1,x"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--tokens", "0"]), 2)
        self.assertEqual(self.parse_error([]), 2)  # --out missing

    def test_existing_output_is_not_overwritten(self):
        with tempfile.TemporaryDirectory() as d:
            (pathlib.Path(d) / "bench.md").write_text("mine")
            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(bench.main(["--out", d]), 2)
            self.assertEqual((pathlib.Path(d) / "bench.md").read_text(), "mine")


class Cases(unittest.TestCase):
    def test_case_grid(self):
        cases = bench.all_cases()
        self.assertEqual(len(cases), 2 * (3 + 2) * 5)
        self.assertEqual(len({c.name for c in cases}), len(cases))
        self.assertEqual([c.name for c in bench.select_cases(cases, ["hnd+fp8-per-tensor+t65536"])],
                         ["hnd-fp8-per-tensor-h8-d128-t65536"])

    def test_bytes_match_the_baseline_method(self):
        # research/baseline-h200.md: 65536 x 8 x 128 bf16 moves 536.871 MB of K+V plus 8 B of slot per token.
        c = bench.Case("nhd", "bf16", "none", 8, 128, 65536)
        self.assertEqual(c.bytes_moved(), 65536 * (2 * 1024 * 2 * 2 + 8))
        fp8 = bench.Case("nhd", "fp8_e4m3", "per_tensor", 8, 128, 1)
        self.assertEqual(fp8.bytes_moved(), 2 * 1024 * 2 + 2 * 1024 + 8)
        pth = bench.Case("hnd", "fp8_e4m3", "per_token_head", 8, 128, 1)
        self.assertEqual(pth.bytes_moved(), 2 * 1024 * 2 + 2 * 1024 + 8 + 2 * 8 * 4)
        self.assertEqual(c.copy_bytes() % 16, 0)
        self.assertGreaterEqual(2 * c.copy_bytes(), c.bytes_moved())


class Targets(unittest.TestCase):
    def test_ratios_and_verdicts(self):
        cases = [c for c in bench.all_cases() if c.heads == 8 and c.head_dim == 128]
        res = fake_results(cases, {"copy": lambda c: 100.0,
                                   "cuda": lambda c: 104.0 if c.layout == "nhd" else 120.0,
                                   "slow": lambda c: 200.0})
        r = bench.find(res, "cuda", "nhd-bf16-h8-d128-t65536")
        self.assertAlmostEqual(r["ratio"], 100 / 104)
        self.assertAlmostEqual(r["gbps"], r["bytes_moved"] / 104e3)
        got = {t["target"]: t["met"] for t in bench.evaluate_targets(res, {}, "cuda")}
        self.assertTrue(got["bf16 NHD T=65536 >= 95% of copy"])
        self.assertFalse(got["HND within 10% of NHD (bf16-h8-d128, T=65536)"])  # 120 / 104 = 1.15
        self.assertFalse(got["graph replay per call at T <= 256 <= 1.3 us (all cases)"])
        slow = {t["target"]: t["met"] for t in bench.evaluate_targets(res, {}, "slow")}
        self.assertFalse(slow["bf16 NHD T=65536 >= 95% of copy"])

    def test_ceiling_is_the_faster_copy_timing(self):
        self.assertEqual(bench.ceiling_us({"graph_us": 791.0, "stream_us": 507.0}), 507.0)
        self.assertEqual(bench.ceiling_us({"graph_us": 1.0, "stream_us": 14.0}), 1.0)
        self.assertIsNone(bench.ceiling_us({"verify": "error"}))

    def test_markdown_has_every_row(self):
        cases = bench.select_cases(bench.all_cases(), ["nhd-bf16-h8-d128"])
        res = fake_results(cases, {"copy": lambda c: 2.0, "cuda": lambda c: 4.0})
        res.append({"impl": "triton", "case": cases[0].name, "group": cases[0].group, "tokens": 1,
                    "bytes_moved": 1, "verify": "error: boom"})
        bench.summarise(res)
        md = bench.render_markdown(res, {"device": "test", "targets": bench.evaluate_targets(res, {}, "cuda")})
        self.assertIn("## nhd-bf16-h8-d128", md)
        self.assertIn("| cuda | 65536 | 537.395 | 4.00 |", md)
        self.assertIn("| 50% |", md)
        self.assertIn("| triton | 1 | 0.000 | - |", md)
        self.assertIn("error: boom", md)


if __name__ == "__main__":
    unittest.main()
