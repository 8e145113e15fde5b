"""Slot placement end to end (run by ctest as e2e.placement, defined in tests/mutants/CMakeLists.txt
next to the mutant plugins it uses): a case with scattered positions, a hole and a shared prefix
block replays on cuda-emu; a kernel that writes into a hole is caught as a stray_write naming the
hole; one that writes into the shared block is a cross_request_write naming every owner; the
validator refuses bad placements with their JSON paths.

    KVFUZZ_BIN=build/kvfuzz \\
    KVFUZZ_SLOT_RUN_PLUGIN=build/tests/mutants/kvfuzz-mutant-plugin-slot-run-assumed.so \\
    KVFUZZ_OFF_BY_ONE_PLUGIN=build/tests/mutants/kvfuzz-mutant-plugin-block-boundary-off-by-one.so \\
    python3 -m unittest -v test_placement        # from tests/e2e
"""
import copy
import json
import os
import pathlib
import subprocess
import tempfile
import unittest

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
SLOT_RUN = os.environ.get("KVFUZZ_SLOT_RUN_PLUGIN", "")
OFF_BY_ONE = os.environ.get("KVFUZZ_OFF_BY_ONE_PLUGIN", "")
ENV = dict(os.environ, CI="1")

# 4 blocks of 4 slots, 1 head x 4 dims, f16. Request 0: context 4 (block 2), new tokens at positions
# 5 and 7 of its block 0 (slots 1 and 3), leaving holes at positions 4 and 6 (slots 0 and 2).
# Request 1: the same prefix block 2 (shared), one new token at position 4 (block 3, slot 12).
# Block 1 is free.
CASE = {
    "schema": "kvfuzz-case",
    "version": 2,  # positions and shared blocks are version-2 content
    "shape": {"num_heads": 1, "head_dim": 4, "num_q_heads": 0,
              "input_dtype": "f16", "cache_dtype": "f16", "slot_dtype": "i64"},
    "cache": {"layout": "paged_nhd", "num_blocks": 4, "block_size": 4,
              "stride_block": 16, "stride_pos": 4, "stride_head": 4,
              "k_offset": 0, "v_offset": 64, "buffer_elems": 128},
    "quant": {"scale_kind": "none", "scale_dist": "unit",
              "scale_cache": {"stride_block": 0, "stride_pos": 0, "stride_head": 0},
              "scale_k_offset": 0, "scale_v_offset": 0, "scale_cache_elems": 0},
    "input": {"num_rows": 3, "buffer_elems": 24,
              "key": {"offset": 0, "stride_token": 4, "stride_head": 4},
              "value": {"offset": 12, "stride_token": 4, "stride_head": 4}},
    "slot_mapping": [1, 3, 12],
    "requests": [
        {"context_len": 4, "new_len": 2, "blocks": [2, 0], "positions": [5, 7]},
        {"context_len": 4, "new_len": 1, "blocks": [2, 3]},
    ],
    "payload": {"dist": "finite", "seed": "7"},
    "expect": {"outcome": "pass"},
    "provenance": {"seed": "", "case_index": -1, "tool_version": "", "command_line": "", "target": ""},
}


def run(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300, env=ENV)


class Placement(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = pathlib.Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, case, name="case.json"):
        path = self.d / name
        path.write_text(json.dumps(case, indent=2) + "\n")
        return path

    def replay(self, case, *args):
        summary = self.d / "summary.json"
        p = run("replay", self.write(case), "--json", summary, *args)
        return p, (json.loads(summary.read_text()) if summary.exists() else None)

    def test_a_scattered_case_with_a_hole_and_a_shared_block_replays_and_passes(self):
        p, s = self.replay(CASE, "--target", "cuda-emu")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(s["passed"], 1)

    @unittest.skipUnless(SLOT_RUN, "KVFUZZ_SLOT_RUN_PLUGIN not set")
    def test_a_write_into_a_hole_is_a_stray_write_that_names_the_hole(self):
        # slot-run-assumed writes row 1 (slot 3, same block as row 0's slot 1) at slot 2: the hole
        # at position 6.
        p, s = self.replay(CASE, "--target", f"plugin:{SLOT_RUN}")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        first = s["items"][0]["findings"][0]
        self.assertEqual(first["kind"], "stray_write", first)
        self.assertIn("request 0's holes", first["sentence"])
        self.assertIn("position 6", first["sentence"])

    @unittest.skipUnless(OFF_BY_ONE, "KVFUZZ_OFF_BY_ONE_PLUGIN not set")
    def test_a_write_into_a_shared_prefix_block_is_cross_request_and_names_every_owner(self):
        # block-boundary-off-by-one computes slot 12's block from slot 11: block 2, the shared one.
        p, s = self.replay(CASE, "--target", f"plugin:{OFF_BY_ONE}")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        first = s["items"][0]["findings"][0]
        self.assertEqual(first["kind"], "cross_request_write", first)
        self.assertIn("prefix block 2 shared by requests 0 and 1", first["sentence"])
        self.assertEqual(first["victim_requests"], [0, 1])

    def test_bad_placements_are_refused_with_their_json_path(self):
        def refused(change, path, words):
            c = copy.deepcopy(CASE)
            change(c)
            p = run("replay", self.write(c, "bad.json"), "--target", "cuda-emu")
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(path, p.stderr)
            self.assertIn(words, p.stderr)

        refused(lambda c: c["requests"][0].update(positions=[3, 7]), "/requests/0/positions/0", "earlier context")
        refused(lambda c: c["requests"][0].update(positions=[5, 8]), "/requests/0/positions/1", "beyond the block table")
        refused(lambda c: c["requests"][0].update(positions=[5, 5]), "/requests/0/positions/1", "appears twice")
        refused(lambda c: c["requests"][0].update(positions=[5]), "/requests/0/positions", "expected 2 positions")
        refused(lambda c: c["requests"][0].update(positions=[7, 5]), "/slot_mapping/0", "order of their rows")
        refused(lambda c: c.update(slot_mapping=[1, 2, 12]), "/slot_mapping/1", "a hole")

        def unshare(c):  # request 1 holds block 2 as its second block, with context 4: not full context
            c["requests"][1].update(context_len=4, blocks=[3, 2])
            c["slot_mapping"] = [1, 3, 8]
        refused(unshare, "/requests/1/blocks/1", "not entirely context of request 1")


if __name__ == "__main__":
    unittest.main()
