"""report.html in a real headless browser (ctest label "browser"; run by e2e.report_browser).

Chromium (Debian's `chromium`, installed by scripts/setup.sh) loads each report from a file:// URL
with the network unreachable, runs its script and dumps the DOM; the test requires that the page
rendered (<body data-rendered="ok">, no script error, no console error), that the damaged cells and
their decoded writers are in the DOM, and that a screenshot shows the map (its red marks among
many colours). Skipped when no chromium is installed.

  KVFUZZ_BIN=build/kvfuzz python3 -m unittest -v tests/e2e/test_report_browser.py
"""
import os
import pathlib
import re
import shutil
import struct
import subprocess
import tempfile
import unittest
import zlib

BIN = os.environ.get("KVFUZZ_BIN", "kvfuzz")
SRC = pathlib.Path(os.environ.get("KVFUZZ_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
EXAMPLES = SRC / "reports" / "examples"
CHROMIUM = os.environ.get("KVFUZZ_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser") \
    or shutil.which("google-chrome")


def chromium(*args, timeout=120):
    """Runs headless chromium with no network and a throwaway profile; returns (stdout, stderr)."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
               "--hide-scrollbars", f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.stdout, p.stderr


def console_errors(stderr):
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line and re.search(r"Uncaught|Error|Refused", line)]


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)."""
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


@unittest.skipUnless(CHROMIUM, "no chromium installed (scripts/setup.sh installs it)")
class ReportInBrowser(unittest.TestCase):
    def reports(self):
        """The committed example reports, and a fresh report of a passing corpus case."""
        out = [p / "report.html" for p in sorted(EXAMPLES.iterdir()) if (p / "report.html").is_file()] \
            if EXAMPLES.is_dir() else []
        self.assertGreaterEqual(len(out), 3, "reports/examples/ must hold at least three reports")
        return out

    def test_failing_reports_render_with_their_cells_and_writers_in_the_dom(self):
        for html in self.reports():
            with self.subTest(report=html.parent.name):
                dom, err = chromium("--dump-dom", html.resolve().as_uri())
                self.assertTrue('<body data-rendered="ok"' in dom, "the page's script did not finish")
                self.assertIsNone(re.search(r"<html[^>]*data-js-error", dom), "a script error was recorded")
                self.assertEqual(console_errors(err), [])
                marks = re.findall(r'<g class="(?:[^"]* )?corrupt[^"]*"[^>]*data-info="([^"]*)"', dom)
                self.assertGreater(len(marks), 0, "no damaged cell is marked on the map")
                self.assertTrue(any("written by:" in m or "bytes overwritten" in m for m in marks), marks[:3])
                if 'id="damage"' in dom:  # damaged cache cells: their decoded values are in the DOM
                    self.assertTrue(re.search(r"found +0x[0-9a-f]+ = ", dom), "no decoded value in the DOM")
                self.assertTrue('id="victim-writer"' in dom, "no victim x writer matrix")

    def test_a_fresh_passing_report_renders(self):
        case = sorted((SRC / "corpus").glob("*.json"))[0]
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([BIN, "report", str(case), "-o", d], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            dom, err = chromium("--dump-dom", (pathlib.Path(d) / "report.html").as_uri())
            self.assertTrue('<body data-rendered="ok"' in dom, "the page's script did not finish")
            self.assertEqual(console_errors(err), [])
            self.assertTrue('class="blk"' in dom, "no block drawn")

    def test_screenshot_shows_the_map(self):
        html = next(h for h in self.reports() if "cross-request" in h.parent.name)
        with tempfile.TemporaryDirectory() as d:
            shot = pathlib.Path(d) / "report.png"
            chromium(f"--screenshot={shot}", "--window-size=1400,1400", html.resolve().as_uri())
            self.assertTrue(shot.is_file(), "no screenshot written")
            width, height, rows = png_pixels(shot)
            self.assertEqual((width, height), (1400, 1400))
            colours = {px for row in rows[::4] for px in row[::4]}
            self.assertGreater(len(colours), 40, "the screenshot looks blank")
            def near(px, want, tol):
                return all(abs(a - b) <= tol for a, b in zip(px, want))
            # The map's blocks in request 0's context colour, hsl(210,62%,72%) (a legend swatch has 196 pixels),
            # and its damage marks' red outline (#dc2626).
            owner = sum(1 for row in rows for px in row if near(px, (139, 184, 228), 4))
            red = sum(1 for row in rows for px in row if near(px, (220, 38, 38), 14))
            self.assertGreater(owner, 600, "request 0's blocks are not visible in the screenshot")
            self.assertGreater(red, 60, "no red damage marks visible in the screenshot")
            if os.environ.get("KVFUZZ_KEEP_SCREENSHOT"):
                shutil.copy(shot, os.environ["KVFUZZ_KEEP_SCREENSHOT"])


if __name__ == "__main__":
    unittest.main()
