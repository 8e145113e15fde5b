"""The finding workflow (issue 17; run by ctest as e2e.findings): reproduce means fail, one bug one
finding (signatures and the folder's index), the shrinker keeps the bug and not only its kind.

    KVFUZZ_BIN=build/kvfuzz KVFUZZ_MUTANT_BIN=build/tests/mutants/kvfuzz-mutant-padding-not-skipped \\
    KVFUZZ_PLUGIN_DIR=build/plugins python3 -m unittest -v test_findings        # from tests/e2e
"""
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
MUTANT = os.environ.get("KVFUZZ_MUTANT_BIN", "kvfuzz-mutant-padding-not-skipped")
PLUGINS = pathlib.Path(os.environ.get("KVFUZZ_PLUGIN_DIR", "build/plugins"))
ENV = dict(os.environ, CI="1")
INDEX = "signatures.kvfuzz-index"


def run(binary, *args, timeout=600):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV)


def run_in(cwd, binary, *args, timeout=600):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV, cwd=cwd)


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return f"{h:016x}"


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def cases_in(d):
    return sorted(pathlib.Path(d).glob("*.json"))


def snapshot(d):
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in cases_in(d)}


class ReproduceMeansFail(unittest.TestCase):
    def test_the_printed_reproduction_fails_while_the_bug_is_there_and_passes_once_fixed(self):
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "found"
            p = run(MUTANT, "run", "--cases", 500, "--seed", 3, "--corpus-out", out)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            line = next(l for l in p.stdout.splitlines() if l.strip().startswith("reproduce:"))
            argv = shlex.split(line.split("reproduce:", 1)[1])
            self.assertEqual(argv[0], MUTANT)  # the binary as invoked, not whatever kvfuzz is on PATH
            case = argv[2]
            bug = run(MUTANT, *argv[1:])            # the reproduction, on the buggy kernel
            self.assertEqual(bug.returncode, 1, bug.stdout)
            self.assertEqual(last_line(bug.stdout), "kvfuzz: 0 passed, 1 failed")
            fixed = run(BIN, *argv[1:])             # the same command, on the fixed kernel
            self.assertEqual(fixed.returncode, 0, fixed.stdout)
            self.assertIn("passes now", fixed.stdout)
            # A corpus that pins known failures: --expect-saved checks the record instead.
            self.assertEqual(run(MUTANT, "replay", case, "--expect-saved").returncode, 0)
            self.assertEqual(run(BIN, "replay", case, "--expect-saved").returncode, 1)
            # The findings folder as a regression suite: red with the bug, green without.
            self.assertEqual(run(MUTANT, "replay", out).returncode, 1)
            self.assertEqual(run(BIN, "replay", out).returncode, 0)


