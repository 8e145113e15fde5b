"""The Python targets end to end (issues 5 and 10): triton-interp and python[-numpy|-cuda]:MODULE:FUNCTION.

Runs the real kvfuzz binary against the persistent Python worker (src/targets/python_worker.py) with
the Triton venv's Python (KVFUZZ_PYTHON, made by scripts/setup-triton.sh; ctest skips the test
without it). Kernels that misbehave on purpose live in python_kernels/faulty.py.

    KVFUZZ_BIN=build/kvfuzz KVFUZZ_SOURCE_DIR=. KVFUZZ_PYTHON=build/venv-triton/bin/python \
        python3 -m unittest -v test_python_targets      (in tests/e2e)
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

BIN = os.environ["KVFUZZ_BIN"]
SRC = os.environ["KVFUZZ_SOURCE_DIR"]
KERNELS = os.path.join(SRC, "tests", "e2e", "python_kernels")
FAULTY = os.path.join(KERNELS, "faulty.py")
DECLARED = os.path.join(KERNELS, "declared.py")
COPY_PROFILE = os.path.join(KERNELS, "copy.json")
NUMPY_EXAMPLE = os.path.join(SRC, "examples", "python", "kv_append_numpy.py")
EXAMPLES = os.path.join(SRC, "examples", "python")
BUGGY = os.path.join(KERNELS, "buggy.py")
SERVING_PROFILE = os.path.join(KERNELS, "serving.json")


def python_has(module):
    return subprocess.run([os.environ["KVFUZZ_PYTHON"], "-c", f"import {module}"], capture_output=True).returncode == 0


def summary(out):
    """(passed, failed) of the final 'kvfuzz: N passed, N failed' line."""
    m = re.search(r"^kvfuzz: (\d+) passed, (\d+) failed$", out, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else None


class PythonTargets(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvfuzz-python-targets-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def kvfuzz(self, *args, env=None, timeout=600):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, env=e)

    def campaign(self, target, *args, env=None):
        return self.kvfuzz("run", "--target", target, "--seed", "4", "--corpus-out", os.path.join(self.tmp, "found"),
                           *args, env=env)

    # --- campaigns that pass -------------------------------------------------------------------

    def test_triton_interp_runs_every_format_family_unskipped(self):
        # The Triton kernel takes every layout and family (kv_split, k_only, mla): nothing is skipped.
        summary_file = os.path.join(self.tmp, "s.json")
        r = self.kvfuzz("run", "--target", "triton-interp", "--config", os.path.join(SRC, "configs", "formats.json"),
                        "--cases", "300", "--seed", "7", "--json", summary_file)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (300, 0))
        with open(summary_file) as f:
            s = json.load(f)
        self.assertEqual(s["skipped"]["cases"], 0, s["skipped"])
        self.assertEqual(set(s["formats"]), {"paged", "contiguous", "block_packed", "content_packed", "x_packed",
                                             "kv_split", "k_only", "mla"})

    def test_numpy_convention_runs_kvfuzz_triton_clean(self):
        r = self.campaign("python-numpy:" + NUMPY_EXAMPLE + ":kv_append", "--config",
                          os.path.join(SRC, "configs", "interp.json"), "--cases", "40")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (40, 0))

    def test_naive_numpy_kernel_runs_clean(self):
        r = self.campaign("python-numpy:" + os.path.join(SRC, "examples", "python", "naive_copy.py") + ":kv_append",
                          "--config", COPY_PROFILE, "--cases", "200")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (200, 0))

    @unittest.skipUnless(python_has("torch"), "torch is not installed in KVFUZZ_PYTHON")
    def test_torch_convention_runs_kvfuzz_triton_api_clean(self):
        r = self.campaign("python:kvfuzz_triton.api:kv_append", "--config", os.path.join(SRC, "configs", "interp.json"),
                          "--cases", "40")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (40, 0))

    def test_fp8_hardware_path_passes_within_one_binade_and_fails_exactly(self):
        """triton-interp-fp8hw's default policy absorbs the interpreter's fp8 cast; exact does not."""
        quant = os.path.join(SRC, "configs", "interp-quant.json")
        r = self.campaign("triton-interp-fp8hw", "--config", quant, "--cases", "30")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("values checked exact,fp8_e4m3=ulp:8,fp8_e5m2=ulp:4", r.stderr)
        r = self.campaign("triton-interp-fp8hw", "--config", quant, "--cases", "30", "--tolerance", "exact",
                          "--max-shrink-tries", "0", "--confirm-runs", "0")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"wrong_value: .* max [1-8] ulp in fp8_e")

    def test_targets_says_what_the_interpreter_checks(self):
        r = self.kvfuzz("targets")
        self.assertEqual(r.returncode, 0, r.stderr)
        block = r.stdout[r.stdout.index("triton-interp-fp8hw\n"):]
        self.assertIn("default --tolerance: exact,fp8_e4m3=ulp:8,fp8_e5m2=ulp:4", block)
        self.assertIn("default --timeout: 600 s", block)
        plain = r.stdout[r.stdout.index("triton-interp\n"):r.stdout.index("triton-interp-fp8hw\n")]
        self.assertIn("FP8_SOFTWARE=1", plain)

    # --- findings --------------------------------------------------------------------------------

    def assert_goes_on(self, r, kind, text, cases):
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        passed, failed = summary(r.stdout)
        self.assertEqual(passed + failed, cases)
        self.assertGreater(passed, 0)  # cases after the first failure ran, on a new worker
        self.assertGreater(failed, 0)
        kinds = set(re.findall(r"^kvfuzz: FAIL case #\d+ on \S+ -> (\w+)$", r.stdout, re.M))
        self.assertEqual(kinds, {kind}, r.stdout)
        self.assertIn(f"  {kind}: ", r.stdout)
        self.assertIn(text, r.stdout)

    def faulty_campaign(self, function, cases=24):
        return self.campaign(f"python-numpy:{FAULTY}:{function}", "--config", COPY_PROFILE, "--cases", str(cases),
                             "--keep-going", "--confirm-runs", "1", "--max-shrink-tries", "5")

    def test_python_exception_is_a_launch_error_with_the_traceback_last_line(self):
        r = self.faulty_campaign("raises")
        self.assert_goes_on(r, "launch_error", "ValueError: deliberate failure for this slot count (at faulty.py:", 24)

    def test_worker_exit_is_a_crash_and_the_campaign_goes_on(self):
        r = self.faulty_campaign("exits")
        self.assert_goes_on(r, "crash", "the Python worker exited with status 3 while running the case", 24)

    def test_worker_segfault_is_a_crash_and_the_campaign_goes_on(self):
        r = self.faulty_campaign("segfaults")
        self.assert_goes_on(r, "crash", "the Python worker was killed by signal 11", 24)

    def test_a_buggy_python_kernel_is_caught(self):
        r = self.campaign(f"python-numpy:{FAULTY}:skips_padding_check", "--config", COPY_PROFILE, "--cases", "60")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"FAIL case #\d+ on \S+ -> padding_leak")

    def test_a_mutated_copy_of_kvfuzz_triton_is_caught_through_KVFUZZ_TRITON_PKG(self):
        pkg = os.path.join(self.tmp, "triton-copy")
        shutil.copytree(os.path.join(SRC, "kernels", "triton"), pkg, ignore=shutil.ignore_patterns("__pycache__"))
        source = os.path.join(pkg, "kvfuzz_triton", "kv_append.py")
        text = open(source).read()
        site = "write = slot >= 0"
        self.assertEqual(text.count(site), 1, "mutation site moved: update this test")
        open(source, "w").write(text.replace(site, "write = slot >= -1"))  # padding slot -1 written
        env = {"KVFUZZ_TRITON_PKG": pkg}
        r = self.campaign("triton-interp", "--config", os.path.join(SRC, "configs", "interp.json"), "--cases", "60", env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        # The padding row lands at slot -1: block -1 of the cache, in the guard band before it or in
        # whatever precedes it, depending on the strides.
        self.assertRegex(r.stdout, r"FAIL case #\d+ on \S+ -> (oob_write|padding_leak|stray_write|cross_request_write)")

    # --- declared capabilities --------------------------------------------------------------------

    def test_declared_capabilities_keep_every_case_inside_and_skips_are_counted(self):
        """examples/python/paged_nhd_f16.py declares paged NHD and f16 only (kv_append.kvfuzz_capabilities)
        and raises for anything else: a campaign on a profile of every layout and dtype stays clean."""
        summary_file = os.path.join(self.tmp, "s.json")
        r = self.campaign("python-numpy:" + os.path.join(SRC, "examples", "python", "paged_nhd_f16.py") + ":kv_append",
                          "--config", COPY_PROFILE, "--cases", "80", "--json", summary_file)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (80, 0))
        with open(summary_file) as f:
            skipped = json.load(f)["skipped"]
        for reason in ("layout paged_hnd", "layout contiguous_bshd", "layout packed_kv_nhd", "input dtype bf16",
                       "input dtype f32"):
            self.assertGreater(skipped["reasons"].get(reason, 0), 0, skipped)
        self.assertEqual(skipped["replaced"], skipped["cases"])
        self.assertRegex(r.stdout, rf"kvfuzz: skipped {skipped['cases']} cases outside the target's capabilities \(.*"
                                   r"layout paged_hnd: \d+")

    def test_vllm_legacy_and_the_families_reach_only_functions_whose_declaration_lists_them(self):
        """kv_append_numpy.py lists every layout and family and gets vllm_legacy (5-D K, 4-D V views) and
        kv_split, k_only and mla (their calling conventions, docs/targets.md), bit-exact; a function that
        declares neither never does: those cases are skipped, counted and replaced."""
        formats = os.path.join(SRC, "configs", "formats.json")
        summary_file = os.path.join(self.tmp, "s.json")
        r = self.campaign("python-numpy:" + NUMPY_EXAMPLE + ":kv_append", "--config", formats, "--cases", "30",
                          "--stats", "--json", summary_file)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (30, 0))
        with open(summary_file) as f:
            s = json.load(f)
        # Nothing is skipped: every layout and family runs, and is counted under its format.
        self.assertEqual(s["skipped"]["cases"], 0, s["skipped"])
        self.assertGreater(s["stats"].get("layout=vllm_legacy", 0), 0, s["stats"])
        for family in ("kv_split", "k_only", "mla"):
            self.assertGreater(s["formats"].get(family, 0), 0, s["formats"])
        violations = os.path.join(self.tmp, "violations.txt")
        r = self.campaign(f"python-numpy:{DECLARED}:triton_without_layouts", "--config", formats, "--cases", "30",
                          "--stats", "--json", summary_file, env={"KVFUZZ_TEST_VIOLATIONS": violations})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertFalse(os.path.exists(violations), open(violations).read() if os.path.exists(violations) else "")
        with open(summary_file) as f:
            s = json.load(f)
        self.assertGreater(s["skipped"]["reasons"].get("layout vllm_legacy", 0), 0, s["skipped"])
        self.assertEqual(s["stats"].get("layout=vllm_legacy", 0), 0, s["stats"])
        self.assertGreater(sum(n for k, n in s["skipped"]["reasons"].items() if k.startswith("family ")), 0, s["skipped"])
        self.assertEqual({k for k in s["formats"]} & {"kv_split", "k_only", "mla"}, set(), s["formats"])

    def test_context_parallel_shards_reach_only_functions_whose_declaration_lists_slot_mapping(self):
        """configs/interp-cp.json shards every case, half with input positions. kv_append_numpy.py declares
        cp_inputs none and slot_mapping: it is called once per rank with kvfuzz's slot mappings, bit-exact,
        and the positions cases (which it does not declare) are skipped, counted and replaced; a
        function that declares no cp_inputs gets no shards at all."""
        profile = os.path.join(SRC, "configs", "interp-cp.json")
        summary_file = os.path.join(self.tmp, "s.json")
        r = self.campaign("python-numpy:" + NUMPY_EXAMPLE + ":kv_append", "--config", profile, "--cases", "30",
                          "--json", summary_file)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (30, 0))
        with open(summary_file) as f:
            skipped = json.load(f)["skipped"]
        self.assertEqual(set(skipped["reasons"]), {"context-parallel input positions"}, skipped)
        self.assertEqual(skipped["replaced"], skipped["cases"])
        self.assertGreater(skipped["cases"], 0)
        self.assertLess(skipped["cases"], 30)  # drawn with input slot_mapping; the replacements are too
        r = self.campaign(f"python-numpy:{DECLARED}:triton_without_layouts", "--config", profile, "--cases", "30",
                          "--json", summary_file)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(summary_file) as f:
            skipped = json.load(f)["skipped"]
        self.assertEqual(skipped["cases"], 30, skipped)  # every case drawn sharded, every one replaced unsharded
        self.assertGreater(skipped["reasons"].get("context-parallel input slot_mapping", 0), 0, skipped)
        self.assertGreater(skipped["reasons"].get("context-parallel input positions", 0), 0, skipped)

    # --- the serving conventions and quantised formats ----------------------------------------------

    def serving_campaign(self, target, cases, *args, profile=SERVING_PROFILE):
        summary_file = os.path.join(self.tmp, "s.json")
        r = self.campaign(target, "--config", profile, "--cases", str(cases), "--json", summary_file,
                          "--max-shrink-tries", "20", *args)
        with open(summary_file) as f:
            return r, json.load(f)

    def assert_caught(self, target, kind, text=""):
        r, _ = self.serving_campaign(target, 60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, rf"(?m)^kvfuzz: FAIL case #\d+ on \S+ -> {kind}$")
        self.assertIn(text, r.stdout)

    def test_csr_convention_reaches_a_flashinfer_style_append_and_catches_its_off_by_one(self):
        """csr_append.py declares addressings ["csr"]: it gets CSR cases only, slot_mapping None and the
        five int32 arrays as keywords; the variant that misreads kv_last_page_len drops each request's
        last token."""
        r, s = self.serving_campaign(f"python-numpy:{EXAMPLES}/csr_append.py:append_paged_kv_cache", 100)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (100, 0))
        self.assertEqual(set(s["skipped"]["reasons"]), {"addressing slot_mapping"}, s["skipped"])
        self.assert_caught(f"python-numpy:{BUGGY}:csr_last_page_len_off_by_one", "missing_write")

    def test_request_structure_reaches_an_lmdeploy_style_fill_and_catches_contiguous_rows(self):
        """fill_kv_cache.py declares inputs ["requests"] and writes from batch_indices, positions and
        block_tables alone; the variant that takes a request's rows to be contiguous and at consecutive
        positions (LMDeploy's q_start_loc) is caught (scattered positions put a row at the wrong
        position, padding between rows onto the wrong request's table), and one that writes its
        block_tables is told so."""
        r, s = self.serving_campaign(f"python-numpy:{EXAMPLES}/fill_kv_cache.py:fill_kv_cache", 100)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (100, 0))
        self.assert_caught(f"python-numpy:{BUGGY}:fill_kv_cache_contiguous_rows", r"\w+_write")
        self.assert_caught(f"python-numpy:{BUGGY}:writes_its_block_tables", "launch_error",
                           "the function wrote its read-only input block_tables[")
        # `kvfuzz targets` names the optional inputs the function declared, beside its capabilities.
        t = self.kvfuzz("targets", f"python-numpy:{EXAMPLES}/fill_kv_cache.py:fill_kv_cache", "--json")
        self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
        [entry] = json.loads(t.stdout)["targets"]
        self.assertEqual(entry["inputs"], ["requests"])
        self.assertEqual(entry["capabilities"]["layouts"], ["paged_nhd", "paged_hnd"])
        plain = self.kvfuzz("targets", f"python-numpy:{EXAMPLES}/csr_append.py:append_paged_kv_cache", "--json")
        self.assertNotIn("inputs", json.loads(plain.stdout)["targets"][0])
        self.assertEqual(json.loads(plain.stdout)["targets"][0]["capabilities"]["addressings"], ["csr"])

    def test_ring_and_context_parallel_positions_reach_a_function_that_declares_them(self):
        """ring_cp_append.py declares windows and cp_inputs ["none", "positions"]: no positions case is
        skipped, and the variants that ignore window_positions or cp_positions are caught."""
        r, s = self.serving_campaign(f"python-numpy:{EXAMPLES}/ring_cp_append.py:kv_append", 100, "--stats")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (100, 0))
        reasons = s["skipped"]["reasons"]
        self.assertNotIn("window input positions", reasons)
        self.assertNotIn("context-parallel input positions", reasons)
        self.assertGreater(reasons.get("window input slot_mapping", 0), 0, reasons)
        self.assertGreater(reasons.get("context-parallel input slot_mapping", 0), 0, reasons)
        self.assert_caught(f"python-numpy:{BUGGY}:ring_ignores_window", "wrong_value")
        self.assert_caught(f"python-numpy:{BUGGY}:cp_ignores_rank", "stray_write")

    def test_quantised_formats_reach_a_function_that_declares_them(self):
        """quant_formats_numpy.py declares the ten formats (and no classic cache) and runs kvfuzz_triton's
        format kernel on format_cache, format_scales and format_fields, bit-exact;
        python_kernels/format_views.py checks that every typed view in format_views is where its field
        says."""
        r, s = self.serving_campaign(f"python-numpy:{KERNELS}/format_views.py:kv_append", 40, "--stats",
                                     profile=os.path.join(SRC, "configs", "interp-quant-formats.json"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(summary(r.stdout), (40, 0))
        formats = {k.split("=")[1] for k in s["stats"] if k.startswith("quant_format=")}
        self.assertGreaterEqual(len(formats), 8, s["stats"])

    def test_a_companion_function_declares_a_head_dim_set_honoured_while_shrinking_and_replaying(self):
        violations = os.path.join(self.tmp, "violations.txt")
        found = os.path.join(self.tmp, "found")
        target = f"python-numpy:{DECLARED}:head_dims_64_128"
        env = {"KVFUZZ_TEST_VIOLATIONS": violations}
        r = self.campaign(target, "--config", COPY_PROFILE, "--cases", "120", "--max-shrink-tries", "60", env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("two or more heads are not implemented", r.stdout)
        self.assertRegex(r.stdout, r"shrunk: [1-9]\d* steps")
        self.assertFalse(os.path.exists(violations), open(violations).read() if os.path.exists(violations) else "")
        with open(os.path.join(found, [f for f in os.listdir(found) if f.endswith(".json")][0])) as f:
            case = json.load(f)
        self.assertEqual((case["cache"]["layout"], case["shape"]["input_dtype"]), ("paged_nhd", "f16"))
        self.assertIn(case["shape"]["head_dim"], (64, 128))
        cases = os.path.join(self.tmp, "cases")
        self.assertEqual(self.kvfuzz("generate", "--config", COPY_PROFILE, "--seed", "2", "--cases", "20", "-o", cases).returncode, 0)
        r = self.kvfuzz("replay", cases, "--target", target, env=env)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"kvfuzz: skipped \d+ case files outside the target's capabilities \(.*head_dim not in "
                                   r"\{64, 128\}: \d+")
        self.assertFalse(os.path.exists(violations), open(violations).read() if os.path.exists(violations) else "")

    def test_bad_capability_declarations_are_bad_input_naming_the_key(self):
        run = ("run", "--cases", "1", "--corpus-out", os.path.join(self.tmp, "x"))
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:bad_layout"), 2,
                            'bad_layout.kvfuzz_capabilities: at /layouts/0: "nhd" is not one of a list of layout names '
                            "(paged_nhd, paged_hnd, contiguous_bshd, contiguous_bhsd, packed_kv_nhd, packed_content_hnd, vllm_legacy)")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:bad_head_dims"), 2,
                            'bad_head_dims.kvfuzz_capabilities: at /head_dims/1: "128" is not in a non-empty list of head dims')
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:not_a_dict"), 2,
                            "not_a_dict_capabilities() is a list, expected a dict")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:raises_in_capabilities"), 2,
                            "raises_in_capabilities_capabilities() raised RuntimeError: no capabilities today")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:declared_twice"), 2,
                            "both declared_twice.kvfuzz_capabilities and declared_twice_capabilities() declare capabilities")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:bad_inputs"), 2,
                            'bad_inputs.kvfuzz_capabilities: at /inputs/0: "request" is not one of a list of the optional '
                            'inputs a Python function takes: "requests"')
        misspelt = self.kvfuzz(*run, "--target", f"python-numpy:{DECLARED}:misspelt_key")  # one run, two parts of its message
        self.assert_refused(misspelt, 2, 'at /input: unknown key "input"; the keys are layouts,')
        self.assert_refused(misspelt, 2, ", and (Python functions only) inputs")

    # --- refusals ---------------------------------------------------------------------------------

    def assert_refused(self, r, code, text):
        self.assertEqual(r.returncode, code, r.stdout + r.stderr)
        self.assertIn(text, r.stderr)

    def test_bad_module_or_function_is_bad_input(self):
        run = ("run", "--cases", "1", "--corpus-out", os.path.join(self.tmp, "x"))
        self.assert_refused(self.kvfuzz(*run, "--target", "python-numpy:no_such_module_xyz:fn"), 2,
                            "no module named 'no_such_module_xyz' on the Python path")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{FAULTY}:no_such_function"), 2,
                            "has no attribute 'no_such_function'")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{FAULTY}:NOT_A_FUNCTION"), 2,
                            "is a int, not a function")
        self.assert_refused(self.kvfuzz(*run, "--target", f"python-numpy:{self.tmp}/missing.py:fn"), 2,
                            "no such Python file")
        self.assert_refused(self.kvfuzz(*run, "--target", "python-numpy:just_a_module"), 2,
                            "expected python-numpy:MODULE:FUNCTION")
        self.assert_refused(self.kvfuzz(*run, "--target", "python:"), 2, "needs an argument")

    def test_a_missing_interpreter_or_package_is_unavailable(self):
        run = ("run", "--cases", "1", "--corpus-out", os.path.join(self.tmp, "x"))
        self.assert_refused(self.kvfuzz(*run, "--target", "triton-interp", env={"KVFUZZ_PYTHON": "/nonexistent/python"}), 3,
                            'no Python interpreter "/nonexistent/python"')
        self.assert_refused(self.kvfuzz(*run, "--target", "triton-interp", "--python", "/nonexistent/python2"), 3,
                            'no Python interpreter "/nonexistent/python2"')
        self.assert_refused(self.kvfuzz(*run, "--target", "triton-interp", env={"KVFUZZ_TRITON_PKG": self.tmp}), 3,
                            "cannot import kvfuzz_triton from " + self.tmp)
        if not python_has("torch"):
            self.assert_refused(self.kvfuzz(*run, "--target", "python:kvfuzz_triton.api:kv_append"), 3, "has no torch")
            self.assert_refused(self.kvfuzz(*run, "--target", "python-cuda:kvfuzz_triton.api:kv_append"), 3, "has no torch")


if __name__ == "__main__":
    unittest.main()
