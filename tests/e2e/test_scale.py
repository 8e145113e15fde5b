"""Scaling past one process (issue 19; run by ctest as e2e.scale): --shard on run, generate and
compare, `kvfuzz merge` of JSON summaries, the Slurm and Kubernetes recipes of examples/scale/ run
as local processes, and --devices refusals (its run on a GPU is gpu.devices, test_devices.py).

    KVFUZZ_BIN=build/kvfuzz KVFUZZ_MUTANT_BIN=build/tests/mutants/kvfuzz-mutant-padding-not-skipped \\
    KVFUZZ_SOURCE_DIR=. python3 -m unittest -v test_scale        # from tests/e2e
"""
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
MUTANT = os.environ.get("KVFUZZ_MUTANT_BIN", "kvfuzz-mutant-padding-not-skipped")
SOURCE = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", "../.."))
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JOB_COMPLETION_INDEX"))}
ENV["CI"] = "1"
# A campaign of the mutant that skips no padding row: most cases fail, with several signatures.
SEED, CASES = 3, 90
FAST = ["--confirm-runs", "1", "--max-shrink-tries", "30"]


def run(binary, *args, env=None, timeout=600):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=dict(ENV, **(env or {})))


def campaign(d, name, *extra, binary=MUTANT, env=None):
    """`run --keep-going` of the campaign into d/name/ and d/name.json; returns the summary."""
    p = run(binary, "run", "--seed", SEED, "--cases", CASES, "--keep-going", *FAST, "--corpus-out", d / name,
            "--json", d / f"{name}.json", *extra, env=env)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return json.loads((d / f"{name}.json").read_text())


def failing(summary):
    return [(f["case_index"], f["signature_id"]) for f in summary["failing_cases"]]


def by_signature(summary):
    counts = {}
    for f in summary["failing_cases"]:
        counts[f["signature_id"]] = counts.get(f["signature_id"], 0) + 1
    return counts