class OneBugOneFinding(unittest.TestCase):
    def campaign(self, out, seed, *extra, binary=MUTANT):
        p = run(binary, "run", "--cases", 150, "--seed", seed, "--keep-going", "--corpus-out", out,
                "--json", pathlib.Path(out).parent / f"summary-{seed}.json", *extra)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        return p, json.loads((pathlib.Path(out).parent / f"summary-{seed}.json").read_text())

    def test_each_signature_is_saved_once_across_runs_and_no_file_is_replaced(self):
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "found"
            p, s = self.campaign(out, 1)
            files = cases_in(out)
            index = json.loads((out / INDEX).read_text())["signatures"]
            self.assertEqual(json.loads((out / INDEX).read_text())["schema"], "kvfuzz-findings-index")
            # Far fewer files than failures; every saved file is the index's case of one signature, or
            # an earlier, larger one it superseded (kept: only `merge --prune` deletes).
            self.assertLess(len(files), s["failed"] // 2, p.stdout)
            kept = [e["file"] for e in index.values()] + [x for e in index.values() for x in e["superseded"]]
            self.assertEqual(sorted(kept), sorted(f.name for f in files))
            self.assertEqual(len({e["signature"] for e in index.values()}), len(index))
            for f in s["failures"]:
                self.assertRegex(f["signature"], r"^v2 [a-z_]+\|")
                e = index[f["signature_id"]]
                self.assertIn(pathlib.Path(f["file"]).name, [e["file"], *e["superseded"]])
            self.assertGreater(sum(d["count"] for d in s["duplicates"]), 0)
            self.assertIn("not saved again", p.stdout)

            # The same run again: every failure is a known signature; nothing saved, nothing touched.
            before = snapshot(out)
            p2, s2 = self.campaign(out, 1)
            self.assertEqual(s2["failures"], [], p2.stdout)
            self.assertEqual(snapshot(out), before)
            index2 = json.loads((out / INDEX).read_text())["signatures"]
            self.assertEqual(index2.keys(), index.keys())
            self.assertGreater(sum(e["found"] for e in index2.values()), sum(e["found"] for e in index.values()))

            # Another seed: only new signatures are saved, and the old files stay as they were.
            p3, s3 = self.campaign(out, 2)
            after = snapshot(out)
            for name, state in before.items():
                self.assertEqual(after[name], state, f"{name} was replaced")
            index3 = json.loads((out / INDEX).read_text())["signatures"]
            for f in s3["failures"]:  # a known signature is saved again only as a smaller case
                if f["signature_id"] in index2:
                    old = index2[f["signature_id"]]
                    self.assertLess(index3[f["signature_id"]]["size"], old["size"], f)
                    self.assertIn(old["file"], index3[f["signature_id"]]["superseded"])
                    self.assertTrue((out / old["file"]).exists())
            self.assertEqual(sorted(e["file"] for e in index3.values() if (out / e["file"]).exists()),
                             sorted(e["file"] for e in index3.values()))
            # The folder still replays: red on the mutant.
            self.assertEqual(run(MUTANT, "replay", out).returncode, 1)


class ShrinkerKeepsTheBug(unittest.TestCase):
    def test_a_refusal_of_many_heads_does_not_shrink_into_a_refused_empty_batch(self):
        # The plugin refuses empty batches and 4+ heads. Keeping only the kind (launch_error), the
        # shrinker turned every "too many heads" failure into "no tokens" (the build before issue 17:
        # 162 of 162 failures of a 300-case campaign). Keeping the signature's identity, it does not.
        target = f"plugin:{PLUGINS / 'broken-refuses-two.so'}"
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "found"
            p = run(BIN, "run", "--target", target, "--cases", 300, "--seed", 1, "--keep-going", "--corpus-out", out,
                    "--json", pathlib.Path(d) / "s.json")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            s = json.loads((pathlib.Path(d) / "s.json").read_text())
            heads = [f for f in s["failures"] if "too many heads" in f["findings"][0]["sentence"]]
            self.assertGreater(len(heads), 0, p.stdout)
            for f in heads:
                self.assertGreaterEqual(f["size"]["heads"], 4, f)
                self.assertGreaterEqual(f["size"]["slots"], 1, f)
                case = json.loads(pathlib.Path(f["file"]).read_text())
                self.assertGreaterEqual(case["shape"]["num_heads"], 4)
            for f in s["failures"]:  # each saved case replays as the refusal it was found as
                r = run(BIN, "replay", f["file"], "--target", target)
                self.assertEqual(r.returncode, 1)
                self.assertIn(f["findings"][0]["sentence"].split(":")[-2], r.stdout)


class Repeat(unittest.TestCase):
    def test_repeat_catches_a_kernel_that_is_right_most_of_the_time(self):
        # The plugin loses every 7th call in its process. 4 cases: 4 calls, all right; each launched
        # 4 times: 16 calls, two of them wrong.
        target = f"plugin:{PLUGINS / 'broken-racy.so'}"
        with tempfile.TemporaryDirectory() as d:
            once = run(BIN, "run", "--target", target, "--cases", 4, "--seed", 5, "--corpus-out", pathlib.Path(d) / "a")
            self.assertEqual(once.returncode, 0, once.stdout + once.stderr)
            rep = run(BIN, "run", "--target", target, "--cases", 4, "--seed", 5, "--repeat", 4, "--confirm-runs", 0,
                      "--max-shrink-tries", 0, "--corpus-out", pathlib.Path(d) / "b")
            self.assertEqual(rep.returncode, 1, rep.stdout + rep.stderr)
            self.assertIn("-> missing_write", rep.stdout)


class Stats(unittest.TestCase):
    def test_stats_count_the_buckets_of_exactly_the_cases_checked(self):
        # The counts are checked against the same cases written by `generate` and read here.
        n = 300
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            p = run(BIN, "run", "--cases", n, "--seed", 9, "--stats", "--json", d / "s.json", "--corpus-out", d / "f")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"kvfuzz: coverage of {n} cases", p.stdout)
            stats = json.loads((d / "s.json").read_text())["stats"]
            run(BIN, "generate", "--seed", 9, "--cases", n, "-o", d / "g")
            cases = [json.loads(f.read_text()) for f in cases_in(d / "g")]
            self.assertEqual(len(cases), n)
            expect = {}
            for c in cases:
                cap = c["cache"]["num_blocks"] * c["cache"]["block_size"]
                pad = sum(1 for x in c["slot_mapping"] if x < 0)
                keys = ["layout=" + c["cache"]["layout"], "cache_dtype=" + c["shape"]["cache_dtype"],
                        "padding_rows=" + ("0" if pad == 0 else "1" if pad == 1 else "many")]
                if cap in c["slot_mapping"]:
                    keys.append("slot=equals_capacity")
                k, v = c["input"]["key"], c["input"]["value"]
                if (k["stride_token"], k["stride_head"]) != (v["stride_token"], v["stride_head"]):
                    keys.append("kv_views=distinct_strides")
                for key in keys:
                    expect[key] = expect.get(key, 0) + 1
            for key, count in expect.items():
                self.assertEqual(stats.get(key), count, key)
            for group in ("layout", "cache_dtype", "padding_rows", "slot_dtype", "heads"):
                self.assertEqual(sum(v for k, v in stats.items() if k.startswith(group + "=")), n, group)


