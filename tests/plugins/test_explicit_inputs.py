"""Explicit input values in case files (issue 38): a hand-edited case replays, fails where its value
matters, shrinks keeping the value, and a file whose values or digest do not agree is refused.

    cd tests/plugins && KVFUZZ_BIN=... KVFUZZ_PLUGIN_DIR=... python3 -m unittest test_explicit_inputs -v
"""
import base64
import json
import pathlib
import tempfile
import unittest

from test_plugins import kvfuzz, plugin


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"fnv1a64:{h:016x}"


def set_key(case, element, bits):
    """Sets key element `element` of the explicit inputs to `bits` and rewrites the digest."""
    x = case["explicit_inputs"]
    width = 4 if case["shape"]["input_dtype"] == "f32" else 2
    key = bytearray(base64.b64decode(x["key"]))
    key[element * width:(element + 1) * width] = bits.to_bytes(width, "little")
    x["key"] = base64.b64encode(bytes(key)).decode()
    x["digest"] = fnv1a64(bytes(key) + base64.b64decode(x.get("value", "")))


class ExplicitInputs(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp())
        broken = plugin("broken-flush-subnormals.so")
        g = kvfuzz("generate", "--seed", 12, "--cases", 60, "-o", self.dir / "gen", "--explicit")
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        # A case the plugin takes and passes (no subnormal key among its seeded values).
        summary = self.dir / "s.json"
        r = kvfuzz("replay", self.dir / "gen", "--target", broken, "--json", summary)
        items = [i for i in json.loads(summary.read_text())["items"] if i["outcome"] == "pass"]
        self.assertTrue(items, r.stdout + r.stderr)
        self.file = pathlib.Path(items[0]["file"])
        self.case = json.loads(self.file.read_text())

    def write(self, case, name):
        path = self.dir / name
        path.write_text(json.dumps(case, indent=1))
        return path

    def test_a_hand_written_value_replays_fails_and_shrinks_keeping_it(self):
        set_key(self.case, 0, 0x0001)  # the smallest subnormal, head 0 dim 0 of the first listed row
        edited = self.write(self.case, "edited.json")
        ok = kvfuzz("replay", edited, "--target", plugin("naive.so"))
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)  # the value itself is fine
        bad = kvfuzz("replay", edited, "--target", plugin("broken-flush-subnormals.so"))
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn("wrong_value", bad.stdout)
        # The same case without the explicit value passes: the value is what the bug needs.
        del self.case["explicit_inputs"]
        seeded = self.write(self.case, "seeded.json")
        again = kvfuzz("replay", seeded, "--target", plugin("broken-flush-subnormals.so"))
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        # Shrinking keeps the explicit value, and its minimal case fails the same way.
        out = self.dir / "shrunk"
        s = kvfuzz("shrink", edited, "--target", plugin("broken-flush-subnormals.so"), "-o", out)
        self.assertEqual(s.returncode, 1, s.stdout + s.stderr)
        [minimal] = list(out.glob("*.json"))
        m = json.loads(minimal.read_text())
        self.assertIn("explicit_inputs", m)
        width = 4 if m["shape"]["input_dtype"] == "f32" else 2
        key = base64.b64decode(m["explicit_inputs"]["key"])
        self.assertIn((1).to_bytes(width, "little"), [key[i:i + width] for i in range(0, len(key), width)])
        self.assertLessEqual(sum(r["new_len"] for r in m["requests"]), sum(r["new_len"] for r in json.loads(edited.read_text())["requests"]))
        replay = kvfuzz("replay", minimal, "--target", plugin("broken-flush-subnormals.so"))
        self.assertEqual(replay.returncode, 1, replay.stdout + replay.stderr)

    def test_values_that_disagree_with_the_file_are_refused_with_their_path(self):
        x = self.case["explicit_inputs"]
        key = bytearray(base64.b64decode(x["key"]))
        key[0] ^= 1  # an edit without its digest
        x["key"] = base64.b64encode(bytes(key)).decode()
        for edit, path in [(lambda c: None, "/explicit_inputs/digest"),
                           (lambda c: c["explicit_inputs"].update(key="not base64!"), "/explicit_inputs/key"),
                           (lambda c: set_key(c, 0, 0xFFFF if c["shape"]["input_dtype"] != "f32" else 0xFFFFFFFF), "/explicit_inputs/key"),
                           (lambda c: c["explicit_inputs"].update(encoding="raw"), "/explicit_inputs/encoding"),
                           (lambda c: c["explicit_inputs"]["rows"].append(10 ** 6), "/explicit_inputs/rows/")]:
            case = json.loads(json.dumps(self.case))
            edit(case)
            r = kvfuzz("replay", self.write(case, "bad.json"))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(path, r.stderr, r.stderr)


if __name__ == "__main__":
    unittest.main()
