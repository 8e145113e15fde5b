"""End-to-end tests of `--target plugin:PATH.so` (issue 10; run by ctest as e2e.plugins).

The plugins are built by examples/plugins and tests/plugins into $KVFUZZ_PLUGIN_DIR:
  naive.so                      examples/plugins/naive/naive.c (host, same-dtype float caches, paged only)
  naive-mutant-padding.so       naive.c with slot -1 not skipped
  kvfuzz_cuda_plugin.so         kernels/cuda on the CPU emulator, through the ABI
  kvfuzz_cuda_plugin_device.so  kernels/cuda on the GPU (DeviceBuild; `python3 test_plugins.py --gpu`)
  broken-*.so                   tests/plugins/broken_plugin.c: one rule of the ABI broken each
Exit codes: 0 clean, 1 findings, 2 bad input (no such plugin file), 3 plugin not usable here.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
PLUGINS = pathlib.Path(os.environ.get("KVFUZZ_PLUGIN_DIR", "."))
SKIPPED_LINE = re.compile(r"^kvfuzz: skipped (\d+) cases? outside the target's capabilities \((.*)\); (\d+) replaced", re.M)


def kvfuzz(*args, timeout=600, **kw):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def plugin(name):
    path = PLUGINS / name
    if not path.exists():  # built with the project (ALL); a missing one is a broken build, not a skip
        raise FileNotFoundError(f"{path} was not built (cmake --build BUILD --target {path.stem})")
    return f"plugin:{path}"


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


class ExamplePlugins(unittest.TestCase):
    def test_naive_plugin_passes_and_says_what_it_skipped(self):
        # naive.c declares paged NHD/HND and same-dtype float caches only: drawn cases outside that
        # are counted by reason and replaced; none of them reaches the plugin (it would refuse them:
        # a launch_error, i.e. a failure).
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", plugin("naive.so"), "--cases", 1000, "--seed", 5, "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            skipped = s["skipped"]
            self.assertEqual(last_line(p.stdout), f"kvfuzz: {1000 - skipped['not_run']} passed, 0 failed")
            self.assertGreater(skipped["cases"], 100)  # the default profile is ~45% inside naive's capabilities
            self.assertEqual(sum(skipped["reasons"].values()), skipped["cases"])
            allowed = {"layout contiguous_bshd", "layout contiguous_bhsd", "layout packed_kv_nhd",
                       "float cache of another dtype than the input",
                       "cache dtype fp8_e4m3", "cache dtype fp8_e5m2", "cache dtype int8"}
            self.assertLessEqual(set(skipped["reasons"]), allowed)
            self.assertIn("layout packed_kv_nhd", skipped["reasons"])
            m = SKIPPED_LINE.search(p.stdout)
            self.assertIsNotNone(m, p.stdout)
            self.assertEqual(int(m.group(1)), skipped["cases"])
            self.assertIn(f"layout packed_kv_nhd: {skipped['reasons']['layout packed_kv_nhd']}", m.group(2))

    def test_replaying_the_corpus_on_the_naive_plugin_skips_what_it_does_not_support(self):
        corpus = pathlib.Path(__file__).resolve().parents[2] / "corpus"
        files = len(list(corpus.rglob("*.json")))
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "r.json"
            p = kvfuzz("replay", corpus, "--target", plugin("naive.so"), "--json", summary)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            self.assertGreater(s["skipped"]["cases"], 0)
            self.assertGreater(s["passed"], 0)
            self.assertEqual(s["passed"] + s["skipped"]["cases"], files)
            self.assertIn(f"kvfuzz: skipped {s['skipped']['cases']} case files outside the target's capabilities (",
                          p.stdout)

    def test_cuda_kernel_as_a_host_plugin_passes_the_cuda_emu_campaign(self):
        # kernels/cuda through the ABI declares everything and exact rounding: nothing is skipped,
        # and the campaign is the cuda-emu campaign of the same seed, case for case.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", plugin("kvfuzz_cuda_plugin.so"), "--cases", 1000, "--seed", 5,
                       "--json", summary, "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1000 passed, 0 failed")
            s = json.loads(summary.read_text())
            self.assertEqual(s["skipped"]["cases"], 0)
            self.assertEqual(s["tolerance"], "exact")
            self.assertNotIn("skipped", p.stdout)


class RoundingConvention(unittest.TestCase):
    def test_declared_rounding_sets_the_default_tolerance_and_tolerance_overrides_it(self):
        # cuda-int8-truncation-1ulp.so truncates int8 (1 ulp off) and says so (KVFZ_ROUNDING_WITHIN_1ULP).
        src = pathlib.Path(__file__).resolve().parents[2]
        target = plugin("cuda-int8-truncation-1ulp.so")
        args = ("--target", target, "--config", src / "configs" / "quant.json", "--cases", 300, "--seed", 1)
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", *args, "--json", summary, "--corpus-out", pathlib.Path(d) / "a")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("values checked ulp:1", p.stderr)
            self.assertEqual(json.loads(summary.read_text())["tolerance"], "ulp:1")
            p = kvfuzz("run", *args, "--tolerance", "exact", "--corpus-out", pathlib.Path(d) / "b")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertRegex(p.stdout, r"FAIL case #\d+ on \S+ -> wrong_value")


class MutatedPlugin(unittest.TestCase):
    def test_padding_mutant_is_caught_shrunk_reported_and_replayed(self):
        mutant, clean = plugin("naive-mutant-padding.so"), plugin("naive.so")
        with tempfile.TemporaryDirectory() as d:
            found = pathlib.Path(d) / "found"
            p = kvfuzz("run", "--target", mutant, "--cases", 1000, "--seed", 1, "--corpus-out", found)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertRegex(p.stdout, r"kvfuzz: FAIL case #\d+ on \S+ -> oob_write")
            self.assertIn("padding_leak: padding row", p.stdout)  # the -1 row, named as such
            self.assertRegex(p.stdout, r"shrunk: \d+ steps .* to 1 request")
            self.assertRegex(last_line(p.stdout), r"^kvfuzz: \d+ passed, 1 failed$")
            cases = sorted(found.glob("*.json"))
            self.assertEqual(len(cases), 1)
            case = json.loads(cases[0].read_text())
            self.assertEqual(case["expect"], {"outcome": "fail", "finding_kind": "oob_write"})
            self.assertEqual(case["provenance"]["target"], mutant)
            self.assertTrue((found / (cases[0].stem + ".report") / "report.html").exists())
            self.assertIn(f"kvfuzz replay {cases[0]} --target {mutant}", p.stdout)
            # Replay reproduces: the mutant fails (exit 1), and as recorded (--expect-saved: exit 0); the
            # clean plugin passes it (exit 0: fixed). The report re-runs it on the mutant.
            r = kvfuzz("replay", cases[0], "--target", mutant)
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("-> oob_write", r.stdout)
            self.assertEqual(kvfuzz("replay", cases[0], "--target", mutant, "--expect-saved").returncode, 0)
            r = kvfuzz("replay", cases[0], "--target", clean)
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertIn("passes now", r.stdout)
            rep = kvfuzz("report", cases[0], "--target", mutant, "-o", pathlib.Path(d) / "rep")
            self.assertEqual(rep.returncode, 1, rep.stderr)
            report = json.loads((pathlib.Path(d) / "rep" / "report.json").read_text())
            self.assertEqual(report["schema"], "kvfuzz-report")


class CrashingPlugin(unittest.TestCase):
    def test_a_segfault_is_a_crash_finding_and_the_campaign_goes_on(self):
        # broken-crash-on-head-dim-7.so writes through a null pointer when head_dim == 7 and is naive
        # otherwise: each crash kills a worker, is a `crash` finding, and later cases still pass.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", plugin("broken-crash-on-head-dim-7.so"), "--cases", 200, "--seed", 2,
                       "--keep-going", "--max-shrink-tries", 20, "--confirm-runs", 1, "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            self.assertGreater(s["failed"], 0)
            self.assertGreater(s["passed"], 0)
            self.assertEqual(s["passed"] + s["failed"], 200 - s["skipped"]["not_run"])
            self.assertEqual(set(s["findings_by_kind"]), {"crash"})
            self.assertIn("worker killed by signal 11", p.stdout)
            for f in s["failures"]:
                self.assertEqual(f["size"]["head_dim"], 7)
            self.assertEqual(last_line(p.stdout), f"kvfuzz: {s['passed']} passed, {s['failed']} failed")


class CapabilitiesKeepCasesInside(unittest.TestCase):
    def test_no_case_outside_the_capabilities_reaches_the_plugin_not_even_while_shrinking(self):
        # broken-strict-hnd-i32.so declares paged HND and i32 slots only, logs any call outside that,
        # and refuses every case with 2+ heads (a launch_error). The shrinker's simplest layout and
        # slot dtype (paged_nhd, i64) are outside: it must not run them.
        with tempfile.TemporaryDirectory() as d:
            violations = pathlib.Path(d) / "violations.txt"
            found = pathlib.Path(d) / "found"
            p = kvfuzz("run", "--target", plugin("broken-strict-hnd-i32.so"), "--cases", 300, "--seed", 4,
                       "--corpus-out", found, env={**os.environ, "KVFUZZ_TEST_VIOLATIONS": str(violations)})
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertRegex(p.stdout, r"FAIL case #\d+ on \S+ -> launch_error")
            self.assertIn("two or more heads are not implemented", p.stdout)
            self.assertRegex(p.stdout, r"shrunk: [1-9]\d* steps")
            self.assertFalse(violations.exists(), violations.read_text() if violations.exists() else "")
            case = json.loads(next(found.glob("*.json")).read_text())
            self.assertEqual((case["cache"]["layout"], case["shape"]["slot_dtype"], case["shape"]["num_heads"]),
                             ("paged_hnd", "i32", 2))


    def test_a_head_dim_set_is_all_the_plugin_ever_sees_not_even_while_shrinking(self):
        # broken-head-dims-64-128.so declares head_dims {64, 128}, logs any call with another head
        # dim, and refuses every case with 2+ heads. The shrinker's simplest head dims (1, 2, ...)
        # are outside the set: it must not run them; replay skips corpus files outside it.
        with tempfile.TemporaryDirectory() as d:
            violations = pathlib.Path(d) / "violations.txt"
            found = pathlib.Path(d) / "found"
            summary = pathlib.Path(d) / "s.json"
            env = {**os.environ, "KVFUZZ_TEST_VIOLATIONS": str(violations)}
            target = plugin("broken-head-dims-64-128.so")
            p = kvfuzz("run", "--target", target, "--cases", 300, "--seed", 4, "--corpus-out", found, "--json", summary,
                       env=env)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("two or more heads are not implemented", p.stdout)
            self.assertRegex(p.stdout, r"shrunk: [1-9]\d* steps")
            self.assertFalse(violations.exists(), violations.read_text() if violations.exists() else "")
            case = json.loads(next(found.glob("*.json")).read_text())
            self.assertIn(case["shape"]["head_dim"], (64, 128))
            self.assertEqual(case["shape"]["num_heads"], 2)
            corpus = pathlib.Path(__file__).resolve().parents[2] / "corpus"
            r = kvfuzz("replay", corpus, "--target", target, "--json", summary, env=env)
            self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
            self.assertGreater(json.loads(summary.read_text())["skipped"]["reasons"].get("head_dim not in {64, 128}", 0), 0)
            self.assertFalse(violations.exists(), violations.read_text() if violations.exists() else "")


class NoSlotsPastCapacity(unittest.TestCase):
    def test_a_plugin_declaring_no_slots_past_capacity_never_gets_one(self):
        # broken-no-slots-past-capacity.so refuses (launch_error) any call with a slot >= capacity.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", plugin("broken-no-slots-past-capacity.so"), "--cases", 400, "--seed", 6,
                       "--json", summary, "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(json.loads(summary.read_text())["passed"], 400)
            # The control: the profile does send such slots (a kernel that did not declare it gets them).
            n = kvfuzz("run", "--target", plugin("naive.so"), "--cases", 400, "--seed", 6, "--stats", "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found2")
            self.assertEqual(n.returncode, 0, n.stdout + n.stderr)
            stats = json.loads(summary.read_text())["stats"]
            self.assertGreater(sum(v for k, v in stats.items() if k.startswith("invalid_slots=") and k != "invalid_slots=0"), 0,
                               stats)


class StrideGranularity(unittest.TestCase):
    def test_a_plugin_declaring_a_stride_granularity_gets_only_whole_units(self):
        # broken-stride-granularity-16.so declares 16-byte strides and refuses (launch_error) any call
        # with an input or cache stride of another length: kvfuzz must pad in whole units only.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", plugin("broken-stride-granularity-16.so"), "--cases", 400, "--seed", 4,
                       "--stats", "--json", summary, "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            result = json.loads(summary.read_text())
            self.assertEqual(result["passed"], 400)
            # Gapped strides are still drawn (in 16-byte units), so the kernel's padded paths run.
            self.assertGreater(result["stats"].get("cache_strides=gapped", 0), 50, result["stats"])
            # The control: without the declaration the same profile sends strides it refuses.
            n = kvfuzz("run", "--target", plugin("naive.so"), "--cases", 400, "--seed", 4, "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found2")
            self.assertEqual(n.returncode, 0, n.stdout + n.stderr)
            r = kvfuzz("replay", pathlib.Path(__file__).resolve().parents[2] / "corpus", "--target",
                       plugin("broken-stride-granularity-16.so"), "--json", summary)
            self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
            reasons = json.loads(summary.read_text())["skipped"]["reasons"]
            self.assertGreater(sum(v for k, v in reasons.items() if "not a multiple of 16 bytes" in k), 0, reasons)

    def test_kvfuzz_targets_shows_what_a_named_plugin_declares(self):
        target = plugin("broken-stride-granularity-16.so")
        p = kvfuzz("targets", target, "--json")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        [entry] = json.loads(p.stdout)["targets"]
        self.assertEqual(entry["name"], target)
        self.assertTrue(entry["available"])
        self.assertEqual(entry["capabilities"]["stride_granularity"], 16)
        self.assertEqual(entry["capabilities"]["layouts"], ["paged_nhd", "paged_hnd"])
        self.assertNotIn("inputs", entry)  # a Python-only declaration
        text = kvfuzz("targets", target)
        self.assertEqual(text.returncode, 0, text.stdout + text.stderr)
        self.assertIn("strides in 16-byte units", text.stdout)
        self.assertIn("available here: yes", text.stdout)
        missing = kvfuzz("targets", "plugin:" + str(pathlib.Path(target[len("plugin:"):]).with_name("no-such-plugin.so")))
        self.assertEqual(missing.returncode, 2, missing.stdout + missing.stderr)
        self.assertIn("no such file", missing.stderr)


class FormatsOnlyPlugin(unittest.TestCase):
    def test_a_plugin_writing_quantised_formats_only_gets_no_classic_case(self):
        # kvfuzz_cuda_plugin_formats_only.so declares the formats without the NONE bit and no classic
        # cache dtype (as a ds_mla or indexer writer has none): planning used to refuse it.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            config = pathlib.Path(__file__).resolve().parents[2] / "configs" / "quant-formats.json"
            p = kvfuzz("run", "--target", plugin("kvfuzz_cuda_plugin_formats_only.so"), "--config", config, "--cases", 150,
                       "--seed", 2, "--stats", "--json", summary, "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            self.assertEqual(s["passed"], 150)
            self.assertEqual(s["stats"].get("quant_format=none", 0), 0, s["stats"])
            formats = {k for k, v in s["stats"].items() if k.startswith("quant_format=") and v > 0}
            self.assertGreaterEqual(len(formats), 5, formats)


class SkippedByThePlugin(unittest.TestCase):
    """KVFZ_APPEND_SKIP: a case the kernel declines is counted by its reason, never a finding."""

    REASON = "skipped by the kernel: head_dim below 8 is not implemented"

    def test_skips_are_counted_by_reason_in_run_and_replay_and_exit_0(self):
        target = plugin("broken-skips-small-head-dim.so")
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", target, "--cases", 120, "--seed", 3, "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            skips = s["skipped"]["reasons"].get(self.REASON, 0)
            self.assertGreater(skips, 0, s["skipped"])
            self.assertEqual(sum(s["skipped"]["reasons"].values()), s["skipped"]["cases"])
            self.assertEqual(s["passed"], 120)  # every declined case replaced by another draw
            self.assertEqual(s["skipped"]["not_run"], 0)
            self.assertEqual(s["skipped"]["replaced"], s["skipped"]["cases"])
            self.assertEqual(s["failed"], 0)
            self.assertEqual(last_line(p.stdout), f"kvfuzz: {s['passed']} passed, 0 failed")
            # The kernel's skips are counted apart from the capability skips, under their own words.
            bare = self.REASON.removeprefix("skipped by the kernel: ")
            outside = s["skipped"]["cases"] - skips
            line = next(l for l in p.stdout.splitlines() if l.startswith("kvfuzz: skipped "))
            if outside:
                self.assertRegex(line, rf"^kvfuzz: skipped {s['skipped']['cases']} cases: {outside} outside the "
                                       rf"target's capabilities \(.*\), {skips} by the kernel \({re.escape(bare)}: {skips}\); "
                                       rf"{s['skipped']['replaced']} replaced by other draws$")
            else:
                self.assertEqual(line, f"kvfuzz: skipped {skips} cases by the kernel ({bare}: {skips}); "
                                       f"{skips} replaced by other draws")

            cases = pathlib.Path(d) / "cases"
            self.assertEqual(kvfuzz("generate", "--seed", 3, "--cases", 60, "-o", cases).returncode, 0)
            def inside_naive(c):  # naive.c's capabilities: paged caches of the input's dtype
                return c["cache"]["layout"] in ("paged_nhd", "paged_hnd") and c["shape"]["cache_dtype"] == c["shape"]["input_dtype"]
            small = [f for f in sorted(cases.glob("*.json"))
                     if json.loads(f.read_text())["shape"]["head_dim"] < 8 and inside_naive(json.loads(f.read_text()))]
            self.assertGreater(len(small), 0)
            r = kvfuzz("replay", cases, "--target", target, "--json", summary)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            s = json.loads(summary.read_text())
            self.assertEqual(s["skipped"]["reasons"].get(self.REASON), len(small), s["skipped"])
            self.assertEqual(s["failed"], 0)
            self.assertIn(f"{len(small)} by the kernel ({self.REASON.removeprefix('skipped by the kernel: ')}: "
                          f"{len(small)})", r.stdout)

            sh = kvfuzz("shrink", small[0], "--target", target, "-o", pathlib.Path(d) / "shrunk")
            self.assertEqual(sh.returncode, 0, sh.stdout + sh.stderr)
            self.assertIn(f"is not run on {target} ({self.REASON}); nothing to shrink", sh.stdout)
            self.assertEqual(last_line(sh.stdout), "kvfuzz: 0 passed, 0 failed")
            rep = kvfuzz("report", small[0], "--target", target, "-o", pathlib.Path(d) / "report")
            self.assertEqual(rep.returncode, 0, rep.stdout + rep.stderr)
            self.assertIn(f"is not run on {target} ({self.REASON}); no report written", rep.stdout)
            self.assertFalse((pathlib.Path(d) / "report").exists())

    def test_a_skipped_shrink_candidate_is_not_taken_and_is_counted(self):
        # With KVFUZZ_TEST_WRONG the plugin writes nothing (missing_write) for head dims >= 8: the
        # shrinker's head dims below 8 are skipped, so the minimal case keeps head_dim 8.
        target = plugin("broken-skips-small-head-dim.so")
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            found = pathlib.Path(d) / "found"
            p = kvfuzz("run", "--target", target, "--cases", 100, "--seed", 3, "--json", summary, "--corpus-out", found,
                       env={**os.environ, "KVFUZZ_TEST_WRONG": "1"})
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertRegex(p.stdout, r"FAIL case #\d+ on \S+ -> missing_write")
            self.assertNotIn("launch_error", p.stdout)
            f = json.loads(summary.read_text())["failures"][0]
            self.assertEqual([x["kind"] for x in f["findings"]], ["missing_write"])
            self.assertGreater(f["shrink_skipped"].get(self.REASON, 0), 0, f)
            self.assertEqual(f["size"]["head_dim"], 8)  # the default profile's smallest head dim >= 8
            self.assertIn(f"shrink candidates skipped by the kernel (not taken): {self.REASON}: ", p.stdout)
            case = next(found.glob("*.json"))
            sh = kvfuzz("shrink", case, "--target", target, "-o", pathlib.Path(d) / "again",
                        env={**os.environ, "KVFUZZ_TEST_WRONG": "1"})
            self.assertEqual(sh.returncode, 1, sh.stdout + sh.stderr)
            self.assertIn("-> missing_write", sh.stdout)


class VllmLegacyLayout(unittest.TestCase):
    """vLLM's legacy caches (x-packed K, transposed V): a kernel capped at 512 threads with no loop
    over its (head, x-chunk) items loses the tail heads of wide rows; with the loop it is right."""

    FORMATS = pathlib.Path(__file__).resolve().parents[2] / "configs" / "formats.json"

    def test_the_capped_kernel_is_caught_and_shrunk_to_one_request(self):
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", plugin("xpacked_capped.so"), "--config", self.FORMATS,
                       "--cases", 3000, "--seed", 1, "--corpus-out", pathlib.Path(d) / "found", "--json", summary)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            f = s["failures"][0]
            self.assertEqual(f["findings"][0]["kind"], "missing_write", f)
            self.assertEqual(f["size"]["requests"], 1, f)
            case = json.loads(pathlib.Path(f["file"]).read_text())
            self.assertEqual(case["cache"]["layout"], "vllm_legacy")
            H, D = case["shape"]["num_heads"], case["shape"]["head_dim"]
            self.assertGreater(H * (D // 8), 512)  # more (head, chunk) items than the 512 threads
            self.assertEqual(kvfuzz("replay", f["file"], "--target", plugin("xpacked_capped.so")).returncode, 1)
            self.assertEqual(kvfuzz("replay", f["file"], "--target", plugin("xpacked_loop.so")).returncode, 0)

    def test_the_kernel_with_the_loop_passes_and_so_does_our_cuda_kernel(self):
        with tempfile.TemporaryDirectory() as d:
            p = kvfuzz("run", "--target", plugin("xpacked_loop.so"), "--config", self.FORMATS,
                       "--cases", 3000, "--seed", 1, "--corpus-out", d)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            passed = re.match(r"kvfuzz: (\d+) passed, 0 failed$", last_line(p.stdout))
            self.assertTrue(passed, p.stdout)
            self.assertGreater(int(passed.group(1)), 2900)  # a few draws find no case inside the capabilities
            # The CUDA kernel (on cuda-emu) writes the layout element by element through the format model.
            summary = pathlib.Path(d) / "s.json"
            q = kvfuzz("run", "--target", "cuda-emu", "--config", self.FORMATS, "--cases", 300, "--seed", 1,
                       "--corpus-out", d, "--stats", "--json", summary)
            self.assertEqual(q.returncode, 0, q.stdout + q.stderr)
            self.assertGreater(json.loads(summary.read_text())["stats"].get("layout=vllm_legacy", 0), 0)


class RefusedPlugins(unittest.TestCase):
    def assert_refused(self, target, code, *needles):
        p = kvfuzz("run", "--target", target, "--cases", 5, "--seed", 1)
        self.assertEqual(p.returncode, code, p.stdout + p.stderr)
        for needle in needles:
            self.assertIn(needle, p.stderr)
        self.assertNotIn("passed", p.stdout)  # nothing ran

    def test_a_missing_file_is_bad_input(self):
        self.assert_refused("plugin:/nonexistent/plugin.so", 2, "/nonexistent/plugin.so: no such file")
        self.assert_refused("plugin:", 2, "needs an argument: plugin:PATH.so")

    def test_a_file_that_is_not_a_shared_object_is_unusable(self):
        with tempfile.TemporaryDirectory() as d:
            fake = pathlib.Path(d) / "fake.so"
            fake.write_text("not an ELF file\n")
            self.assert_refused(f"plugin:{fake}", 3, "cannot load it", "shared object")

    def test_another_abi_version_is_refused(self):
        self.assert_refused(plugin("broken-abi-version-99.so"), 3, "built for plugin ABI version 99",
                            "this kvfuzz speaks versions 1 and 2", "rebuild it")

    def test_a_missing_symbol_is_refused(self):
        self.assert_refused(plugin("broken-no-append.so"), 3, "does not export kvfuzz_plugin_append")

    def test_a_refused_query_is_unusable_with_its_reason(self):
        self.assert_refused(plugin("broken-query-refuses.so"), 3, "kvfuzz_plugin_query refused to run here",
                            "needs an accelerator this machine does not have")

    def test_a_profile_with_nothing_the_plugin_supports_is_bad_input(self):
        src = pathlib.Path(__file__).resolve().parents[2]
        p = kvfuzz("run", "--target", plugin("naive.so"), "--config", src / "configs" / "quant.json", "--cases", 5)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn('profile "quant" generates no cache the target supports', p.stderr)


class DeviceBuild(unittest.TestCase):
    """kernels/cuda through the ABI on the GPU (ctest gpu.plugin_device_build)."""

    def test_device_plugin_campaign(self):
        if not os.environ.get("KVFUZZ_GPU_TEST"):
            self.skipTest("GPU test: run `python3 test_plugins.py --gpu`")
        target = plugin("kvfuzz_cuda_plugin_device.so")
        with tempfile.TemporaryDirectory() as d:
            p = kvfuzz("run", "--target", target, "--cases", 1000, "--seed", 5,
                       "--corpus-out", pathlib.Path(d) / "found")
            if p.returncode == 3 and ("CUDA" in p.stderr or "driver" in p.stderr):
                raise unittest.SkipTest("no usable GPU: " + p.stderr.strip())
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1000 passed, 0 failed")


if __name__ == "__main__":
    if "--gpu" in sys.argv:  # exit 77 (ctest SKIP_RETURN_CODE) when there is no GPU
        os.environ["KVFUZZ_GPU_TEST"] = "1"
        result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromTestCase(DeviceBuild))
        sys.exit(1 if not result.wasSuccessful() else 77 if result.skipped else 0)
    unittest.main()