class PartialProfiles(unittest.TestCase):
    def test_a_partial_profile_changes_only_its_keys(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            (d / "hnd.json").write_text(json.dumps({
                "schema": "kvfuzz-config", "version": 1, "extends": "default",
                "layouts": {"values": ["paged_hnd"], "weights": [1]},
                "cache_dtypes": {"values": ["bf16", "fp8_e4m3"], "weights": [1, 1]}}))
            p = run(BIN, "run", "--config", d / "hnd.json", "--cases", 150, "--seed", 2, "--stats", "--json", d / "s.json")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            stats = json.loads((d / "s.json").read_text())["stats"]
            self.assertEqual({k: v for k, v in stats.items() if k.startswith("layout=")}, {"layout=paged_hnd": 150})
            self.assertLessEqual({k for k in stats if k.startswith("cache_dtype=")},
                                 {"cache_dtype=" + t for t in ("f16", "bf16", "f32", "fp8_e4m3")})
            self.assertIn("cache_dtype=fp8_e4m3", stats)  # the default's quant_percent still applies
            (d / "loop.json").write_text(json.dumps({"schema": "kvfuzz-config", "version": 1, "extends": "loop.json"}))
            bad = run(BIN, "run", "--config", d / "loop.json", "--cases", 1)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("makes a cycle", bad.stderr)


class CompareHonoursCapabilities(unittest.TestCase):
    def test_neither_side_of_compare_gets_a_case_outside_its_capabilities(self):
        # The plugin declares paged HND with i32 slots only and logs every call outside that.
        target = f"plugin:{PLUGINS / 'broken-strict-hnd-i32.so'}"
        for a, b in ((target, "cuda-emu"), ("cuda-emu", target)):
            with tempfile.TemporaryDirectory() as d:
                log = pathlib.Path(d) / "violations"
                env = dict(ENV, KVFUZZ_TEST_VIOLATIONS=str(log))
                p = subprocess.run([BIN, "compare", "--target", a, "--against", b, "--cases", "300", "--seed", "2",
                                    "-o", str(pathlib.Path(d) / "o")], capture_output=True, text=True, env=env, timeout=600)
                self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)  # it refuses 2+ heads: a difference
                self.assertFalse(log.exists() and log.read_text(), f"calls outside the capabilities ({a} vs {b}):\n" +
                                 (log.read_text() if log.exists() else ""))
                if a == "cuda-emu":
                    self.assertIn("kvfuzz: skipped", p.stdout)


class ReproductionLines(unittest.TestCase):
    def test_every_reproduction_line_is_quoted_carries_its_options_and_runs_as_printed(self):
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "it's a $dir" / "found"   # a path the shell would mangle unquoted
            summary = pathlib.Path(d) / "s.json"
            p = run(MUTANT, "run", "--cases", 500, "--seed", 3, "--corpus-out", out, "--timeout", 7.5,
                    "--tolerance", "exact", "--json", summary)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            case = cases_in(out)[0]
            expected = [MUTANT, "replay", str(case), "--target", "cuda-emu", "--timeout", "7.5", "--tolerance", "exact"]
            line = next(l for l in p.stdout.splitlines() if l.strip().startswith("reproduce:")).split("reproduce:", 1)[1]
            self.assertEqual(shlex.split(line), expected)
            # The same line in the JSON summary, the report and the JUnit of a replay.
            self.assertEqual(shlex.split(json.loads(summary.read_text())["failures"][0]["replay"]), expected)
            report = json.loads((out / (case.stem + ".report") / "report.json").read_text())
            self.assertEqual(shlex.split(report["reproduce"]["replay"]), expected)
            self.assertEqual(shlex.split(report["reproduce"]["report"]), [MUTANT, "report"] + expected[2:])
            # Pasted into a shell as printed, it fails while the bug is there.
            shell = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=600, env=ENV)
            self.assertEqual(shell.returncode, 1, shell.stdout + shell.stderr)
            self.assertEqual(last_line(shell.stdout), "kvfuzz: 0 passed, 1 failed")
            # A replay's mismatch prints the replay's own line, with the replay's options.
            again = run(MUTANT, "replay", case, "--timeout", 9, "--max-case-mib", 512)
            line = next(l for l in again.stdout.splitlines() if l.strip().startswith("reproduce:")).split("reproduce:", 1)[1]
            self.assertEqual(shlex.split(line),
                             [MUTANT, "replay", str(case), "--target", "cuda-emu", "--timeout", "9", "--max-case-mib", "512"])