class Shards(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = pathlib.Path(cls.tmp.name)
        cls.single = campaign(cls.d, "single")
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            cls.shards = list(pool.map(lambda i: campaign(cls.d, f"shard-{i}", "--shard", f"{i}/3"), range(3)))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_single_run_finds_several_signatures(self):
        self.assertGreater(self.single["failed"], 10)
        self.assertGreaterEqual(len(by_signature(self.single)), 3)
        self.assertEqual(self.single["cases"], CASES)

    def test_each_shard_checks_the_cases_k_with_k_mod_n_equal_to_its_index(self):
        for i, s in enumerate(self.shards):
            self.assertEqual(s["shard"], {"index": i, "count": 3, "from": "i/N"})
            self.assertEqual(s["cases"], len(range(i, CASES, 3)))
            self.assertTrue(all(k % 3 == i for k, _ in failing(s)), failing(s))

    def test_the_union_of_the_shards_is_the_single_run(self):
        union = sorted(x for s in self.shards for x in failing(s))
        self.assertEqual(union, failing(self.single))
        self.assertEqual(sum(s["cases"] for s in self.shards), self.single["cases"])
        self.assertEqual(sum(s["passed"] for s in self.shards), self.single["passed"])
        self.assertEqual(sum(s["failed"] for s in self.shards), self.single["failed"])

    def test_merge_of_the_summaries_equals_the_single_run(self):
        out = self.d / "merged.json"
        p = run(BIN, "merge", out, *(self.d / f"shard-{i}.json" for i in (2, 0, 1)))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # the merged result has findings
        self.assertEqual(p.stdout.strip().splitlines()[-1],
                         f"kvfuzz: {self.single['passed']} passed, {self.single['failed']} failed")
        m = json.loads(out.read_text())
        self.assertEqual((m["schema"], m["command"], m["exit_code"]), ("kvfuzz-summary", "merge", 1))
        self.assertEqual(m["shards"]["missing"], [])
        self.assertEqual(m["shards"]["present"], [0, 1, 2])
        for key in ("cases", "passed", "failed", "seed", "profile", "target", "tool_version", "case_limit"):
            self.assertEqual(m[key], self.single[key], key)
        self.assertEqual([(f["case_index"], f["signature_id"]) for f in m["failing_cases"]], failing(self.single))
        self.assertEqual({s["signature_id"]: s["failing_cases"] for s in m["failing_cases_by_signature"]},
                         by_signature(self.single))
        self.assertEqual(len(m["failures"]), sum(len(s["failures"]) for s in self.shards))
        self.assertTrue(all("shard" in f and f["replay"] for f in m["failures"]))
        # Host time by stage: every shard's, summed.
        for stage in ("draw", "arena_fill", "golden", "handoff", "target", "copy_back", "diff"):
            self.assertAlmostEqual(m["stages"][stage], sum(s["stages"][stage] for s in self.shards), places=9, msg=stage)
        self.assertGreater(m["stages"]["target"], 0)

    def test_a_missing_shard_is_named_and_the_merge_exits_3(self):
        out = self.d / "partial.json"
        p = run(BIN, "merge", out, self.d / "shard-0.json", self.d / "shard-2.json")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("missing shards (no summary): 1 of 0..2", p.stdout)
        m = json.loads(out.read_text())
        self.assertEqual((m["shards"]["missing"], m["exit_code"]), ([1], 3))

    def test_summaries_of_another_campaign_are_refused_with_the_file_and_json_path(self):
        s0 = json.loads((self.d / "shard-0.json").read_text())
        for key, value, expect in [("seed", "4", "/seed"), ("profile", "smoke", "/profile"),
                                   ("tool_version", "0.0.1", "/tool_version"), ("target", "cuda", "/target")]:
            bad = self.d / f"other-{key}.json"
            bad.write_text(json.dumps(dict(s0, **{key: value}, shard=dict(s0["shard"], index=1))))
            p = run(BIN, "merge", self.d / "m.json", self.d / "shard-0.json", bad)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"{bad}: at {expect}: {key} is \"{value}\"", p.stderr)
            self.assertFalse((self.d / "m.json").exists())
        p = run(BIN, "merge", self.d / "m.json", self.d / "shard-0.json", self.d / "shard-0.json")
        self.assertEqual(p.returncode, 2)
        self.assertIn("at /shard/index: shard 0 of 3 is also", p.stderr)
        other_count = self.d / "other-count.json"
        other_count.write_text(json.dumps(dict(s0, shard={"index": 1, "count": 4, "from": "i/N"})))
        p = run(BIN, "merge", self.d / "m.json", self.d / "shard-0.json", other_count)
        self.assertEqual(p.returncode, 2)
        self.assertIn("at /shard/count: shard count 4 but 3", p.stderr)
        no_cases = self.d / "no-failing-cases.json"
        no_cases.write_text(json.dumps({k: v for k, v in s0.items() if k != "failing_cases"}))
        p = run(BIN, "merge", self.d / "m.json", no_cases)
        self.assertEqual(p.returncode, 2)
        self.assertIn("at /failing_cases: missing; expected an array", p.stderr)

    def test_summaries_and_case_folders_do_not_mix(self):
        p = run(BIN, "merge", self.d / "m.json", self.d / "shard-0.json", self.d / "shard-0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("is not a JSON summary (schema kvfuzz-summary), but other inputs are", p.stderr)
        p = run(BIN, "merge", self.d / "shard-1", self.d / "shard-0.json")
        self.assertEqual(p.returncode, 2)
        self.assertIn("is a folder; merging JSON summaries writes one summary file", p.stderr)


class ShardOption(unittest.TestCase):
    def generated(self, d, *extra, env=None):
        p = run(BIN, "generate", "--seed", 11, "--cases", 40, "-o", d, *extra, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return sorted(x.name for x in pathlib.Path(d).glob("*.json"))

    def test_generate_shards_partition_the_cases_and_slurm_and_k8s_read_their_variables(self):
        with tempfile.TemporaryDirectory() as t:
            t = pathlib.Path(t)
            whole = self.generated(t / "all")
            parts = [self.generated(t / f"p{i}", "--shard", f"{i}/4") for i in range(4)]
            self.assertEqual(sorted(sum(parts, [])), whole)
            self.assertEqual([len(p) for p in parts], [10, 10, 10, 10])
            slurm = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_STEP": "2",
                     "SLURM_ARRAY_TASK_COUNT": "4"}  # tasks 3, 5, 7, 9: task 7 is shard 2
            self.assertEqual(self.generated(t / "slurm", "--shard", "slurm", env=slurm), parts[2])
            self.assertEqual(self.generated(t / "k8s", "--shard", "k8s/4", env={"JOB_COMPLETION_INDEX": "3"}), parts[3])

    def test_compare_checks_only_its_shard(self):
        with tempfile.TemporaryDirectory() as t:
            p = run(BIN, "compare", "--target", "cuda-emu", "--against", "golden", "--cases", 30, "--seed", 2,
                    "--shard", "1/3", "-o", t)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("shard 1/3 (10 of them)", p.stderr)
            self.assertIn("kvfuzz: 10 cases", p.stdout)

    def test_bad_shards_are_refused_with_exit_2(self):
        cases = [
            (["--shard", "3/3"], {}, "--shard: shard 3 of 3 does not exist: shards are 0-based, 0 to 2"),
            (["--shard", "1"], {}, "--shard: expected i/N (0-based shard i of N), slurm or k8s/N, got \"1\""),
            (["--shard", "0/0"], {}, "--shard: expected i/N, slurm or k8s/N with N a whole number from 1"),
            (["--shard", "slurm"], {}, "--shard: slurm needs the environment variable SLURM_ARRAY_TASK_ID"),
            (["--shard", "slurm"], {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4"},
             "--shard: slurm: task 4 is not one of the 4 tasks 0, 0+1, ..."),
            (["--shard", "k8s/2"], {"JOB_COMPLETION_INDEX": "2"}, "--shard: k8s/2: JOB_COMPLETION_INDEX is 2, not below 2"),
            (["--shard", "k8s/2"], {"JOB_COMPLETION_INDEX": "x"}, "--shard: k8s: JOB_COMPLETION_INDEX must be a whole number"),
        ]
        for args, env, message in cases:
            p = run(BIN, "run", "--seed", 1, "--cases", 10, *args, env=env)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(message, p.stderr)
        p = run(BIN, "run", "--cases", 10, "--shard", "0/2")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--shard: needs --seed", p.stderr)

    def test_devices_is_refused_where_it_cannot_mean_anything(self):
        for args, message in [(["--devices", "0"], "--devices: target cuda-emu runs on no GPU"),
                              (["--target", "cuda", "--devices", "0,0"], "--devices: device 0 is listed twice"),
                              (["--target", "cuda", "--devices", "0,x"], "--devices: expected all or a comma-separated list"),
                              (["--target", "cuda", "--devices", "0", "--device", "1"], "--device and --devices both given")]:
            p = run(BIN, "run", "--seed", 1, "--cases", 2, *args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(message, p.stderr)


class Recipes(unittest.TestCase):
    """examples/scale/: the scripts the Slurm array and the Kubernetes Indexed Job run, as N local
    processes with the variables those schedulers set; the merged result must equal one process."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = pathlib.Path(cls.tmp.name)
        cls.single = campaign(cls.d, "single")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_shards(self, out, envs):
        common = {"KVFUZZ": MUTANT, "KVFUZZ_SEED": str(SEED), "KVFUZZ_CASES": str(CASES), "KVFUZZ_OUT": str(out),
                  "KVFUZZ_ARGS": " ".join(FAST), "KVFUZZ_HOME": str(SOURCE.resolve())}
        with concurrent.futures.ThreadPoolExecutor(len(envs)) as pool:
            done = list(pool.map(lambda e: subprocess.run(e[0], capture_output=True, text=True, timeout=600,
                                                          env=dict(ENV, **common, **e[1])), envs))
        for p in done:
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)  # findings are not a failed task
        merge = subprocess.run([SOURCE / "examples/scale/kvfuzz-merge.sh"], capture_output=True, text=True, timeout=600,
                               env=dict(ENV, KVFUZZ=BIN, KVFUZZ_OUT=str(out)))
        self.assertEqual(merge.returncode, 1, merge.stdout + merge.stderr)
        m = json.loads((out / "merged.json").read_text())
        self.assertEqual(m["shards"]["missing"], [])
        self.assertEqual((m["cases"], m["passed"], m["failed"]), (self.single["cases"], self.single["passed"], self.single["failed"]))
        self.assertEqual([(f["case_index"], f["signature_id"]) for f in m["failing_cases"]], failing(self.single))
        self.assertTrue(list((out / "findings" / "all").glob("*.json")))
        return m

    def test_the_slurm_array_script_run_as_its_tasks_equals_one_process(self):
        sbatch = SOURCE / "examples/scale/slurm/kvfuzz-array.sbatch"
        array = re.search(r"^#SBATCH --array=(\d+)-(\d+)$", sbatch.read_text(), re.M)
        first, last = int(array.group(1)), int(array.group(2))
        self.assertIn("--shard slurm", (SOURCE / "examples/scale/kvfuzz-shard.sh").read_text().replace('"$KVFUZZ_SHARD"', "slurm")
                      if "KVFUZZ_SHARD=slurm" in sbatch.read_text() else "")
        tasks = range(first, last + 1)
        envs = [(["bash", sbatch], {"SLURM_ARRAY_TASK_ID": str(t), "SLURM_ARRAY_TASK_MIN": str(first),
                                    "SLURM_ARRAY_TASK_MAX": str(last), "SLURM_ARRAY_TASK_STEP": "1",
                                    "SLURM_ARRAY_TASK_COUNT": str(len(tasks))}) for t in tasks]
        m = self.run_shards(self.d / "slurm", envs)
        self.assertEqual(m["shards"]["count"], len(tasks))

    def test_the_kubernetes_indexed_job_run_as_its_pods_equals_one_process(self):
        import yaml  # python3-yaml (scripts/setup.sh)
        docs = list(yaml.safe_load_all((SOURCE / "examples/scale/k8s/kvfuzz-shards.yaml").read_text()))
        job = next(d for d in docs if d["kind"] == "Job")
        spec = job["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        container = spec["template"]["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in container["env"]}
        self.assertEqual(env["KVFUZZ_SHARD"], f"k8s/{spec['completions']}")  # one number, twice
        script = SOURCE / pathlib.Path(container["command"][0]).relative_to("/opt/kvfuzz")
        merge_job = next(yaml.safe_load_all((SOURCE / "examples/scale/k8s/kvfuzz-merge.yaml").read_text()))
        merge_script = merge_job["spec"]["template"]["spec"]["containers"][0]["command"][0]
        self.assertEqual(SOURCE / pathlib.Path(merge_script).relative_to("/opt/kvfuzz"), SOURCE / "examples/scale/kvfuzz-merge.sh")
        n = 4  # the manifest's 8 pods, fewer here; the seed, cases and binary are the test's
        envs = [([script], {"KVFUZZ_SHARD": f"k8s/{n}", "JOB_COMPLETION_INDEX": str(i)}) for i in range(n)]
        m = self.run_shards(self.d / "k8s", envs)
        self.assertEqual(m["shards"]["count"], n)

    def test_a_rerun_pod_does_the_same_work(self):
        out = self.d / "rerun"
        env = {"KVFUZZ": MUTANT, "KVFUZZ_SEED": str(SEED), "KVFUZZ_CASES": str(CASES), "KVFUZZ_OUT": str(out),
               "KVFUZZ_ARGS": " ".join(FAST), "KVFUZZ_SHARD": "k8s/3", "JOB_COMPLETION_INDEX": "1"}
        script = SOURCE / "examples/scale/kvfuzz-shard.sh"
        first = subprocess.run([script], capture_output=True, text=True, env=dict(ENV, **env), timeout=600)
        self.assertEqual(first.returncode, 0, first.stderr)
        a = json.loads((out / "summaries/shard-1.json").read_text())
        again = subprocess.run([script], capture_output=True, text=True, env=dict(ENV, **env), timeout=600)
        self.assertEqual(again.returncode, 0, again.stderr)
        b = json.loads((out / "summaries/shard-1.json").read_text())
        self.assertEqual((a["cases"], failing(a)), (b["cases"], failing(b)))


if __name__ == "__main__":
    unittest.main()
