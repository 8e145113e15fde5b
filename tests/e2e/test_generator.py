"""End-to-end tests of the generator's layout features (issue 17, "the generator's blind spots").

Each test runs the real binary ($KVFUZZ_BIN): `kvfuzz generate` writes the cases a campaign checks,
and the tests read those files, so what is counted is what targets receive. Before kv_views, 0 of
3,000 default cases had K and V views with different strides, and gapped strides came only with odd
base offsets.

    KVFUZZ_BIN=build/kvfuzz python3 -m unittest -v tests/e2e/test_generator.py
"""
import json
import os
import pathlib
import subprocess
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


def kvfuzz(*args, timeout=600):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def generated(out, *args):
    """The cases `kvfuzz generate` writes for args, as parsed JSON."""
    p = kvfuzz("generate", *args, "-o", out)
    assert p.returncode == 0, p.stderr
    return [json.loads(f.read_text()) for f in sorted(pathlib.Path(out).glob("*.json"))]


def gapped_cache(case):
    """True when the innermost cache stride of an NHD or HND cache exceeds head_dim."""
    cache, d = case["cache"], case["shape"]["head_dim"]
    if case["cache"]["layout"] in ("paged_nhd", "contiguous_bshd"):
        return cache["stride_head"] > d
    if case["cache"]["layout"] in ("paged_hnd", "contiguous_bhsd"):
        return cache["stride_pos"] > d
    return False


