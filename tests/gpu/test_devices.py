"""`run --devices` on a GPU (issue 19; ctest gpu.devices, label gpu; docs/scale.md): one device, two
workers on it (-j 2 --devices 0): both threads' workers run on device 0, the summary reports the
device's workers, cases and cases/s and the host's CPU use, and the cases are those of a run
without --devices (same seed: same counts); `all` lists every device and an absent one is exit 3.
Exits 77 (skipped) without a usable CUDA device.

    KVFUZZ_BIN=build/kvfuzz python3 tests/gpu/test_devices.py
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
ENV = dict(os.environ, CI="1")
CASES = 400


def run(*args, timeout=900):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV)


def cuda_unavailable():
    p = run("run", "--target", "cuda", "--cases", 1, "--seed", 1, "--corpus-out", tempfile.mkdtemp())
    return p.returncode == 3


class Devices(unittest.TestCase):
    def test_two_workers_on_one_device_report_their_rate_and_the_host_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            p = run("run", "--target", "cuda", "--devices", "0", "-j", 2, "--cases", CASES, "--seed", 9,
                    "--corpus-out", d / "f", "--json", d / "devices.json")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("devices 1", p.stderr)
            self.assertRegex(p.stdout, r"kvfuzz: device 0: 2 workers, 400 cases, [0-9.]+ cases/s")
            self.assertRegex(p.stdout, r"kvfuzz: host CPU: [0-9.]+ of \d+ cores busy")
            s = json.loads((d / "devices.json").read_text())
            self.assertEqual(len(s["devices"]), 1)
            dev = s["devices"][0]
            self.assertEqual((dev["device"], dev["workers"], dev["cases"]), (0, 2, CASES))
            self.assertGreater(dev["cases_per_second"], 0)
            self.assertGreater(s["host"]["cpu_seconds"], 0)
            self.assertGreater(s["host"]["cores_busy"], 0)
            self.assertEqual(s["workers"]["failed_starts"], 0)
            plain = run("run", "--target", "cuda", "-j", 2, "--cases", CASES, "--seed", 9, "--corpus-out", d / "g",
                        "--json", d / "plain.json")
            self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
            q = json.loads((d / "plain.json").read_text())
            self.assertEqual((q["cases"], q["passed"], q["failed"], q["devices"]), (CASES, CASES, 0, []))
            # Each thread started its worker on device 0; how many more a campaign starts (5 or 6 for
            # these 400 cases, with or without --devices) depends on scheduling, not on --devices.
            self.assertGreaterEqual(s["workers"]["started"], 2)

    def test_all_is_every_device_and_an_absent_device_is_exit_3(self):
        with tempfile.TemporaryDirectory() as d:
            p = run("run", "--target", "cuda", "--devices", "all", "-j", 2, "--cases", 50, "--seed", 9, "--corpus-out", d,
                    "--json", pathlib.Path(d) / "s.json")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            s = json.loads((pathlib.Path(d) / "s.json").read_text())
            self.assertEqual([x["device"] for x in s["devices"]], list(range(len(s["devices"]))))
            self.assertEqual(sum(x["cases"] for x in s["devices"]), 50)
            p = run("run", "--target", "cuda", "--devices", "0,1023", "--cases", 5, "--seed", 9, "--corpus-out", d)
            self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
            self.assertIn("1023", p.stderr)


if __name__ == "__main__":
    if cuda_unavailable():
        print("test_devices: no usable CUDA device: skipped")
        sys.exit(77)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
