"""Large caches (windowed mode) and `kvfuzz compare`, end to end (run by ctest as e2e.large and gpu.large).

    python3 test_large.py cpu    # cuda-emu and golden; any machine
    python3 test_large.py gpu    # the cuda target; exits 77 (skipped) without a usable GPU

Environment: KVFUZZ_BIN (kvfuzz), KVFUZZ_MUTANT_BIN (kvfuzz-mutant-padding-not-skipped),
KVFUZZ_SOURCE_DIR. Large cases span 2^32 elements per tensor (8-16 GiB caches); cuda-emu runs them
in host memory filled page by page as the kernel touches it, so they need address space, not RAM.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
MUTANT = os.environ.get("KVFUZZ_MUTANT_BIN", "")
SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
LARGE = SRC / "configs" / "large.json"
SIZES = {"f16": 2, "bf16": 2, "f32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}


def run(*args, timeout=600, **kw):
    return subprocess.run([*map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


class LargeProfile(unittest.TestCase):
    def test_cases_exceed_32_bit_indices_and_put_blocks_on_both_sides(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(BIN, "generate", "--config", LARGE, "--seed", 1, "--cases", 40, "-o", d)
            self.assertEqual(p.returncode, 0, p.stderr)
            below = above = 0
            for f in pathlib.Path(d).glob("*.json"):
                c = json.loads(f.read_text())
                cache, dtype = c["cache"], c["shape"]["cache_dtype"]
                span = cache["num_blocks"] * cache["stride_block"]
                self.assertGreaterEqual(span, 2 ** 32, f.name)  # each tensor: K + V > 2^33 elements
                self.assertGreater(cache["buffer_elems"] * SIZES[dtype], 2 ** 32, f.name)
                for r in c["requests"]:
                    for b in r["blocks"]:
                        if b * cache["stride_block"] >= 2 ** 31:
                            above += 1
                        else:
                            below += 1
            self.assertGreater(above, 10)
            self.assertGreater(below, 10)

    def test_a_large_campaign_passes_on_cuda_emu(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(BIN, "run", "--target", "cuda-emu", "--config", LARGE, "--cases", 40, "--seed", 1,
                    "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 40 passed, 0 failed")

    def test_a_saved_large_case_replays_with_a_raised_case_limit(self):
        with tempfile.TemporaryDirectory() as d:
            run(BIN, "generate", "--config", LARGE, "--seed", 2, "--cases", 2, "-o", d)
            p = run(BIN, "replay", d)
            self.assertEqual(p.returncode, 2, "a 16 GiB case is over the default 1 GiB --max-case-mib")
            self.assertIn("--max-case-mib", p.stderr)
            p = run(BIN, "replay", d, "--max-case-mib", 65536)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_profile_refuses_a_minimum_the_smallest_shape_cannot_reach(self):
        with tempfile.TemporaryDirectory() as d:
            prof = json.loads((SRC / "configs" / "default.json").read_text())
            prof["min_tensor_elements"] = 2 ** 36
            f = pathlib.Path(d) / "p.json"
            f.write_text(json.dumps(prof))
            p = run(BIN, "run", "--config", f, "--cases", 1)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("/min_tensor_elements", p.stderr)
            self.assertIn("blocks", p.stderr)


@unittest.skipUnless(MUTANT, "KVFUZZ_MUTANT_BIN not set")
class WindowedModeCatches(unittest.TestCase):
    def test_a_mutant_is_caught_when_every_case_runs_windowed(self):
        # --windowed-above-mib 0: every case, however small, takes the large-cache path.
        with tempfile.TemporaryDirectory() as d:
            p = run(MUTANT, "run", "--target", "cuda-emu", "--cases", 2000, "--seed", 1, "--windowed-above-mib", 0,
                    "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertRegex(last_line(p.stdout), r"kvfuzz: \d+ passed, 1 failed")


class Compare(unittest.TestCase):
    def test_identical_targets_agree_on_small_and_large_cases(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(BIN, "compare", "--target", "cuda-emu", "--against", "golden", "--cases", 200, "--seed", 4, "-o", d)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("200 identical", p.stdout)
            p = run(BIN, "compare", "--target", "cuda-emu", "--against", "cuda-emu", "--config", LARGE, "--cases", 10,
                    "--seed", 4, "-o", d)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("10 identical", p.stdout)
            self.assertEqual(list(pathlib.Path(d).iterdir()), [], "nothing differed, so nothing is saved")

    def test_bad_second_target_is_a_usage_error(self):
        p = run(BIN, "compare", "--target", "cuda-emu", "--against", "no-such-target", "--cases", 1)
        self.assertEqual(p.returncode, 2, p.stderr)
        p = run(BIN, "compare", "--target", "cuda-emu", "--cases", 1)
        self.assertEqual(p.returncode, 2, p.stderr)

    @unittest.skipUnless(MUTANT, "KVFUZZ_MUTANT_BIN not set")
    def test_a_mutant_differs_from_the_golden_model_at_a_named_byte(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(MUTANT, "compare", "--target", "cuda-emu", "--against", "golden", "--cases", 500, "--seed", 4, "-o", d)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("kvfuzz: DIFFER case #", p.stdout)
            self.assertRegex(p.stdout, r"at image byte \d+ (= cache buffer element \d+|\(guard band, \d+ bytes)")
            saved = list(pathlib.Path(d).glob("*.json"))
            self.assertEqual(len(saved), 1)
            # The saved case is the contract's: the golden model passes it, the mutant does not.
            self.assertEqual(run(BIN, "replay", saved[0], "--target", "golden").returncode, 0)
            self.assertEqual(run(MUTANT, "replay", saved[0], "--target", "cuda-emu").returncode, 1)


def cuda_unavailable():
    p = run(BIN, "compare", "--target", "cuda", "--against", "cuda-emu", "--cases", 1, "--seed", 1)
    return p.returncode == 3 or "not available" in p.stderr or "unknown target" in p.stderr


class Gpu(unittest.TestCase):
    def test_large_campaign_on_cuda(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(BIN, "run", "--target", "cuda", "--config", LARGE, "--cases", 100, "--seed", 1,
                    "--corpus-out", pathlib.Path(d) / "found", timeout=900)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 100 passed, 0 failed")

    def test_cuda_and_cuda_emu_leave_identical_images(self):
        with tempfile.TemporaryDirectory() as d:
            for args in (["--cases", 300], ["--config", LARGE, "--cases", 20]):
                p = run(BIN, "compare", "--target", "cuda", "--against", "cuda-emu", "--seed", 5, "-o", d, *args, timeout=900)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    if mode == "gpu":
        if cuda_unavailable():
            print("no usable CUDA device: skipped")
            sys.exit(77)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Gpu)
    else:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in (LargeProfile, WindowedModeCatches, Compare))
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