class InterruptDuringABurstOfFailures(unittest.TestCase):
    def test_sigint_while_every_case_fails_still_writes_the_summaries(self):
        # Every case with 4+ heads is refused: failures arrive back to back, each confirmed and
        # shrunk. ^C must stop at the next case boundary, keep what was saved and write the summaries.
        target = f"plugin:{PLUGINS / 'broken-refuses-two.so'}"
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            proc = subprocess.Popen([BIN, "run", "--target", target, "--cases", "0", "--seed", "5", "--keep-going",
                                     "--corpus-out", str(d / "found"), "--json", str(d / "s.json"),
                                     "--junit", str(d / "j.xml")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
            # One bug is one signature (v2): the failures after the first are counted duplicates, seen
            # in the progress lines' fail count.
            failures = 0
            for line in proc.stderr:
                failures += "NEW-FAIL" in line or "DUPLICATE" in line
                counted = re.search(r" fail (\d+) ", line)
                if failures >= 5 or (counted and int(counted.group(1)) >= 5):
                    break
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=300)
            self.assertEqual(proc.returncode, 1, stdout + stderr)  # findings outrank the interruption (docs/exit-codes.md)
            self.assertRegex(last_line(stdout), r"^kvfuzz: \d+ passed, [1-9]\d* failed$")
            s = json.loads((d / "s.json").read_text())
            self.assertTrue(s["interrupted"])
            self.assertGreaterEqual(s["failed"], 1)
            self.assertEqual(int(last_line(stdout).split()[3]), s["failed"])
            import xml.etree.ElementTree as ET
            suite = ET.parse(d / "j.xml").getroot().find("testsuite")
            self.assertEqual(int(suite.get("failures")) + int(suite.get("errors")), 1)  # refusals are errors
            for f in cases_in(d / "found"):
                self.assertEqual(json.loads(f.read_text())["schema"], "kvfuzz-case")  # each whole


class Merge(unittest.TestCase):
    def test_coverage_keeps_a_smaller_corpus_with_every_feature_bucket(self):
        n = 200
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            run(BIN, "generate", "--seed", 11, "--cases", n, "-o", d / "g")
            p = run(BIN, "run", "--cases", n, "--seed", 11, "--stats", "--json", d / "s.json")
            self.assertEqual(p.returncode, 0, p.stderr)
            buckets = {k for k, v in json.loads((d / "s.json").read_text())["stats"].items() if v > 0}
            before = snapshot(d / "g")
            m = run(BIN, "merge", d / "m", d / "g", "--coverage")
            self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
            got = re.search(r"(\d+) copied.*; (\d+) passing cases not copied \(no new feature bucket\), (\d+) buckets covered",
                            m.stdout)
            copied, dropped, covered = map(int, got.groups())
            self.assertEqual(copied + dropped, n)
            self.assertEqual(len(cases_in(d / "m")), copied)
            self.assertLess(copied, n // 2)
            self.assertEqual(covered, len(buckets))  # every bucket the whole corpus hits
            self.assertEqual(snapshot(d / "g"), before)  # inputs only read
            # The kept cases alone cover the same buckets: a campaign over them sees them all.
            again = run(BIN, "merge", d / "m2", d / "m", "--coverage")
            self.assertIn(f" 0 passing cases not copied (no new feature bucket), {covered} buckets covered", again.stdout)
            # Merging the corpus again adds nothing.
            third = run(BIN, "merge", d / "m", d / "g", "--coverage")
            self.assertIn(" 0 copied", third.stdout)
            self.assertIn(f"{covered} buckets covered", third.stdout)


    def test_merge_keeps_one_case_per_signature_and_reads_its_inputs_only(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            for name, seed in (("a", 1), ("b", 2)):
                run(MUTANT, "run", "--cases", 80, "--seed", seed, "--keep-going", "--corpus-out", d / name)
            before = {n: snapshot(d / n) for n in ("a", "b")}
            p = run(MUTANT, "merge", d / "m", d / "a", d / "b")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            m = re.search(r"(\d+) case files read \((\d+) already in OUT\), (\d+) failing on cuda-emu \((\d+) signatures?\); "
                          r"(\d+) copied, (\d+) not copied", p.stdout)
            read, in_out, failing, sigs, copied, not_copied = map(int, m.groups())
            self.assertEqual(read, len(cases_in(d / "a")) + len(cases_in(d / "b")))
            self.assertEqual(read, in_out + copied + not_copied)  # every file counted once
            self.assertEqual(len(cases_in(d / "m")), sigs)
            self.assertLessEqual(sigs, failing)
            index = json.loads((d / "m" / INDEX).read_text())["signatures"]
            self.assertEqual(sorted(e["file"] for e in index.values()), sorted(f.name for f in cases_in(d / "m")))
            self.assertEqual({n: snapshot(d / n) for n in ("a", "b")}, before)  # inputs only read
            again = run(MUTANT, "merge", d / "m", d / "a", d / "b")
            self.assertIn(" 0 copied", again.stdout)
            self.assertEqual(run(MUTANT, "replay", d / "m").returncode, 1)  # red with the bug
            self.assertEqual(run(BIN, "replay", d / "m").returncode, 0)     # green without it

    def test_prune_deletes_only_the_superseded_cases(self):
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "found"
            run(MUTANT, "run", "--cases", 60, "--seed", 4, "--keep-going", "--corpus-out", out)
            files = cases_in(out)
            self.assertGreaterEqual(len(files), 2)
            raw = json.loads((out / INDEX).read_text())
            entries = list(raw["signatures"].values())
            # Record the case of one signature as superseded by the case of another entry's
            # signature, as the index does when a smaller case of a signature arrives.
            victim = entries[0]["file"]
            entries[1]["superseded"].append(victim)
            entries[0]["file"] = entries[1]["file"]
            (out / INDEX).write_text(json.dumps(raw))
            keep = [f.name for f in files if f.name != victim]
            p = run(MUTANT, "merge", out, "--prune")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("1 superseded case deleted", p.stdout)
            self.assertEqual([f.name for f in cases_in(out)], keep)
            self.assertFalse((out / (victim[:-5] + ".report")).exists())
            self.assertEqual(json.loads((out / INDEX).read_text())["signatures"][list(raw["signatures"])[1]]["superseded"], [])


if __name__ == "__main__":
    unittest.main()


class FindingsAUserCanTrust(unittest.TestCase):
    """Issue 37: replay and report run a finding on the target it was found on; no command replaces
    a file it did not make; output folders are made, not a reason to fail after the campaign; one
    bug gives one or two signatures whatever the seed. Each test fails on d9efdaa."""

    def found(self, d, plugin="naive-mutant-padding.so"):
        """A finding made on a copy of `plugin` at d/kernel.so (plugin:./kernel.so, as a user types it)."""
        d = pathlib.Path(d)
        shutil.copy(PLUGINS / plugin, d / "kernel.so")
        p = run_in(d, BIN, "run", "--target", "plugin:./kernel.so", "--cases", 300, "--seed", 3, "--corpus-out", "f")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        case = cases_in(d / "f")[0]
        prov = json.loads(case.read_text())["provenance"]
        self.assertEqual(prov["target"], "plugin:./kernel.so")
        self.assertRegex(prov["target_digest"], r"^fnv1a64:[0-9a-f]{16}$")
        return case

    # 1. A false "fixed": replay without --target ran cuda-emu and printed "fixed".
    def test_replay_without_target_runs_the_recorded_target_and_says_fixed_only_when_it_passes(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            self.found(d)
            bug = run_in(d, BIN, "replay", "f")
            self.assertEqual(bug.returncode, 1, bug.stdout + bug.stderr)
            self.assertNotIn("fixed", bug.stdout)
            self.assertIn("on plugin:./kernel.so", bug.stdout)
            self.assertEqual(last_line(bug.stdout), "kvfuzz: 0 passed, 1 failed")
            s = run_in(d, BIN, "replay", "f", "--json", "-")
            item = json.loads(s.stdout)["items"][0]
            self.assertEqual((item["target"], item["found_on"]), ("plugin:./kernel.so", "plugin:./kernel.so"))
            shutil.copy(PLUGINS / "naive.so", d / "kernel.so")  # the fix, rebuilt at the same path
            fixed = run_in(d, BIN, "replay", "f")
            self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
            self.assertRegex(fixed.stdout, r"kvfuzz: fixed: f/\w+\.json \(recorded fail:\w+\) passes now on plugin:\./kernel\.so")
            (d / "kernel.so").unlink()  # the recorded target is gone: exit 3 naming it, never another target
            gone = run_in(d, BIN, "replay", "f")
            self.assertEqual(gone.returncode, 3, gone.stdout + gone.stderr)
            self.assertIn("plugin:./kernel.so", gone.stderr)
            self.assertIn("./kernel.so", gone.stderr)

    def test_a_pass_on_a_byte_identical_target_is_not_called_fixed(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            case = self.found(d)
            # The case's record says the passing naive.so is the file it was found on (as if a flaky
            # kernel had failed once): a pass on the same bytes is no fix.
            shutil.copy(PLUGINS / "naive.so", d / "kernel.so")
            j = json.loads(case.read_text())
            j["provenance"]["target_digest"] = "fnv1a64:" + fnv1a64((d / "kernel.so").read_bytes())
            case.write_text(json.dumps(j))
            p = run_in(d, BIN, "replay", "f")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertNotIn("kvfuzz: fixed", p.stdout)
            self.assertIn("not reproduced", p.stdout)

    # 2. `report FINDING.json` replaced the saved FAIL report with a PASS report made on cuda-emu.
    def test_report_runs_the_recorded_target_and_never_replaces_an_earlier_report(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            case = self.found(d)
            saved = case.with_suffix(".report")
            before = {f.name: f.read_bytes() for f in saved.iterdir()}
            p = run_in(d, BIN, "report", case.relative_to(d))
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # still failing on the recorded plugin
            self.assertIn("on plugin:./kernel.so", p.stdout)
            self.assertEqual({f.name: f.read_bytes() for f in saved.iterdir()}, before)
            beside = pathlib.Path(str(saved) + "-2")
            self.assertEqual(json.loads((beside / "report.json").read_text())["schema"], "kvfuzz-report")
            refused = run_in(d, BIN, "report", case.relative_to(d), "-o", saved.relative_to(d))
            self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
            self.assertIn("--force", refused.stderr)
            self.assertEqual({f.name: f.read_bytes() for f in saved.iterdir()}, before)
            forced = run_in(d, BIN, "report", case.relative_to(d), "-o", saved.relative_to(d), "--force")
            self.assertEqual(forced.returncode, 1, forced.stdout + forced.stderr)

    # 3. `merge s0.json s1.json s2.json` overwrote shard 0's summary.
    def test_merge_never_writes_over_a_summary(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            for i in range(3):
                p = run_in(d, BIN, "run", "--cases", 30, "--seed", 5, "--shard", f"{i}/3", "--corpus-out", f"f{i}",
                           "--json", f"s{i}.json")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            before = (d / "s0.json").read_bytes()
            p = run_in(d, BIN, "merge", "s0.json", "s1.json", "s2.json")
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("s0.json", p.stderr)
            self.assertEqual((d / "s0.json").read_bytes(), before)
            ok = run_in(d, BIN, "merge", "merged.json", "s0.json", "s1.json", "s2.json")
            self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
            self.assertEqual(json.loads((d / "merged.json").read_text())["cases"], 30)

    # 4. `--json results/summary.json` without results/ ran the campaign, then exited 3.
    def test_output_files_in_missing_folders_are_written(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            p = run_in(d, BIN, "run", "--cases", 20, "--seed", 5, "--corpus-out", "f", "--json", "results/summary.json",
                       "--junit", "ci/junit/kvfuzz.xml", "--summary-md", "ci/md/summary.md")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(json.loads((d / "results/summary.json").read_text())["cases"], 20)
            self.assertIn("<testsuites", (d / "ci/junit/kvfuzz.xml").read_text())
            self.assertIn("kvfuzz run", (d / "ci/md/summary.md").read_text())
            (d / "file").write_text("x")  # a folder that cannot be made: exit 2 before any case
            bad = run_in(d, BIN, "run", "--cases", 20, "--seed", 5, "--corpus-out", "g", "--json", "file/summary.json")
            self.assertEqual(bad.returncode, 2, bad.stdout + bad.stderr)
            self.assertIn("file", bad.stderr)
            self.assertFalse((d / "g").exists())

    # 5, 6. One bug, one or two signatures whatever the seed; the head-stride bug shrinks to <= 2 heads.
    def test_a_planted_bug_gives_at_most_two_signatures_over_seeds(self):
        for plugin in ("naive-mutant-head-stride.so", "naive-mutant-padding.so"):
            with tempfile.TemporaryDirectory() as d:
                d = pathlib.Path(d)
                ids, printed = set(), set()
                for seed in (21, 22):
                    p = run(BIN, "run", "--target", f"plugin:{PLUGINS / plugin}", "--keep-going", "--seed", seed,
                            "--cases", 300, "--corpus-out", d / "f")
                    self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                    printed |= set(re.findall(r"more failures of signature ([0-9a-f]{16})", p.stdout))
                index = json.loads((d / "f" / INDEX).read_text())["signatures"]
                self.assertLessEqual(len(index), 2, (plugin, [e["signature"] for e in index.values()]))
                self.assertLessEqual(printed, set(index))  # every signature printed is the folder's
                for e in index.values():
                    self.assertNotIn("requests=", e["signature"])
                    self.assertNotIn("cross_request_write", e["signature"])  # one request writes only its own cells
                    if plugin.startswith("naive-mutant-head-stride"):
                        c = json.loads((d / "f" / e["file"]).read_text())
                        self.assertLessEqual(c["shape"]["num_heads"], 2)

    # 7. A crash reported only its signal: no place, no way to get one.
    def test_a_crash_finding_says_how_to_see_where_it_crashed(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            shutil.copy(PLUGINS / "broken-crash-on-head-dim-7.so", d / "kernel.so")
            p = run_in(d, BIN, "run", "--target", "plugin:./kernel.so", "--cases", 200, "--seed", 3, "--corpus-out", "f",
                       "--json", "s.json")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            case = cases_in(d / "f")[0].relative_to(d)
            want = (f"gdb -batch -ex run -ex bt --args {BIN} replay {case} --target plugin:./kernel.so --no-fork")
            self.assertIn("  locate: " + want + "\n", p.stdout)
            self.assertEqual(json.loads((d / "s.json").read_text())["failures"][0]["locate"], want)
            report = (case.with_suffix(".report") / "report.json")
            self.assertEqual(json.loads((d / report).read_text())["reproduce"]["locate"], want)
            r = run_in(d, BIN, "replay", "f", "--json", "-")
            self.assertEqual(json.loads(r.stdout)["items"][0]["locate"], want)
            if shutil.which("gdb"):  # the printed command, run as printed, shows the crashing line
                g = subprocess.run(want, shell=True, cwd=d, capture_output=True, text=True, timeout=300)
                self.assertRegex(g.stdout, r"#0 .*kvfuzz_plugin_append .* at \S*broken_plugin\.c:\d+")
            # A finding that is not a crash has no locate line (its cells say where already).
            ok = run_in(d, BIN, "run", "--target", f"plugin:{PLUGINS / 'naive-mutant-padding.so'}", "--cases", 300,
                        "--seed", 3, "--corpus-out", "g")
            self.assertEqual(ok.returncode, 1, ok.stdout + ok.stderr)
            self.assertNotIn("locate:", ok.stdout)

    def test_replay_sanitize_runs_the_case_in_one_process_under_compute_sanitizer(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            case = self.found(d).relative_to(d)
            # A stand-in for compute-sanitizer: records its arguments, runs the program, exits 1 as
            # --error-exitcode 1 says it would on an error.
            fake = d / "compute-sanitizer"
            fake.write_text("#!/bin/sh\necho \"$@\" > args.txt\nshift 6\n\"$@\"\nexit 1\n")
            fake.chmod(0o755)
            env = dict(os.environ, KVFUZZ_COMPUTE_SANITIZER=str(fake))
            p = subprocess.run([str(BIN), "replay", str(case), "--sanitize"], cwd=d, env=env, capture_output=True,
                               text=True, timeout=600)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            args = (d / "args.txt").read_text().split()
            self.assertEqual(args[:6], ["--tool", "memcheck", "--target-processes", "all", "--error-exitcode", "1"])
            self.assertEqual(args[7:], ["replay", str(case), "--no-fork"])
            self.assertIn("on plugin:./kernel.so", p.stdout)  # the case ran, on its recorded target
            env["KVFUZZ_COMPUTE_SANITIZER"] = str(d / "none")
            gone = subprocess.run([str(BIN), "replay", str(case), "--sanitize"], cwd=d, env=env, capture_output=True,
                                  text=True, timeout=60)
            self.assertEqual(gone.returncode, 3, gone.stdout + gone.stderr)
            self.assertIn("compute-sanitizer is not installed", gone.stderr)



class ConventionsPeopleExpect(unittest.TestCase):
    """Issue 37's conventions: did-you-mean for targets and options, -q/-v, what --help and
    `targets` say, counts that add up, singular nouns, aligned --stats. Each fails on d9efdaa."""

    def test_a_mistyped_target_or_option_gets_a_suggestion(self):
        for typed, want in (("cuda-emo", "did you mean cuda-emu?"), ("./k.so", "did you mean plugin:./k.so?"),
                            ("plugn:./k.so", "did you mean plugin:./k.so?"), ("mod:fn", "did you mean python:mod:fn?")):
            p = run(BIN, "run", "--target", typed, "--cases", 1)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(want, p.stderr)
        p = run(BIN, "run", "--cases", 1, "--seeed", 3)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("unknown option --seeed of run; did you mean --seed?", p.stderr)
        p = run(BIN, "replay", "x.json", "--expect-savd")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("did you mean --expect-saved?", p.stderr)

    def test_quiet_and_verbose(self):
        plain = run(BIN, "run", "--cases", 8, "--seed", 2)
        self.assertIn("#8 pulse", plain.stderr)
        self.assertNotIn("#3 pulse", plain.stderr)  # doublings only
        quiet = run(BIN, "run", "-q", "--cases", 8, "--seed", 2)
        self.assertEqual(quiet.returncode, 0)
        self.assertEqual(quiet.stderr, "")
        self.assertEqual(quiet.stdout, plain.stdout.replace(re.search(r"in \S+ s \(\d+", plain.stdout).group(0),
                                                            re.search(r"in \S+ s \(\d+", quiet.stdout).group(0)))
        verbose = run(BIN, "run", "-v", "--cases", 8, "--seed", 2)
        self.assertEqual([int(n) for n in re.findall(r"^#(\d+) pulse", verbose.stderr, re.M)], list(range(1, 9)))
        both = run(BIN, "run", "-q", "-v", "--cases", 1)
        self.assertEqual(both.returncode, 2)

    def test_help_shows_the_default_target_and_jobs(self):
        h = run(BIN, "run", "--help").stdout
        self.assertRegex(h, r"--target TEXT=cuda-emu")
        self.assertRegex(h, r"-j,--jobs INT:in \[1 - 256\]=1")

    def test_targets_says_which_are_available_here_and_why_not(self):
        p = run(BIN, "targets")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cuda-emu\n", p.stdout)
        j = json.loads(run(BIN, "targets", "--json").stdout)["targets"]
        own = [t for t in j if "available" in t]
        self.assertTrue(any(t["name"] == "cuda-emu" and t["available"] for t in own))
        for t in own:  # each one available, or unavailable with its reason
            self.assertEqual(t["available"], t["unavailable_reason"] == "", t)
        self.assertEqual(p.stdout.count("\n  available here: "), len(own))  # every own target says it
        have_gpu = shutil.which("nvidia-smi") is not None and subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0
        if not have_gpu:
            cuda = next(t for t in own if t["name"] == "cuda")
            self.assertFalse(cuda["available"])
            self.assertIn("available here: no: " + cuda["unavailable_reason"].split("\n")[0], p.stdout)

    def test_one_case_is_one_case_and_stats_are_aligned(self):
        p = run(BIN, "run", "--cases", 1, "--seed", 4, "--stats")
        self.assertRegex(p.stdout, r"kvfuzz: 1 case in \S+ s")
        self.assertIn("kvfuzz: coverage of 1 case (", p.stdout)
        rows = [l for l in p.stdout.split("\n") if re.match(r"^ {2,4}\S+=\S*: +\d+ \( *\d+%\)$", l)]
        self.assertGreater(len(rows), 10)
        self.assertEqual(len({l.index(":") + len(re.search(r": +", l).group(0)) for l in rows}), 1)  # one count column
        self.assertEqual(len({len(l) for l in rows}), 1)  # and the shares end in one column

    def test_merge_counts_every_file_once(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            p = run(BIN, "run", "--target", f"plugin:{PLUGINS / 'naive-mutant-padding.so'}", "--cases", 300, "--seed", 3,
                    "--keep-going", "--corpus-out", d / "a")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            run(BIN, "run", "--cases", 20, "--seed", 5, "--corpus-out", d / "c")
            run(BIN, "generate", "--seed", 5, "--cases", 6, "-o", d / "c")
            n_a, n_c = len(cases_in(d / "a")), len(cases_in(d / "c"))
            # a given twice; the padding findings run on the plugin they record, not on cuda-emu.
            m = run(BIN, "merge", d / "m", d / "a", d / "c", d / "a")
            self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
            got = re.search(r"(\d+) case files read \((\d+) already in OUT\), (\d+) failing on (.*) \((\d+) signatures?\); "
                            r"(\d+) copied, (\d+) not copied", m.stdout)
            read, in_out, failing, on, sigs, copied, not_copied = got.groups()
            read, in_out, failing, copied, not_copied = map(int, (read, in_out, failing, copied, not_copied))
            self.assertEqual(read, 2 * n_a + n_c)
            self.assertEqual(failing, 2 * n_a)
            self.assertIn("naive-mutant-padding.so", on)
            self.assertEqual(read, in_out + copied + not_copied)
            self.assertEqual(copied, len(cases_in(d / "m")))
            self.assertEqual(not_copied, n_a)  # the second copy of each
