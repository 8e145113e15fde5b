"""End-to-end tests of the kvfuzz command line (run by ctest as e2e.cli).

Each test runs the real binary ($KVFUZZ_BIN) and checks its exit code, its output and the files it
writes. Exit codes: 0 clean, 1 findings, 2 usage or bad input, 3 infrastructure.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CORPUS = SRC / "corpus"
CONFIGS = SRC / "configs"
PLUGIN_DIR = pathlib.Path(os.environ.get("KVFUZZ_PLUGIN_DIR", ""))  # build/plugins (naive.so)
MUTANT_BIN = os.environ.get("KVFUZZ_MUTANT_BIN", "")  # kvfuzz-mutant-padding-not-skipped: a failing kernel
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

    def test_targets_json_lists_each_own_targets_formats(self):
        p = kvfuzz("targets", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["schema_version"], 1)
        by_name = {t["name"]: t for t in doc["targets"]}
        for own in ("cuda-emu", "golden", "triton-interp"):
            caps = by_name[own]["capabilities"]
            self.assertEqual(caps["families"], ["kv", "kv_split", "k_only", "mla"], own)
            self.assertIn("vllm_legacy", caps["layouts"], own)
            self.assertIn("per_token_head", caps["scale_kinds"], own)
        # A plugin's or a function's capabilities are the kernel's: unknown until it is loaded.
        self.assertIsNone(by_name["plugin:PATH.so"]["capabilities"])
        text = kvfuzz("targets").stdout
        self.assertIn("  formats: layouts paged_nhd, paged_hnd, contiguous_bshd, contiguous_bhsd, packed_kv_nhd, "
                      "packed_content_hnd, vllm_legacy; families kv, kv_split, k_only, mla; padding negative, sink; "
                      "addressing slot_mapping, csr; window none, slot_mapping, positions; context parallel none, "
                      "slot_mapping, positions; quantised formats none, nvfp4, mxfp8_e4m3, mxfp8_e5m2, mxfp4, ds_mla, "
                      "indexer_k, fp8_inline, int8_inline\n", text)  # cuda-emu: not the asymmetric formats
        everything = ["none", "nvfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "ds_mla", "indexer_k", "fp8_inline",
                      "int8_inline", "asym_int8", "asym_int4"]
        self.assertEqual(by_name["cuda-emu"]["capabilities"]["quant_formats"], everything[:-2])
        for own in ("golden", "triton-interp"):
            self.assertEqual(by_name[own]["capabilities"]["quant_formats"], everything, own)
        for own in ("cuda-emu", "triton-interp"):  # both kernels take FlashInfer's CSR addressing
            self.assertEqual(by_name[own]["capabilities"]["addressings"], ["slot_mapping", "csr"])

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

    def test_bad_cuda_switches_exit_2_even_without_a_gpu(self):
        # KVFUZZ_CUDA_SYNC and KVFUZZ_CUDA_PIN (docs/targets.md, "cuda") are read when the target is
        # opened: a bad value is bad input (2), before the device probe (3 on a machine without one).
        for name, value, expected in (("KVFUZZ_CUDA_SYNC", "sometimes", "expected auto, spin, yield or blocking"),
                                      ("KVFUZZ_CUDA_PIN", "yes", "neither 0 nor 1")):
            env = dict(os.environ, **{name: value})
            p = kvfuzz("run", "--target", "cuda", "--cases", 1, env=env)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("$" + name + ": \"" + value + "\"", p.stderr)
            self.assertIn(expected, p.stderr)
            self.assertEqual(kvfuzz("targets", env=env).returncode, 0)  # listing targets opens none


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

    def test_corpus_covers_every_serving_convention(self):
        modes = set()
        for f in CORPUS.glob("**/*.json"):
            s = json.loads(f.read_text()).get("serving", {})
            modes |= {("padding", s["padding"])} if "padding" in s else set()
            modes |= {("addressing", s["addressing"])} if "addressing" in s else set()
            modes |= {("window", s["window"]["input"])} if "window" in s else set()
            modes |= {("context_parallel", s["context_parallel"]["input"])} if "context_parallel" in s else set()
        self.assertLessEqual({("padding", "sink"), ("addressing", "csr"), ("window", "positions"),
                              ("context_parallel", "slot_mapping"), ("context_parallel", "positions")}, modes)

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
            # Default: the kernel gives no finding, so the case passes; the file records no target, so
            # that pass is no verdict on the kernel it was found on: not "fixed".
            p = kvfuzz("replay", f)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn(f"kvfuzz: {f} (recorded fail:cross_request_write) passes now on cuda-emu; the file does "
                          "not record the target", p.stdout)
            self.assertNotIn("kvfuzz: fixed", p.stdout)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")
            # A target named with --target: the recorded failure is fixed on it.
            p = kvfuzz("replay", f, "--target", "cuda-emu")
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn(f"kvfuzz: fixed: {f} (recorded fail:cross_request_write) passes now on cuda-emu", p.stdout)


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


def a_corpus_case():
    return sorted(CORPUS.glob("*.json"))[0]


def expecting_a_failure(d):
    """A corpus case that records cross_request_write: it passes, so `replay --expect-saved` reports it (exit 1)."""
    case = json.loads(a_corpus_case().read_text())
    case["expect"] = {"outcome": "fail", "finding_kind": "cross_request_write"}
    f = pathlib.Path(d) / "expects-a-failure.json"
    f.write_text(json.dumps(case))
    return f


class SecondsAlone(unittest.TestCase):
    def test_seconds_without_cases_runs_for_that_long(self):
        # The smoke profile checks 1000 cases in well under a second: a run capped by the default
        # --cases 1000 would end long before 3 s.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--config", CONFIGS / "smoke.json", "--seconds", 3, "--seed", 1, "--json", summary,
                       "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("no case limit, at most 3", p.stderr)
            s = json.loads(summary.read_text())
            self.assertGreaterEqual(s["seconds"], 2.9)
            self.assertGreater(s["cases"], 1000)
            self.assertFalse(s["interrupted"])
            self.assertEqual(last_line(p.stdout), f"kvfuzz: {s['cases']} passed, 0 failed")

    def test_cases_still_bounds_a_run_with_seconds(self):
        p = kvfuzz("run", "--config", CONFIGS / "smoke.json", "--seconds", 60, "--cases", 50, "--seed", 1, "--json", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["cases"], 50)


class MachineOutputOnStdout(unittest.TestCase):
    """`--json -`, `--junit -`, `--summary-md -`: stdout is that output alone; people read stderr."""

    def check_closing_line_last_on_stderr(self, p, passed, failed):
        self.assertEqual(last_line(p.stderr), f"kvfuzz: {passed} passed, {failed} failed")
        self.assertNotIn("kvfuzz: ", p.stdout.replace(f"kvfuzz: {passed} passed, {failed} failed", ""))

    def test_run_json_to_stdout_parses(self):
        p = kvfuzz("run", "--cases", 20, "--seed", 3, "--json", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = json.loads(p.stdout)  # the whole of stdout
        self.assertEqual((s["schema"], s["cases"]), ("kvfuzz-summary", 20))
        self.assertIn("kvfuzz: 20 cases in", p.stderr)
        self.check_closing_line_last_on_stderr(p, 20, 0)

    def test_run_junit_to_stdout_parses(self):
        p = kvfuzz("run", "--cases", 20, "--seed", 3, "--junit", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(ET.fromstring(p.stdout).tag, "testsuites")
        self.check_closing_line_last_on_stderr(p, 20, 0)

    def test_summary_md_to_stdout_is_the_markdown_alone(self):
        p = kvfuzz("run", "--cases", 20, "--seed", 3, "--summary-md", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("## kvfuzz run on `cuda-emu`"), p.stdout)
        self.assertNotIn("cases in", p.stdout)
        self.assertEqual(last_line(p.stderr), "kvfuzz: 20 passed, 0 failed")

    def test_replay_failures_go_to_stderr_and_the_json_to_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            f = expecting_a_failure(d)
            p = kvfuzz("replay", f, a_corpus_case(), "--expect-saved", "--json", "-")
            self.assertEqual(p.returncode, 1, p.stderr)
            s = json.loads(p.stdout)
            self.assertEqual((s["passed"], s["failed"], s["exit_code"]), (1, 1, 1))
            self.assertIn("expected fail:cross_request_write, got pass", p.stderr)
            self.assertIn("reproduce: ", p.stderr)
            self.check_closing_line_last_on_stderr(p, 1, 1)

    @unittest.skipUnless(MUTANT_BIN and pathlib.Path(MUTANT_BIN).is_file(), "needs a mutant binary ($KVFUZZ_MUTANT_BIN)")
    def test_a_failing_run_prints_its_failures_to_stderr_and_only_the_json_to_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([MUTANT_BIN, "run", "--cases", "2000", "--seed", "1", "--corpus-out", str(pathlib.Path(d) / "f"),
                                "--json", "-"], capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 1, p.stderr)
            s = json.loads(p.stdout)
            self.assertEqual((s["failed"], s["exit_code"]), (1, 1))
            case = s["failures"][0]["file"]
            self.assertIn("kvfuzz: FAIL case #", p.stderr)
            self.assertIn(f"saved: {case}", p.stderr)
            self.assertIn(f"report of {case}", p.stderr)
            self.check_closing_line_last_on_stderr(p, s["passed"], 1)

    @unittest.skipUnless(shutil.which("cc"), "needs a C compiler for the noisy plugin")
    def test_a_plugin_printing_to_stdout_cannot_get_into_the_json(self):
        # naive.c with a printf in its append: the worker's stdout is kvfuzz's stderr.
        with tempfile.TemporaryDirectory() as d:
            src = (SRC / "examples" / "plugins" / "naive" / "naive.c").read_text()
            head = "int kvfuzz_plugin_append(const kvfz_append_args* a, char* error, size_t error_size) {"
            self.assertIn(head, src)
            noisy = pathlib.Path(d) / "noisy.c"
            noisy.write_text(src.replace(head, head + '\n  printf("plugin noise on stdout\\n");\n  fflush(stdout);'))
            so = pathlib.Path(d) / "noisy.so"
            subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-I", str(SRC / "include"), "-o", str(so), str(noisy)], check=True)
            p = kvfuzz("replay", CORPUS, "--target", f"plugin:{so}", "--json", "-")
            self.assertEqual(p.returncode, 0, p.stderr)
            s = json.loads(p.stdout)
            self.assertGreater(s["passed"], 0)
            self.assertIn("plugin noise on stdout", p.stderr)
            self.check_closing_line_last_on_stderr(p, s["passed"], 0)

    def test_two_outputs_on_stdout_are_refused(self):
        p = kvfuzz("replay", a_corpus_case(), "--json", "-", "--junit", "-")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--json and --junit both name stdout", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_without_stdout_outputs_results_stay_on_stdout(self):
        p = kvfuzz("replay", a_corpus_case())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")


class SummaryMarkdownAppends(unittest.TestCase):
    def test_each_command_adds_its_summary_and_keeps_what_was_there(self):
        with tempfile.TemporaryDirectory() as d:
            md = pathlib.Path(d) / "step-summary.md"
            md.write_text("# CI job\n\nearlier step\n")
            self.assertEqual(kvfuzz("replay", a_corpus_case(), "--summary-md", md).returncode, 0)
            self.assertEqual(kvfuzz("run", "--cases", 5, "--seed", 2, "--summary-md", md,
                                    "--corpus-out", pathlib.Path(d) / "found").returncode, 0)
            text = md.read_text()
            self.assertTrue(text.startswith("# CI job\n\nearlier step\n## kvfuzz replay on"), text)
            self.assertEqual(text.count("## kvfuzz replay on"), 1)
            self.assertEqual(text.count("## kvfuzz run on"), 1)
            self.assertEqual(last_line(text), "kvfuzz: 5 passed, 0 failed")

    def test_an_input_is_still_never_written(self):
        with tempfile.TemporaryDirectory() as d:
            case = pathlib.Path(d) / "c.json"
            shutil.copy(a_corpus_case(), case)
            before = case.read_bytes()
            p = kvfuzz("replay", case, "--summary-md", case)
            self.assertEqual(p.returncode, 2)
            self.assertEqual(case.read_bytes(), before)


class StableJUnit(unittest.TestCase):
    def junit_testcases(self, junit):
        suite = ET.parse(junit).getroot().find("testsuite")
        return suite, [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]

    def test_campaign_test_names_do_not_change_with_seed_or_case_count(self):
        with tempfile.TemporaryDirectory() as d:
            names = []
            for seed, cases in ((3, 20), (4, 7)):
                junit = pathlib.Path(d) / f"j{seed}.xml"
                p = kvfuzz("run", "--cases", cases, "--seed", seed, "--junit", junit, "--corpus-out", pathlib.Path(d) / "f")
                self.assertEqual(p.returncode, 0, p.stderr)
                suite, cs = self.junit_testcases(junit)
                props = {x.get("name"): x.get("value") for x in suite.find("properties")}
                self.assertEqual((props["seed"], props["cases"]), (str(seed), str(cases)))
                names.append(cs)
            self.assertEqual(names[0], names[1])
            self.assertEqual(names[0], [("kvfuzz.run.cuda-emu", "campaign, profile default")])

    @unittest.skipUnless((PLUGIN_DIR / "naive.so").is_file(), "needs build/plugins/naive.so ($KVFUZZ_PLUGIN_DIR)")
    def test_replay_lists_files_outside_the_capabilities_as_skipped(self):
        # naive.so does not support packed_kv_nhd: the corpus's packed cases are skipped, each a testcase.
        files = sorted(CORPUS.glob("**/*.json"))
        packed = [f for f in files if json.loads(f.read_text())["cache"]["layout"] == "packed_kv_nhd"]
        self.assertTrue(packed)
        with tempfile.TemporaryDirectory() as d:
            junit = pathlib.Path(d) / "j.xml"
            p = kvfuzz("replay", CORPUS, "--target", f"plugin:{PLUGIN_DIR / 'naive.so'}", "--junit", junit,
                       "--json", pathlib.Path(d) / "s.json")
            self.assertIn(p.returncode, (0, 1), p.stderr)
            s = json.loads((pathlib.Path(d) / "s.json").read_text())
            suite = ET.parse(junit).getroot().find("testsuite")
            skipped = [c for c in suite.findall("testcase") if c.find("skipped") is not None]
            self.assertEqual(len(skipped), s["skipped"]["cases"])
            self.assertEqual(suite.get("skipped"), str(len(skipped)))
            self.assertEqual(suite.get("tests"), str(len(s["items"]) + len(skipped)))
            skipped_names = {c.get("name") for c in skipped}
            self.assertLessEqual({str(f) for f in packed}, skipped_names)
            for c in skipped:
                self.assertIn("outside the target's capabilities: ", c.find("skipped").get("message"))
            self.assertEqual({f["file"] for f in s["skipped"]["files"]}, skipped_names)


class OutOfRangeArguments(unittest.TestCase):
    """Refused with exit 2 and a message naming the option and echoing the value; never clamped."""

    def refused(self, *args, mention=None):
        p = kvfuzz(*args, timeout=60)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertNotIn("passed", p.stdout + p.stderr, "nothing may run")
        for bad in ("1.79769", "179769313", "DBL_MAX", "inf not in range"):
            self.assertNotIn(bad, p.stderr)
        if mention:
            self.assertIn(mention, p.stderr)
        return p

    def test_seeds(self):
        self.refused("run", "--cases", 1, "--seed", "18446744073709551616", mention="18446744073709551615")
        self.refused("run", "--cases", 1, "--seed", "-1", mention="--seed")
        self.refused("generate", "--seed", "-1", "--cases", 1, "-o", "/tmp/kvfuzz-never-written", mention="--seed")
        self.assertFalse(pathlib.Path("/tmp/kvfuzz-never-written").exists())

    def test_largest_seed_is_accepted(self):
        p = kvfuzz("run", "--cases", 1, "--seed", "18446744073709551615", "--json", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["seed"], "18446744073709551615")

    def test_seconds(self):
        for v in ("nan", "inf", "-inf", "-1", "1e400", "three"):
            with self.subTest(v=v):
                self.refused("run", "--seconds", v, mention="--seconds")

    def test_timeouts(self):
        p = self.refused("run", "--cases", 1, "--timeout", "1e-9", mention="0.001")
        self.assertIn("--timeout", p.stderr)
        self.refused("run", "--cases", 1, "--timeout", "nan", mention="--timeout")
        self.refused("replay", a_corpus_case(), "--timeout", "0", mention="--timeout")
        self.refused("run", "--cases", 1, "--worker-start-timeout", "nan", mention="--worker-start-timeout")

    def test_counts(self):
        self.refused("run", "--cases", "-5", mention="-5")
        self.refused("run", "--cases", "1.5", mention="--cases")
        self.refused("run", "-j", "0", mention="from 1 to 256")
        self.refused("run", "--cases", 1, "--device", "-1", mention="--device")
        self.refused("compare", "--against", "golden", "--cases", "0", mention="--cases")

    def test_smallest_timeout_is_accepted(self):
        with tempfile.TemporaryDirectory() as d:
            p = kvfuzz("run", "--cases", 1, "--seed", 1, "--timeout", "0.001", "--config", CONFIGS / "smoke.json",
                       "--corpus-out", pathlib.Path(d) / "found", "--max-shrink-tries", 0, "--confirm-runs", 0)
            self.assertIn(p.returncode, (0, 1), p.stderr)  # a 1 ms launch may time out: a finding, not a usage error


class UnknownCommand(unittest.TestCase):
    def test_suggests_the_nearest_command(self):
        for typed, meant in (("rn", "run"), ("replya", "replay"), ("selftets", "selftest"), ("targt", "targets")):
            with self.subTest(typed=typed):
                p = kvfuzz(typed)
                self.assertEqual(p.returncode, 2)
                self.assertIn(f"unknown command {typed}; did you mean {meant}?", p.stderr)

    def test_without_a_near_one_lists_the_commands(self):
        p = kvfuzz("xyzzyplugh")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown command xyzzyplugh; the commands are run, replay", p.stderr)
        self.assertNotIn("did you mean", p.stderr)


class OutputsInACorpusFolder(unittest.TestCase):
    """A summary written into a corpus folder never replaces a case and does not break the next replay."""

    def corpus_copy(self, d):
        corpus = pathlib.Path(d) / "corpus"
        corpus.mkdir()
        for f in sorted(CORPUS.glob("*.json"))[:3]:
            shutil.copy(f, corpus / f.name)
        return corpus

    def test_json_never_writes_over_a_case_file(self):
        with tempfile.TemporaryDirectory() as d:
            corpus = self.corpus_copy(d)
            keep = corpus / "keep.json"
            shutil.copy(a_corpus_case(), keep)
            before = keep.read_bytes()
            for opt in ("--json", "--junit", "--summary-md"):
                with self.subTest(opt=opt):
                    p = kvfuzz("replay", corpus, opt, keep)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("is a kvfuzz case file", p.stderr)
                    self.assertEqual(keep.read_bytes(), before)
            p = kvfuzz("run", "--cases", 1, "--json", keep)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertEqual(keep.read_bytes(), before)

    def test_a_summary_in_the_folder_is_skipped_with_a_note(self):
        with tempfile.TemporaryDirectory() as d:
            corpus = self.corpus_copy(d)
            summary = corpus / "keep.json"
            for _ in range(2):  # the second replay reads the folder with the first one's outputs in it
                p = kvfuzz("replay", corpus, "--json", summary, "--junit", corpus / "j.xml", "--summary-md", corpus / "s.md")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertEqual(last_line(p.stdout), "kvfuzz: 3 passed, 0 failed")
            self.assertIn(f"kvfuzz: note: {summary} is not a case file (schema kvfuzz-summary), not replayed", p.stdout)
            s = json.loads(summary.read_text())
            self.assertEqual(s["not_cases"], [{"file": str(summary), "reason": "schema kvfuzz-summary"}])
            self.assertEqual(len(s["items"]), 3)

    def test_bad_case_files_are_still_refused(self):
        # Files that claim to be cases, or name no schema, are read as cases: a bad one stops the replay.
        good = json.loads(a_corpus_case().read_text())
        no_schema = dict(good)
        no_schema.pop("schema")
        broken_case = dict(good, shape="eight")
        for name, content in (("no-schema.json", json.dumps(no_schema)), ("broken.json", json.dumps(broken_case)),
                              ("not-json.json", "{"), ("array.json", "[1, 2]"),
                              ("schema-not-a-string.json", json.dumps(dict(good, schema=7)))):
            with self.subTest(name=name), tempfile.TemporaryDirectory() as d:
                corpus = self.corpus_copy(d)
                (corpus / name).write_text(content)
                p = kvfuzz("replay", corpus)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(name, p.stderr)

    def test_a_summary_named_explicitly_is_refused_as_a_case(self):
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            self.assertEqual(kvfuzz("replay", a_corpus_case(), "--json", summary).returncode, 0)
            p = kvfuzz("replay", summary)
            self.assertEqual(p.returncode, 2)
            self.assertIn("kvfuzz-summary", p.stderr)


if __name__ == "__main__":
    unittest.main()
