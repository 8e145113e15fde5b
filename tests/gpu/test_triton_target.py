"""The `triton` target end to end (the real kvfuzz binary).

    python3 test_triton_target.py cpu   what holds on any machine: the target is listed, a bad
                                        $KVFUZZ_TRITON_KERNELS is bad input (exit 2), and without a
                                        GPU `--target triton` exits 3 saying why while CPU targets run
    python3 test_triton_target.py gpu   campaigns and the corpus on the GPU (exit 77 = skipped when
                                        there is no NVIDIA GPU)

Env: KVFUZZ_BIN (the binary), KVFUZZ_SOURCE_DIR (the repository: configs/, corpus/). Both parts
skip (exit 77) when the binary was built without the triton target.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
SRC = os.environ.get("KVFUZZ_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SKIP = 77


def kvfuzz(*args, env=None):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, cwd=SRC, timeout=900,
                          env=dict(os.environ, **(env or {})))


def have_gpu():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    p = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return p.returncode == 0 and "GPU" in p.stdout


def has_triton_target():
    return any(line == "triton" for line in kvfuzz("targets").stdout.splitlines())


class Anywhere(unittest.TestCase):
    def test_listed_as_a_gpu_target_with_exact_values(self):
        out = kvfuzz("targets").stdout
        entry = out[out.index("\ntriton\n"):].split("\ntriton-interp")[0]
        # kv_append per (input, cache, slot dtype): 3 x 6 x 2; the quantised formats' kernel per
        # (input dtype, format, slot dtype): 3 x 10 x 2.
        cubins = 3 * 6 * 2 + 3 * 10 * 2
        self.assertIn(f"compiled ahead of time (triton 3.6.0, {cubins} cubins for sm_90a)", entry)
        self.assertIn("(60 format cubins)", entry)
        self.assertIn("values checked: exact", entry)
        self.assertIn("needs a GPU: yes", entry)

    def test_a_bad_kernel_directory_is_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            p = kvfuzz("run", "--target", "triton", "--cases", 5, "--seed", 1, env={"KVFUZZ_TRITON_KERNELS": d})
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(os.path.join(d, "manifest.json"), p.stderr)
        self.assertIn("aot_compile.py", p.stderr)

    @unittest.skipIf(have_gpu(), "this machine has a GPU")
    def test_without_a_gpu_it_exits_3_and_cpu_targets_still_run(self):
        p = kvfuzz("run", "--target", "triton", "--cases", 5, "--seed", 1)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("target triton is not available on this machine", p.stderr)
        p = kvfuzz("run", "--target", "cuda-emu", "--cases", 20, "--seed", 1)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


class OnGpu(unittest.TestCase):
    def campaign(self, *args, cases=2000):
        p = kvfuzz("run", "--target", "triton", "--cases", cases, "--seed", 3, *args)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIn(f"kvfuzz: {cases} passed, 0 failed", p.stdout + p.stderr)

    def test_default_campaign_is_clean(self):
        self.campaign()

    def test_quant_campaign_is_clean(self):
        self.campaign("--config", os.path.join(SRC, "configs", "quant.json"))

    def test_corpus_replays_clean(self):
        p = kvfuzz("replay", os.path.join(SRC, "corpus"), "--target", "triton")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])


if __name__ == "__main__":
    part = sys.argv.pop(1) if len(sys.argv) > 1 else "cpu"
    if not has_triton_target():
        print("kvfuzz was built without the triton target")
        sys.exit(SKIP)
    if part == "gpu" and not have_gpu():
        print("no NVIDIA GPU")
        sys.exit(SKIP)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(OnGpu if part == "gpu" else Anywhere)
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
