"""The fault suite (issue 18; run by ctest as e2e.faults): no spurious finding under load, faults
survived, nothing lost. Every random choice comes from a printed, fixed seed, so a failure replays.

    KVFUZZ_BIN=build/kvfuzz KVFUZZ_MUTANT_BIN=build/tests/mutants/kvfuzz-mutant-padding-not-skipped \\
    KVFUZZ_PLUGIN_DIR=build/plugins KVFUZZ_ENOSPC_SHIM=build/tests/e2e/kvfuzz-test-enospc.so \\
        python3 -m unittest -v test_faults          # from tests/e2e

- Load: concurrent campaigns x -j threads on this (2-core) machine, and a plugin whose library takes
  longer to load than the launch timeout: no finding.
- Workers: SIGKILL of workers at seeded moments mid-campaign is an infrastructure event, retried on a
  fresh worker, never a `crash`; a death that repeats is one.
- Disk: a full disk while saving a finding: the finding is reported, the case printed, no partial
  file, exit 3. A read-only corpus folder is refused before any case runs (exit 2).
- Signals: SIGINT and SIGTERM while shrinking and while writing reports: summary written, every saved
  case and report whole, exit codes of docs/exit-codes.md.
- Leaks: a plugin leaking memory or threads gets its worker recycled; never a finding.
"""
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
MUTANT = os.environ.get("KVFUZZ_MUTANT_BIN", "kvfuzz-mutant-padding-not-skipped")
PLUGINS = pathlib.Path(os.environ.get("KVFUZZ_PLUGIN_DIR", "build/plugins"))
SHIM = os.environ.get("KVFUZZ_ENOSPC_SHIM", "")
ENV = dict(os.environ, CI="1")  # plain progress lines
SEED = int(os.environ.get("KVFUZZ_FAULT_SEED", "18"))
SUMMARY = re.compile(r"^kvfuzz: (\d+) passed, (\d+) failed$")


def plugin(name):
    return f"plugin:{PLUGINS / ('broken-' + name + '.so')}"


def run(binary, *args, env=None, timeout=600, **kw):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env or ENV, **kw)


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def counts(stdout):
    m = SUMMARY.match(last_line(stdout))
    assert m, f"no summary line at the end of:\n{stdout}"
    return int(m.group(1)), int(m.group(2))


def case_files(d):
    return sorted(p for p in pathlib.Path(d).rglob("*.json") if ".report" not in str(p.parent))


