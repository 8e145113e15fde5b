"""End-to-end tests of kvfuzz's reports and CI outputs (run by ctest as e2e.reports).

`kvfuzz report CASE` (report.json, report.md, report.html), `--junit` and `--summary-md` on run and
replay, reports written next to the cases `run` saves, and the committed examples in
reports/examples/. Failing runs need a mutant binary ($KVFUZZ_MUTANT_BIN, built by
tests/mutants as kvfuzz-mutant-padding-not-skipped); those tests are skipped without it.
"""
import json
import shlex
import os
import pathlib
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
MUTANT_BIN = os.environ.get("KVFUZZ_MUTANT_BIN", "")  # kvfuzz-mutant-padding-not-skipped
MUTANT_DIR = os.environ.get("KVFUZZ_MUTANT_DIR", "")  # where kvfuzz-mutant-<name> binaries live
SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CORPUS = SRC / "corpus"
EXAMPLES = SRC / "reports" / "examples"


def run(binary, *args, timeout=600, **kw):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def kvfuzz(*args, **kw):
    return run(BIN, *args, **kw)


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def a_corpus_case():
    return sorted(CORPUS.glob("*.json"))[0]


class ReportCommand(unittest.TestCase):
    def test_report_of_a_passing_case_writes_three_files(self):
        with tempfile.TemporaryDirectory() as d:
            p = kvfuzz("report", a_corpus_case(), "-o", d, "--target", "cuda-emu")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")
            out = pathlib.Path(d)
            self.assertEqual(sorted(f.name for f in out.iterdir()), ["report.html", "report.json", "report.md"])
            j = json.loads((out / "report.json").read_text())
            self.assertEqual((j["schema"], j["version"], j["outcome"], j["target"]), ("kvfuzz-report", 1, "pass", "cuda-emu"))
            self.assertEqual(j["findings"], [])
            self.assertIn("kvfuzz replay", j["reproduce"]["replay"])
            html = (out / "report.html").read_text()
            self.assertTrue(html.startswith("<!DOCTYPE html>"))
            for external in ('src="http', "href=\"http", "@import", "<link", "url(http"):
                self.assertNotIn(external, html, "the report must be self-contained")
            self.assertIn('class="cache-map"', html)
            self.assertIn("PASS", (out / "report.md").read_text())

    def test_default_directory_is_next_to_the_case_and_replay_skips_it(self):
        with tempfile.TemporaryDirectory() as d:
            case = pathlib.Path(d) / "c.json"
            shutil.copy(a_corpus_case(), case)
            p = kvfuzz("report", case)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue((pathlib.Path(d) / "c.report" / "report.html").is_file())
            # The report's JSON is not a case: replaying the directory still finds exactly one case.
            p = kvfuzz("replay", d)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")

    def test_bad_case_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as d:
            bad = pathlib.Path(d) / "bad.json"
            bad.write_text("{}")
            p = kvfuzz("report", bad, "-o", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("bad.json", p.stderr)
            p = kvfuzz("report", pathlib.Path(d) / "missing.json")
            self.assertEqual(p.returncode, 2)


class CiOutputs(unittest.TestCase):
    def test_replay_writes_junit_and_a_markdown_summary(self):
        files = sorted(CORPUS.glob("*.json"))
        with tempfile.TemporaryDirectory() as d:
            junit, md = pathlib.Path(d) / "j.xml", pathlib.Path(d) / "s.md"
            p = kvfuzz("replay", CORPUS, "--junit", junit, "--summary-md", md)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            root = ET.parse(junit).getroot()
            self.assertEqual(root.tag, "testsuites")
            suites = root.findall("testsuite")
            self.assertEqual([s.get("name") for s in suites], ["cuda-emu"])
            cases = suites[0].findall("testcase")
            self.assertEqual(len(cases), len(files))
            self.assertEqual(suites[0].get("tests"), str(len(files)))
            self.assertEqual((suites[0].get("failures"), suites[0].get("errors")), ("0", "0"))
            self.assertFalse(any(c.find("failure") is not None for c in cases))
            text = md.read_text()
            self.assertIn("kvfuzz replay", text)
            self.assertEqual(last_line(text), f"kvfuzz: {len(files)} passed, 0 failed")

    def test_clean_run_writes_a_passing_testcase(self):
        with tempfile.TemporaryDirectory() as d:
            junit, md = pathlib.Path(d) / "j.xml", pathlib.Path(d) / "s.md"
            p = kvfuzz("run", "--cases", 20, "--seed", 3, "--junit", junit, "--summary-md", md,
                       "--corpus-out", pathlib.Path(d) / "found")
            self.assertEqual(p.returncode, 0, p.stderr)
            suite = ET.parse(junit).getroot().find("testsuite")
            self.assertEqual(suite.get("name"), "cuda-emu")
            props = {x.get("name"): x.get("value") for x in suite.find("properties")}
            self.assertEqual(props["seed"], "3")
            case = suite.find("testcase")
            self.assertEqual(case.get("name"), "campaign, profile default")  # stable: the seed is a property
            self.assertIsNone(case.find("failure"))
            self.assertIn("✅", md.read_text())

    def test_junit_to_stdout_is_alone_there_and_the_closing_line_ends_stderr(self):
        p = kvfuzz("replay", a_corpus_case(), "--junit", "-")
        self.assertEqual(p.returncode, 0)
        self.assertEqual(ET.fromstring(p.stdout).tag, "testsuites")
        self.assertEqual(last_line(p.stderr), "kvfuzz: 1 passed, 0 failed")


@unittest.skipUnless(MUTANT_BIN and pathlib.Path(MUTANT_BIN).is_file(), "needs a mutant binary ($KVFUZZ_MUTANT_BIN)")
class FailingRun(unittest.TestCase):
    """A mutant kernel (padding rows written) makes `run` fail: reports, JUnit, summary."""

    def test_run_writes_reports_next_to_failures_and_ci_outputs(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            found, junit, md = d / "found", d / "j.xml", d / "s.md"
            p = run(MUTANT_BIN, "run", "--cases", 2000, "--seed", 1, "--corpus-out", found, "--junit", junit,
                    "--summary-md", md)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            cases = sorted(found.glob("*.json"))
            self.assertEqual(len(cases), 1)
            report = found / (cases[0].stem + ".report")
            self.assertIn(f"report of {cases[0]}: {report / 'report.html'}", p.stdout)
            j = json.loads((report / "report.json").read_text())
            self.assertEqual(j["outcome"], "fail")
            saved = json.loads(cases[0].read_text())
            self.assertEqual(j["first_kind"], saved["expect"]["finding_kind"])
            # The reproduction runs the binary as it was invoked (here the mutant, by its path).
            self.assertEqual(shlex.split(j["reproduce"]["replay"])[:2], [str(MUTANT_BIN), "replay"])
            html = (report / "report.html").read_text()
            self.assertIn(j["findings"][0]["kind"], html)

            suite = ET.parse(junit).getroot().find("testsuite")
            self.assertEqual((suite.get("tests"), suite.get("failures")), ("1", "1"))
            failure = suite.find("testcase").find("failure")
            self.assertEqual(failure.get("type"), j["first_kind"])
            self.assertIn(j["findings"][0]["sentence"], failure.get("message"))
            self.assertIn(f"reproduce: {MUTANT_BIN} replay {cases[0]}", failure.text)
            self.assertIn(str(report / "report.html"), failure.text)

            text = md.read_text()
            self.assertIn(j["findings"][0]["kind"], text)
            self.assertIn(str(report / "report.html"), text)
            self.assertRegex(last_line(text), r"^kvfuzz: \d+ passed, 1 failed$")

            # Replaying the findings directory skips the report; on the mutant the finding reproduces:
            # the replay fails (exit 1) as a JUnit <failure>, and --expect-saved meets the record.
            p = run(MUTANT_BIN, "replay", found, "--junit", junit, "--summary-md", md)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 0 passed, 1 failed")
            failure = ET.parse(junit).getroot().find("testsuite").find("testcase").find("failure")
            self.assertIn("got fail:", failure.get("message"))
            self.assertIn("❌", md.read_text())
            p = run(MUTANT_BIN, "replay", found, "--expect-saved", "--junit", junit)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")
            self.assertEqual(len(ET.parse(junit).getroot().find("testsuite").findall("testcase")), 1)

            # The clean kernel passes it: the bug is fixed, the regression suite is green.
            p = kvfuzz("replay", found, "--junit", junit)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 1 passed, 0 failed")

    def test_report_of_a_failing_case_marks_cells_and_exits_1(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            p = run(MUTANT_BIN, "run", "--cases", 2000, "--seed", 1, "--corpus-out", d / "found")
            self.assertEqual(p.returncode, 1)
            case = sorted((d / "found").glob("*.json"))[0]
            p = run(MUTANT_BIN, "report", case, "-o", d / "r")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 0 passed, 1 failed")
            j = json.loads((d / "r" / "report.json").read_text())
            self.assertGreater(j["differing_cells"], 0)
            self.assertTrue(j["findings"][0]["sentence"])


class Examples(unittest.TestCase):
    """reports/examples/: at least three mutants' reports, each consistent with its case."""

    def examples(self):
        return sorted(p for p in EXAMPLES.iterdir() if p.is_dir()) if EXAMPLES.is_dir() else []

    def test_examples_cover_the_three_kinds(self):
        kinds = set()
        for ex in self.examples():
            for name in ("case.json", "report.json", "report.md", "report.html"):
                self.assertTrue((ex / name).is_file(), ex / name)
            j = json.loads((ex / "report.json").read_text())
            case = json.loads((ex / "case.json").read_text())
            self.assertEqual(j["outcome"], "fail")
            self.assertEqual(j["first_kind"], case["expect"]["finding_kind"])
            kinds.add(j["first_kind"])
        self.assertTrue({"cross_request_write", "padding_leak", "oob_write"} <= kinds, kinds)

    @unittest.skipUnless(MUTANT_DIR and pathlib.Path(MUTANT_DIR).is_dir(), "needs the mutant binaries ($KVFUZZ_MUTANT_DIR)")
    def test_examples_are_current(self):
        """Regenerating each report from its case gives the same findings (else run scripts/regen-report-examples.sh)."""
        for ex in self.examples():
            committed = json.loads((ex / "report.json").read_text())
            program = committed["reproduce"]["replay"].split()[0]
            binary = pathlib.Path(MUTANT_DIR) / program
            if not binary.is_file():
                continue
            with tempfile.TemporaryDirectory() as d:
                p = run(binary, "report", ex / "case.json", "-o", d)
                self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                fresh = json.loads((pathlib.Path(d) / "report.json").read_text())
            with self.subTest(example=ex.name):
                self.assertEqual([f["sentence"] for f in fresh["findings"]], [f["sentence"] for f in committed["findings"]],
                                 "stale example: run scripts/regen-report-examples.sh")


if __name__ == "__main__":
    unittest.main()