class LayoutFeatures(unittest.TestCase):
    def test_default_cases_have_distinct_kv_views_and_gaps_with_aligned_bases(self):
        with tempfile.TemporaryDirectory() as d:
            cases = generated(d, "--seed", 1, "--cases", 400)
            self.assertEqual(len(cases), 400)
            key = [c["input"]["key"] for c in cases]
            value = [c["input"]["value"] for c in cases]
            token_differs = sum(k["stride_token"] != v["stride_token"] for k, v in zip(key, value))
            head_major = sum(v["stride_head"] > v["stride_token"] for v in value)
            gaps_aligned = sum(gapped_cache(c) and c["cache"]["k_offset"] == 0 for c in cases)
            odd_dense = sum(not gapped_cache(c) and c["cache"]["k_offset"] % 2 == 1 for c in cases)
            self.assertGreater(token_differs, 400 * 25 // 100)  # kv_views: 40% of cases distinct
            self.assertGreater(head_major, 400 // 50)
            self.assertGreater(gaps_aligned, 400 // 25)
            self.assertGreater(odd_dense, 400 // 25)
            # Every one of them is a valid case that the emulated CUDA kernel gets right.
            p = kvfuzz("replay", d, "--target", "cuda-emu")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 400 passed, 0 failed")

    def test_profile_keys_switch_the_features_off(self):
        profile = json.loads((SRC / "configs" / "default.json").read_text())
        profile.update(gapped_strides_percent=0, misaligned_bases_percent=100,
                       kv_views={"values": ["alike"], "weights": [1]})
        with tempfile.TemporaryDirectory() as d:
            config = pathlib.Path(d) / "profile.json"
            config.write_text(json.dumps(profile))
            cases = generated(pathlib.Path(d) / "cases", "--seed", 2, "--cases", 100, "--config", config)
            self.assertEqual(len(cases), 100)
            for c in cases:
                k, v = c["input"]["key"], c["input"]["value"]
                self.assertEqual((k["stride_token"], k["stride_head"]), (v["stride_token"], v["stride_head"]))
                self.assertFalse(gapped_cache(c))
                self.assertEqual(c["cache"]["k_offset"] % 2, 1)

    def test_a_profile_without_the_new_keys_still_loads_and_runs(self):
        profile = json.loads((SRC / "configs" / "default.json").read_text())
        for key in ("gapped_strides_percent", "misaligned_bases_percent", "kv_views"):
            del profile[key]
        with tempfile.TemporaryDirectory() as d:
            config = pathlib.Path(d) / "old.json"
            config.write_text(json.dumps(profile))
            p = kvfuzz("run", "--target", "cuda-emu", "--config", config, "--cases", 200, "--seed", 3,
                       "--corpus-out", pathlib.Path(d) / "findings")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(last_line(p.stdout), "kvfuzz: 200 passed, 0 failed")

    def test_a_bad_kv_views_name_is_refused_with_its_path(self):
        profile = json.loads((SRC / "configs" / "default.json").read_text())
        profile["kv_views"]["values"][3] = "value_transposed"
        with tempfile.TemporaryDirectory() as d:
            config = pathlib.Path(d) / "bad.json"
            config.write_text(json.dumps(profile))
            p = kvfuzz("run", "--target", "cuda-emu", "--config", config, "--cases", 1)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("/kv_views/values/3", p.stderr)
            self.assertIn("value_head_major", p.stderr)



class Formats(unittest.TestCase):
    def test_the_formats_profile_draws_every_layout_and_the_kernel_passes_it(self):
        # configs/formats.json: a partial profile over the default with every layout family, K/V
        # packed in the content dim and vLLM's x-packed legacy pair included; the summary counts
        # the cases of each.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--config", SRC / "configs" / "formats.json", "--cases", 400, "--seed", 7, "--stats",
                       "--json", summary)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            stats = json.loads(summary.read_text())["stats"]
            layouts = {k.split("=", 1)[1] for k, v in stats.items() if k.startswith("layout=") and v > 0}
            self.assertEqual(layouts, {"paged_nhd", "paged_hnd", "contiguous_bshd", "contiguous_bhsd", "packed_kv_nhd",
                                       "packed_content_hnd", "vllm_legacy"})
            cases = generated(pathlib.Path(d) / "g", "--config", SRC / "configs" / "formats.json", "--seed", 7,
                              "--cases", 400)
            packed = [c for c in cases if c["cache"]["layout"] == "packed_content_hnd"]
            self.assertGreater(len(packed), 0)
            for c in packed:  # V the second half of K's rows: offset D, rows 2D (plus gaps) apart
                D = c["shape"]["head_dim"]
                self.assertEqual(c["cache"]["v_offset"] - c["cache"]["k_offset"], D)
                self.assertGreaterEqual(c["cache"]["stride_pos"], 2 * D)

    def test_every_format_family_is_run_and_counted(self):
        # configs/formats.json draws the families (kv_split, k_only, mla) with the layouts; the run
        # summary's "formats" counts every checked case under exactly one format, and every one of
        # them is present.
        with tempfile.TemporaryDirectory() as d:
            summary = pathlib.Path(d) / "s.json"
            p = kvfuzz("run", "--target", "cuda-emu", "--config", SRC / "configs" / "formats.json", "--cases", 600,
                       "--seed", 7, "--json", summary)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            s = json.loads(summary.read_text())
            self.assertEqual(set(s["formats"]), {"paged", "contiguous", "block_packed", "content_packed", "x_packed",
                                                 "kv_split", "k_only", "mla"})
            self.assertEqual(sum(s["formats"].values()), s["cases"])
            cases = generated(pathlib.Path(d) / "g", "--config", SRC / "configs" / "formats.json", "--seed", 7,
                              "--cases", 600)
            by_family = {}
            for c in cases:
                by_family.setdefault(c.get("format", {}).get("family", "kv"), []).append(c)
            self.assertEqual(set(by_family), {"kv", "kv_split", "k_only", "mla"})
            for c in cases:  # the oldest version that expresses the case: 2 for a family (or placement)
                if "format" in c:
                    self.assertEqual(c["version"], 2)
                placed = any("positions" in r for r in c["requests"]) or "scattered_positions" in c.get("genotype", {}) \
                    or "shared_prefix_blocks" in c.get("genotype", {})
                if "format" not in c and not placed:
                    self.assertEqual(c["version"], 1)
            for c in by_family["mla"]:  # one head; kv_c ++ k_pe; no V
                self.assertEqual(c["shape"]["num_heads"], 1)
                self.assertLess(c["format"]["rope_dim"], c["shape"]["head_dim"])
                self.assertEqual(c["cache"]["v_offset"], 0)
            for c in by_family["kv_split"]:  # V after K, with its own strides
                self.assertGreater(c["cache"]["v_offset"], c["cache"]["k_offset"])
                self.assertIn("value_cache", c["format"])
            # Every generated case replays from its file (the v2 reader reads what the writer wrote).
            r = kvfuzz("replay", pathlib.Path(d) / "g", "--target", "cuda-emu")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