def age_seconds(pid):
    """Seconds since process `pid` started (from /proc), or 0 if it is gone."""
    try:
        start = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(pathlib.Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0
    return uptime - start / os.sysconf("SC_CLK_TCK")


def children(pid):
    """Direct children of a process (the campaign's worker processes)."""
    kids = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


class Load(unittest.TestCase):
    def test_concurrent_campaigns_with_threads_give_no_spurious_finding(self):
        # 4 campaigns x 3 threads on 2 cores, with a launch timeout of 2 s (a case takes milliseconds
        # alone): the machine is oversubscribed 6 times, and nothing may be a finding.
        with tempfile.TemporaryDirectory() as d:
            procs = []
            for k in range(4):
                out = pathlib.Path(d) / f"c{k}"
                procs.append((out, subprocess.Popen(
                    [BIN, "run", "--target", "cuda-emu", "--cases", "700", "--seed", str(SEED + k), "-j", "3",
                     "--timeout", "2", "--corpus-out", str(out), "--json", str(pathlib.Path(d) / f"c{k}.json")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)))
            for out, p in procs:
                stdout, stderr = p.communicate(timeout=600)
                self.assertEqual(p.returncode, 0, stdout + stderr)
                self.assertEqual(counts(stdout), (700, 0))
                self.assertEqual(case_files(out), [])

    def test_a_worker_slower_to_start_than_the_timeout_is_no_finding(self):
        # The plugin's library sleeps 1.5 s when loaded; launches may take 0.5 s. The load happens in
        # the worker's start-up (Target::start), which the launch timeout does not include.
        env = dict(ENV, KVFUZZ_TEST_START_DELAY_S="1.5")
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = run(BIN, "run", "--target", plugin("slow"), "--cases", 60, "--seed", SEED, "-j", 2,
                    "--timeout", 0.5, "--corpus-out", pathlib.Path(d) / "out", "--json", summary, env=env)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(counts(p.stdout), (60, 0))
            workers = json.loads(summary.read_text())["workers"]
            self.assertGreaterEqual(workers["slowest_start_seconds"], 1.5)
            self.assertGreaterEqual(workers["started"], 2)
            self.assertEqual(workers["failed_starts"], 0)

    def test_a_worker_that_never_starts_in_time_is_an_infrastructure_error(self):
        env = dict(ENV, KVFUZZ_TEST_START_DELAY_S="3")
        with tempfile.TemporaryDirectory() as d:
            p = run(BIN, "run", "--target", plugin("slow"), "--cases", 5, "--seed", SEED,
                    "--worker-start-timeout", 0.4, "--corpus-out", pathlib.Path(d) / "out", env=env)
            self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
            self.assertIn("could be started (3 tries)", p.stderr)
            self.assertEqual(case_files(pathlib.Path(d) / "out"), [])


class KilledWorkers(unittest.TestCase):
    def test_workers_killed_mid_case_are_retried_and_never_a_finding(self):
        rng = random.Random(SEED)
        with tempfile.TemporaryDirectory() as d:
            out, summary = pathlib.Path(d) / "out", pathlib.Path(d) / "s.json"
            # A right kernel that takes 20 ms a launch: most kills land mid-launch, some between cases.
            env = dict(ENV, KVFUZZ_TEST_APPEND_DELAY_S="0.02")
            proc = subprocess.Popen([BIN, "run", "--target", plugin("slow"), "--cases", "1000", "--seed", str(SEED), "-j", "2",
                                     "--corpus-out", str(out), "--json", str(summary)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            kills = 0
            time.sleep(0.3)
            while proc.poll() is None and kills < 25:
                # Only workers older than a second: never the fresh worker a killed case is re-run on,
                # so no case can die twice (that would be a crash finding, rightly).
                workers = [w for w in children(proc.pid) if age_seconds(w) > 1.0]
                if workers:
                    try:
                        os.kill(rng.choice(workers), signal.SIGKILL)
                        kills += 1
                    except ProcessLookupError:
                        pass
                time.sleep(rng.uniform(0.1, 0.3))
            stdout, stderr = proc.communicate(timeout=600)
            self.assertGreater(kills, 3, "the campaign ended before the kills (make it longer)")
            self.assertEqual(proc.returncode, 0, f"seed {SEED}, {kills} kills\n" + stdout + stderr)
            self.assertEqual(counts(stdout), (1000, 0))
            w = json.loads(summary.read_text())["workers"]
            replaced = w["deaths_retried"] + w["failed_starts"]  # mid-case, or between two cases
            self.assertGreaterEqual(replaced, 1, w)
            self.assertLessEqual(replaced, kills, w)
            self.assertGreaterEqual(w["deaths_retried"], 1, w)
            print(f"{kills} kills: {w}")
            self.assertEqual(case_files(out), [])
            self.assertIn("died mid-case and passed on a fresh worker", stdout)

    def test_a_death_that_repeats_on_a_fresh_worker_is_a_crash(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(BIN, "run", "--target", plugin("crash-on-head-dim-7"), "--cases", 3000, "--seed", SEED,
                    "--corpus-out", pathlib.Path(d) / "out")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("-> crash", p.stdout)
            self.assertIn("every one of 2 tries, each on a fresh worker, died or hung", p.stdout)


class Disk(unittest.TestCase):
    def test_a_full_disk_while_saving_a_finding_reports_it_and_leaves_no_partial_file(self):
        if not SHIM or not os.path.exists(SHIM):
            self.skipTest("KVFUZZ_ENOSPC_SHIM not built")
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "findings"
            out.mkdir()
            env = dict(ENV, LD_PRELOAD=SHIM, KVFUZZ_TEST_ENOSPC_DIR=str(out))
            p = run(MUTANT, "run", "--cases", 500, "--seed", SEED, "--corpus-out", out, env=env)
            self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
            self.assertIn("kvfuzz: FAIL case #", p.stdout)
            self.assertIn("NOT SAVED", p.stdout)
            self.assertIn("No space left on device", p.stdout)
            self.assertEqual(counts(p.stdout)[1], 1)
            # The unsaved case is on stderr, whole: it can be saved by hand and replays.
            lines = p.stderr.splitlines()
            i = lines.index("kvfuzz: the unsaved case follows")
            case = json.loads(lines[i + 1])
            self.assertEqual(case["schema"], "kvfuzz-case")
            self.assertEqual(list(out.iterdir()), [])  # no partial file, no temporary file
            saved = pathlib.Path(d) / "by-hand.json"
            saved.write_text(lines[i + 1])
            r = run(MUTANT, "replay", saved)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # the finding reproduces on the mutant

    def test_a_read_only_corpus_folder_is_refused_before_any_case_runs(self):
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            self.skipTest("needs root and setpriv to run kvfuzz as an unprivileged user")
        d = tempfile.mkdtemp()
        try:
            os.chmod(d, 0o755)
            binary = pathlib.Path(d) / "kvfuzz"
            shutil.copy(BIN, binary)
            ro = pathlib.Path(d) / "corpus"
            ro.mkdir(mode=0o555)
            os.chmod(ro, 0o555)
            as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(binary)]
            for target_dir, option in ((ro, "--corpus-out"), (ro / "new" / "sub", "--corpus-out")):
                p = subprocess.run([*as_nobody, "run", "--cases", "20", "--seed", str(SEED), option, str(target_dir)],
                                   capture_output=True, text=True, timeout=120, env=ENV)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(str(target_dir), p.stderr)
                self.assertIn("not writable", p.stderr)
                self.assertNotIn("passed", p.stdout)  # refused before any case ran
            p = subprocess.run([*as_nobody, "run", "--cases", "20", "--seed", str(SEED), "--corpus-out", str(pathlib.Path(d) / "ok"),
                                "--json", str(ro / "summary.json")], capture_output=True, text=True, timeout=120, env=ENV)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("--json", p.stderr)
            self.assertEqual(list(ro.iterdir()), [])
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Signals(unittest.TestCase):
    """SIGINT and SIGTERM at the phases where something is being made: a shrink, the reports."""

    def slow_campaign(self, out, delay, *extra):
        env = dict(ENV, KVFUZZ_TEST_APPEND_DELAY_S=str(delay))
        return subprocess.Popen([BIN, "run", "--target", plugin("slow-and-wrong"), "--seed", str(SEED), "--corpus-out", str(out),
                                 *map(str, extra)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def assert_whole(self, out):
        for f in case_files(out):
            self.assertEqual(json.loads(f.read_text())["schema"], "kvfuzz-case")
        for r in pathlib.Path(out).rglob("*.report"):
            self.assertEqual(sorted(x.name for x in r.iterdir()), ["report.html", "report.json", "report.md"])
            json.loads((r / "report.json").read_text())
        self.assertEqual(list(pathlib.Path(out).rglob("*.tmp.*")), [])

    def interrupt_while_shrinking(self, sig):
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "out"
            # Every case fails, each launch takes 0.1 s: the shrink of the first failure takes seconds.
            proc = self.slow_campaign(out, 0.1, "--cases", 50, "--confirm-runs", 0)
            for line in proc.stderr:
                if "NEW-FAIL" in line:
                    break
            time.sleep(0.25)
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 1, stdout + stderr)  # a finding outranks the interruption
            self.assertIn("interrupted", stdout)
            self.assertEqual(counts(stdout)[1], 1)
            files = case_files(out)
            self.assertEqual(len(files), 1)  # the best case the shrink had reached, saved whole
            self.assertIn(files[0].name, stdout)
            self.assert_whole(out)

    def test_sigint_while_shrinking(self):
        self.interrupt_while_shrinking(signal.SIGINT)

    def test_sigterm_while_shrinking(self):
        self.interrupt_while_shrinking(signal.SIGTERM)

    def interrupt_while_reporting(self, sig):
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "out"
            # 6 failures, each found and barely shrunk; each report re-runs its case (0.15 s).
            proc = self.slow_campaign(out, 0.15, "--cases", 6, "--keep-going", "--confirm-runs", 0, "--max-shrink-tries", 1)
            deadline = time.time() + 120
            while proc.poll() is None and not list(out.glob("*.report")) and time.time() < deadline:
                time.sleep(0.01)
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 1, stdout + stderr)
            self.assertEqual(last_line(stdout), "kvfuzz: 0 passed, 6 failed")
            files = case_files(out)
            reports = list(out.glob("*.report"))
            self.assertGreaterEqual(len(files), 2)
            self.assertLess(len(reports), len(files), "every report was written: the signal came too late")
            self.assertIn(f"interrupted; `{BIN} report", stderr)
            self.assert_whole(out)

    def test_sigint_while_writing_reports(self):
        self.interrupt_while_reporting(signal.SIGINT)

    def test_sigterm_while_writing_reports(self):
        self.interrupt_while_reporting(signal.SIGTERM)

    def test_an_interrupted_clean_campaign_exits_128_plus_the_signal(self):
        for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            with tempfile.TemporaryDirectory() as d:
                summary = pathlib.Path(d) / "s.json"
                proc = subprocess.Popen([BIN, "run", "--cases", "0", "--seed", str(SEED), "--corpus-out", str(pathlib.Path(d) / "o"),
                                         "--json", str(summary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
                for line in proc.stderr:
                    if "pulse" in line:
                        break
                proc.send_signal(sig)
                stdout, stderr = proc.communicate(timeout=120)
                self.assertEqual(proc.returncode, code, stdout + stderr)
                passed, failed = counts(stdout)
                self.assertGreater(passed, 0)
                self.assertEqual(failed, 0)
                s = json.loads(summary.read_text())
                self.assertTrue(s["interrupted"])
                self.assertEqual((s["stop_signal"], s["exit_code"]), (int(sig), code))


class Leaks(unittest.TestCase):
    def recycled(self, *limits):
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = run(BIN, "run", "--target", plugin("leaks"), "--cases", 60, "--seed", SEED, "--corpus-out", pathlib.Path(d) / "o",
                    "--json", summary, *limits)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(counts(p.stdout), (60, 0))
            self.assertIn("recycled over the", p.stdout)
            return json.loads(summary.read_text())["workers"]

    def test_a_plugin_leaking_memory_has_its_worker_recycled(self):
        # 8 MiB a call: past 96 MiB of private memory the worker is replaced, about every 10 cases.
        w = self.recycled("--worker-rss-limit-mib", 96, "--worker-threads-limit", 0)
        self.assertGreaterEqual(w["recycled_memory"], 3, w)
        self.assertEqual(w["recycled_threads"], 0, w)

    def test_a_plugin_leaking_threads_has_its_worker_recycled(self):
        w = self.recycled("--worker-rss-limit-mib", 0, "--worker-threads-limit", 8)
        self.assertGreaterEqual(w["recycled_threads"], 5, w)
        self.assertEqual(w["recycled_memory"], 0, w)


if __name__ == "__main__":
    unittest.main()
