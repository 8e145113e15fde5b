#!/usr/bin/env python3
"""CPU tests of bench/bench.py's non-GPU logic: arguments, cases, byte counts, cache addressing,
the quantised formats' codecs, decode check and ABI fields, the FlashInfer peer's CSR inputs and
argument struct, targets, rendering; bench/kernel_variant.py's rewrites of the current kernel. Run: python3
tests/bench/test_bench.py (ctest: bench.cpu). The place_rows tests need torch (CPU tensors), the
decode-check tests numpy (build/venv-triton/bin/python has it); each is skipped without them."""
import contextlib
import ctypes
import io
import itertools
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import numpy as np
except ImportError:
    np = None


def fake_results(cases, us):
    """Rows with graph_us = us[impl](case) for every case and impl."""
    rows = []
    for c in cases:
        for impl, f in us.items():
            rows.append({"impl": impl, "case": c.name, "group": c.group, "tokens": c.tokens,
                         "bytes_moved": c.bytes_moved(), "graph_us": f(c), "stream_us": f(c) + 2.0,
                         "host_us": 10.0, "verify": "ok"})
    return bench.summarise(rows)


class Args(unittest.TestCase):
    def parse_error(self, argv):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            bench.parse_args(argv)
        return e.exception.code

    def test_lib_specs(self):
        a = bench.parse_args(["--out", "x", "--cuda-lib", "cuda=a.so", "--cuda-lib", "v0@h8-d128=b.so"])
        self.assertEqual(a.cuda_lib, [("cuda", "", "a.so"), ("v0", "h8-d128", "b.so")])

    def test_bad_arguments_exit_2(self):
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "noequals"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "triton=a.so"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "a=1.so", "--cuda-lib", "a=2.so"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--tokens", "1,x"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--tokens", "0"]), 2)
        self.assertEqual(self.parse_error([]), 2)  # --out missing

    def test_peer_specs(self):
        a = bench.parse_args(["--out", "x", "--cuda-lib", "cuda=a.so", "--peer", "flashinfer=fi.so"])
        self.assertEqual(a.peer, [("flashinfer", "fi.so")])
        self.assertEqual(bench.parse_args(["--out", "x"]).peer, [])

    def test_bad_peers_exit_2(self):
        self.assertEqual(self.parse_error(["--out", "x", "--peer", "flashinfer"]), 2)  # no PATH
        self.assertEqual(self.parse_error(["--out", "x", "--peer", "nosuchlib=a.so"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--peer", "flashinfer=a.so", "--peer", "flashinfer=b.so"]), 2)
        self.assertEqual(self.parse_error(["--out", "x", "--cuda-lib", "flashinfer=a.so"]), 2)  # a peer's row name

    def test_existing_output_is_not_overwritten(self):
        with tempfile.TemporaryDirectory() as d:
            (pathlib.Path(d) / "bench.md").write_text("mine")
            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(bench.main(["--out", d]), 2)
            self.assertEqual((pathlib.Path(d) / "bench.md").read_text(), "mine")


class Cases(unittest.TestCase):
    def test_case_grid(self):
        cases = bench.all_cases()
        self.assertEqual(len(cases), 2 * (3 + 2) * 5 + 2 * 5 + 2 * 5 + 2 * 5)  # paged, vllm_legacy, mla, quantised
        self.assertEqual(len({c.name for c in cases}), len(cases))
        self.assertEqual([c.name for c in bench.select_cases(cases, ["hnd+fp8-per-tensor+t65536"])],
                         ["hnd-fp8-per-tensor-h8-d128-t65536"])
        self.assertEqual(cases[0].name, "nhd-bf16-h8-d128-t1")  # the issue's main shape first

    def test_new_format_groups(self):
        groups = sorted({c.group for c in bench.all_cases() if c.layout == "vllm_legacy" or c.family == "mla"})
        self.assertEqual(groups, ["mla-bf16-h1-d576", "mla-fp8-per-tensor-h1-d576",
                                  "vllm_legacy-bf16-h8-d128", "vllm_legacy-fp8-per-tensor-h8-d128"])

    def test_commas_select_alternatives(self):
        cases = bench.all_cases()
        got = bench.select_cases(cases, ["vllm_legacy,mla"])
        self.assertEqual(len(got), 20)
        self.assertTrue(all(c.layout == "vllm_legacy" or c.family == "mla" for c in got))
        got = bench.select_cases(cases, ["nhd-bf16-h8-d128,hnd-bf16-h8-d128", "mla+fp8+t16"])
        self.assertEqual({c.group for c in got}, {"nhd-bf16-h8-d128", "hnd-bf16-h8-d128", "mla-fp8-per-tensor-h1-d576"})
        self.assertEqual(len(got), 11)

    def test_list_shows_the_new_cases_without_a_gpu(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(bench.main(["--list", "--cases", "vllm_legacy,mla", "--tokens", "16"]), 0)
        self.assertEqual(out.getvalue().splitlines(), [
            "vllm_legacy-bf16-h8-d128-t16  0.131 MB", "vllm_legacy-fp8-per-tensor-h8-d128-t16  0.098 MB",
            "mla-bf16-h1-d576-t16  0.037 MB", "mla-fp8-per-tensor-h1-d576-t16  0.028 MB"])

    def test_only_paged_kv_cases_go_to_triton(self):
        support = {c.group: c.triton_supported() for c in bench.all_cases((16,))}
        self.assertTrue(support["nhd-bf16-h8-d128"] and support["hnd-fp8-per-token-head-h8-d128"])
        self.assertFalse(support["vllm_legacy-bf16-h8-d128"] or support["mla-bf16-h1-d576"])

    def test_bytes_match_the_baseline_method(self):
        # research/baseline-h200.md: 65536 x 8 x 128 bf16 moves 536.871 MB of K+V plus 8 B of slot per token.
        c = bench.Case("nhd", "bf16", "none", 8, 128, 65536)
        self.assertEqual(c.bytes_moved(), 65536 * (2 * 1024 * 2 * 2 + 8))
        fp8 = bench.Case("nhd", "fp8_e4m3", "per_tensor", 8, 128, 1)
        self.assertEqual(fp8.bytes_moved(), 2 * 1024 * 2 + 2 * 1024 + 8)
        pth = bench.Case("hnd", "fp8_e4m3", "per_token_head", 8, 128, 1)
        self.assertEqual(pth.bytes_moved(), 2 * 1024 * 2 + 2 * 1024 + 8 + 2 * 8 * 4)
        self.assertEqual(c.copy_bytes() % 16, 0)
        self.assertGreaterEqual(2 * c.copy_bytes(), c.bytes_moved())

    def test_x_packed_moves_the_bytes_of_nhd(self):
        for dtype, scale in (("bf16", "none"), ("fp8_e4m3", "per_tensor")):
            legacy = bench.Case("vllm_legacy", dtype, scale, 8, 128, 4096)
            nhd = bench.Case("nhd", dtype, scale, 8, 128, 4096)
            self.assertEqual(legacy.bytes_moved(), nhd.bytes_moved())
            self.assertEqual(legacy.copy_bytes(), nhd.copy_bytes())

    def test_mla_moves_one_entry_per_token(self):
        # kv_c 512 + k_pe 64 bf16 read, one 576-dim entry written, no V; 8 B of slot.
        bf16 = bench.Case("nhd", "bf16", "none", 1, 576, 65536, family="mla")
        self.assertEqual(bf16.bytes_moved(), 65536 * (576 * 2 + 576 * 2 + 8))
        self.assertEqual(bf16.copy_bytes(), 65536 * (576 * 2 + 4))
        fp8 = bench.Case("nhd", "fp8_e4m3", "per_tensor", 1, 576, 1, family="mla")
        self.assertEqual(fp8.bytes_moved(), 576 * 2 + 576 + 8)
        self.assertEqual(fp8.copy_bytes(), 880)  # 868 rounded up to 16 B
        self.assertEqual(bf16.forms(), {"k_cache": "latent"})
        self.assertEqual(bf16.cache_shape("k_cache"), (8192, 16, 576))
        self.assertFalse(bf16.has_value)
        self.assertEqual(bf16.rope_dim, 64)


class QuantisedFormats(unittest.TestCase):
    def test_cases_are_named_like_the_others_and_selectable(self):
        cases = bench.all_cases()
        groups = [c.group for c in cases if c.quant]
        self.assertEqual(sorted(set(groups)), ["nhd-mxfp8-e4m3-h8-d128", "nhd-nvfp4-h8-d128"])
        got = bench.select_cases(cases, ["nvfp4,mxfp8"])
        self.assertEqual([c.name for c in got if c.tokens == 256], ["nhd-nvfp4-h8-d128-t256", "nhd-mxfp8-e4m3-h8-d128-t256"])
        self.assertEqual(sorted(c.tokens for c in got), sorted(2 * bench.TOKENS))
        self.assertTrue(all(c.triton_supported() and c.layout == "nhd" for c in got))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(bench.main(["--list", "--cases", "nvfp4,mxfp8", "--tokens", "16"]), 0)
        self.assertEqual(out.getvalue().splitlines(), ["nhd-nvfp4-h8-d128-t16  0.084 MB",
                                                       "nhd-mxfp8-e4m3-h8-d128-t16  0.099 MB"])

    def test_bytes_are_inputs_read_codes_and_scales_written_and_slots(self):
        # Per (token, field, head): 128 bf16 read; nvfp4 64 code bytes + 8 e4m3 scales, mxfp8 128 + 4.
        nv = bench.FormatCase("nvfp4", 8, 128, 65536)
        self.assertEqual(nv.bytes_moved(), 65536 * (2 * 8 * (256 + 64 + 8) + 8))
        mx = bench.FormatCase("mxfp8_e4m3", 8, 128, 1)
        self.assertEqual(mx.bytes_moved(), 2 * 8 * (256 + 128 + 4) + 8)
        self.assertEqual(nv.cache_shape("k_codes"), (8192, 16, 8, 64))
        self.assertEqual(nv.cache_shape("v_scales"), (8192, 16, 8, 8))
        self.assertEqual(mx.cache_shape("k_codes"), (256, 16, 8, 128))
        self.assertEqual(mx.cache_shape("k_scales"), (256, 16, 8, 4))
        self.assertEqual(nv.copy_bytes() % 16, 0)
        self.assertGreaterEqual(2 * nv.copy_bytes(), nv.bytes_moved())

    def test_format_rows_have_no_issue_7_targets(self):
        cases = bench.select_cases(bench.all_cases(), ["nhd-bf16-h8-d128,nvfp4,mxfp8"])
        res = fake_results(cases, {"copy": lambda c: 1.0, "cuda": lambda c: 9.0 if c.quant else 1.0})
        got = {t["target"]: t for t in bench.evaluate_targets(res, {}, "cuda")}
        self.assertTrue(got["graph replay per call at T <= 256 <= 1.3 us (all cases)"]["met"])
        self.assertFalse(any("nvfp4" in t or "mxfp8" in t for t in got))
        self.assertTrue(bench.is_format_group("nhd-nvfp4-h8-d128") and not bench.is_format_group("nhd-bf16-h8-d128"))
        md = bench.render_markdown(res, {"device": "test"})
        self.assertIn("## nhd-mxfp8-e4m3-h8-d128", md)
        self.assertIn("Quantised formats (nvfp4, mxfp8)", md)

    def test_codecs_by_hand(self):
        e2m1 = bench.CODE_VALUES["fp4_e2m1"]
        self.assertEqual(e2m1[:8], (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0))
        self.assertEqual((e2m1[0x9], e2m1[0xF]), (-0.5, -6.0))
        e4m3 = bench.CODE_VALUES["fp8_e4m3"]
        self.assertEqual(e4m3[0x38], 1.0)  # 0.0111.000: 2^(7-7)
        self.assertEqual(e4m3[0x7E], 448.0)  # 0.1111.110: 1.75 x 2^8, the largest
        self.assertEqual(e4m3[0x01], 2.0 ** -9)  # the smallest subnormal
        self.assertEqual(e4m3[0xB4], -0.75)  # 1.0110.100: -1.5 x 2^-1
        self.assertTrue(e4m3[0x7F] != e4m3[0x7F] and e4m3[0xFF] != e4m3[0xFF])  # NaN
        e8m0 = bench.CODE_VALUES["fp8_e8m0"]
        self.assertEqual((e8m0[127], e8m0[0], e8m0[254]), (1.0, 2.0 ** -127, 2.0 ** 127))
        self.assertTrue(e8m0[255] != e8m0[255])
        self.assertEqual(bench.finite_grid(e2m1), (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0))
        self.assertEqual(len(bench.finite_grid(e4m3)), 127)  # 0, 7 subnormals, 15 x 8 normals less NaN

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_half_step_bound_by_hand(self):
        grid = bench.finite_grid(bench.CODE_VALUES["fp4_e2m1"])
        y = np.array([1.2, 1.25, 1.3, 2.6, 5.0, 7.0, 7.0, -0.2, 0.2])
        q = np.array([1.0, 1.5, 1.0, 3.0, 4.0, 6.0, 4.0, 0.0, -0.5])
        # steps 0.5 below 2 (half 0.25), 1 in [2, 4] (0.5), 2 in [4, 6] (1); past 6: |y| - 6
        self.assertEqual(bench.within_half_step(y, q, grid).tolist(), [True, True, False, True, True, True, False, True, False])

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_decode_check_of_a_hand_quantised_nvfp4_group(self):
        # g = 1/320: amax 6 gives sf = 6 / (6/320) = 320 = e4m3 0x7A (1.25 x 2^8); y = x / (320 g) = x.
        x = np.zeros((1, 16), np.float32)
        x[0, :4] = [6.0, -1.2, 0.3, 2.6]
        nib = [0x7, 0xA, 0x1, 0x5] + [0] * 12  # +6, -1 (1.2: 0.2 from 1, 0.3 from 1.5), +0.5, +3
        codes = np.array([[nib[2 * j] | nib[2 * j + 1] << 4 for j in range(8)]], np.uint8)
        g = np.float32(1 / 320)
        self.assertIsNone(bench.check_format_rows("nvfp4", x, codes, np.array([[0x7A]], np.uint8), g))
        bad = codes.copy()
        bad[0, 0] = 0xA6  # first code +4: 6 is 2 codes away
        self.assertIn("codes out of bound", bench.check_format_rows("nvfp4", x, bad, np.array([[0x7A]], np.uint8), g)[1])
        self.assertIn("scale out of bound", bench.check_format_rows("nvfp4", x, codes, np.array([[0x7C]], np.uint8), g)[1])  # 384

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_decode_check_of_a_hand_quantised_mxfp8_group(self):
        # amax 3 -> floor(log2 3) = 1, E = 1 - 8 = -7: scale code 120; x / 2^-7 = 128 x.
        x = np.zeros((2, 32), np.float32)
        x[0, :3] = [3.0, -0.5, 0.01]  # 384 (0x7C: 1.5 x 2^8), -64 (0xE8: -2^6), 1.28 -> 1.25 (0x3A)
        x[1, :2] = [3.75, 1.0]  # 480: past 448, saturates to 0x7E; 128 (0x70)
        codes = np.zeros((2, 32), np.uint8)
        codes[0, :3] = [0x7C, 0xE8, 0x3A]
        codes[1, :2] = [0x7E, 0x70]
        scales = np.array([[120], [120]], np.uint8)
        self.assertIsNone(bench.check_format_rows("mxfp8_e4m3", x, codes, scales))
        self.assertEqual(bench.check_format_rows("mxfp8_e4m3", x, codes, np.array([[120], [121]], np.uint8))[0], 1)
        bad = codes.copy()
        bad[0, 2] = 0x3B  # 1.375: 0.095 from 1.28, half the step is 0.0625
        self.assertEqual(bench.check_format_rows("mxfp8_e4m3", x, bad, scales)[0], 0)


class Addressing(unittest.TestCase):
    """cache_shape / elem_offset (pure Python) and place_rows (torch indexing), the two derivations
    the bench's expected caches are built and cross-checked with."""

    FORMS = (("nhd", 0), ("hnd", 0), ("x_packed", 4), ("transposed", 0))

    def test_vllm_legacy_shapes(self):
        legacy = bench.Case("vllm_legacy", "bf16", "none", 8, 128, 16)
        self.assertEqual(legacy.x, 8)
        self.assertEqual(legacy.cache_shape("k_cache"), (256, 8, 16, 16, 8))  # [nb, H, D/x, bs, x]
        self.assertEqual(legacy.cache_shape("v_cache"), (256, 8, 128, 16))  # [nb, H, D, bs]
        self.assertEqual(bench.Case("vllm_legacy", "fp8_e4m3", "per_tensor", 8, 128, 16).x, 16)
        with self.assertRaises(ValueError):
            bench.cache_shape("x_packed", 2, 2, 1, 12, 8)  # x must divide head_dim

    def test_offsets_fill_each_tensor_exactly_once(self):
        for form, x in self.FORMS:
            shape = bench.cache_shape(form, 3, 2, 2, 8, x)
            size = 1
            for e in shape:
                size *= e
            offs = [bench.elem_offset(form, shape, b, o, h, d)
                    for b, o, h, d in itertools.product(range(3), range(2), range(2), range(8))]
            self.assertEqual(sorted(offs), list(range(size)), form)

    def test_vllm_legacy_strides_are_the_documented_ones(self):
        # docs/formats.md: K  pos bs:x  head H:stride_head  dim (x, D/x):(1, bs*x);  V  pos bs:1  dim D:bs
        H, D, bs, x = 2, 8, 4, 4
        k = bench.cache_shape("x_packed", 3, bs, H, D, x)
        off = lambda b, o, h, d: bench.elem_offset("x_packed", k, b, o, h, d)  # noqa: E731
        self.assertEqual(off(0, 1, 0, 0), x)
        self.assertEqual(off(0, 0, 1, 0), D * bs)
        self.assertEqual(off(0, 0, 0, 1), 1)
        self.assertEqual(off(0, 0, 0, x), bs * x)
        self.assertEqual(off(1, 0, 0, 0), H * D * bs)
        v = bench.cache_shape("transposed", 3, bs, H, D)
        off = lambda b, o, h, d: bench.elem_offset("transposed", v, b, o, h, d)  # noqa: E731
        self.assertEqual((off(0, 1, 0, 0), off(0, 0, 0, 1), off(0, 0, 1, 0), off(1, 0, 0, 0)), (1, bs, D * bs, H * D * bs))

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_place_rows_puts_each_element_at_its_offset(self):
        nb, bs, H, D, T = 3, 4, 2, 8, 5
        slots = torch.tensor([11, 0, 5, 6, 3])
        blk, pos = slots // bs, slots % bs
        for form, x in self.FORMS + (("latent", 0),):
            heads = 1 if form == "latent" else H
            shape = bench.cache_shape(form, nb, bs, heads, D, x)
            rows = torch.arange(T * heads * D, dtype=torch.int32).reshape((T, D) if form == "latent" else (T, H, D))
            cache = torch.full(shape, -1, dtype=torch.int32)
            bench.place_rows(form, cache, rows, blk, pos)
            flat = cache.reshape(-1).tolist()
            placed = set()
            for t, h, d in itertools.product(range(T), range(heads), range(D)):
                off = bench.elem_offset(form, shape, int(blk[t]), int(pos[t]), h, d)
                want = int(rows[t, d] if form == "latent" else rows[t, h, d])
                self.assertEqual(flat[off], want, (form, t, h, d))
                placed.add(off)
            self.assertTrue(all(v == -1 for i, v in enumerate(flat) if i not in placed), form)  # poison elsewhere


class FlashInferPeer(unittest.TestCase):
    """The peer's host side: the slot mapping as FlashInfer's CSR inputs, the cases it takes, and the
    ctypes mirror of the driver's argument struct."""

    @staticmethod
    def flashinfer_slot(csr, t, block_size):
        """The slot AppendPagedKVCache writes row t to (page.cuh's kernel, written out): page
        indices[indptr[b] + pos / page_size], entry pos % page_size, b = batch_indices[t]."""
        b, pos = csr["batch_indices"][t], csr["positions"][t]
        page = csr["kv_indices"][csr["kv_indptr"][b] + pos // block_size]
        return page * block_size + pos % block_size

    def test_csr_puts_every_token_at_its_slot(self):
        for slots in ([0], [15, 16, 3, 4095, 31], list(range(64, 0, -3)), [7, 8, 9, 23]):
            csr = bench.flashinfer_csr(slots, 16)
            self.assertEqual([self.flashinfer_slot(csr, t, 16) for t in range(len(slots))], slots, slots)

    def test_csr_is_a_well_formed_batch(self):
        import random
        bs = 16
        slots = random.Random(3).sample(range(8192), 4096)
        csr = bench.flashinfer_csr(slots, bs)
        T, batch = len(slots), len(csr["kv_last_page_len"])
        self.assertEqual([len(csr[k]) for k in ("batch_indices", "positions", "kv_indices")], [T, T, csr["kv_indptr"][-1]])
        self.assertEqual(len(csr["kv_indptr"]), batch + 1)
        self.assertEqual(csr["kv_indptr"][0], 0)
        self.assertTrue(all(a <= b for a, b in zip(csr["kv_indptr"], csr["kv_indptr"][1:])))
        self.assertTrue(all(1 <= n <= bs for n in csr["kv_last_page_len"]))
        self.assertTrue(all(0 <= b < batch for b in csr["batch_indices"]))
        # flashinfer.get_batch_indices_positions(append_indptr, seq_lens, nnz): the appended tokens are
        # each request's last, positions seq_len - appended + j. Here one token per request.
        seq_lens = [(csr["kv_indptr"][b + 1] - csr["kv_indptr"][b] - 1) * bs + csr["kv_last_page_len"][b]
                    for b in range(batch)]
        append_indptr = list(range(T + 1))
        want_b, want_pos = [], []
        for b in range(batch):
            n = append_indptr[b + 1] - append_indptr[b]
            want_b += [b] * n
            want_pos += [seq_lens[b] - n + j for j in range(n)]
        self.assertEqual((csr["batch_indices"], csr["positions"]), (want_b, want_pos))

    def test_peer_takes_the_paged_bf16_cases_only(self):
        took = {c.group for c in bench.all_cases() if bench.FlashInferPeer.why_not(c) is None}
        self.assertEqual(took, {f"{layout}-bf16-{shape}" for layout in ("nhd", "hnd")
                                for shape in ("h8-d128", "h8-d96", "h32-d128")})  # d96: the driver says n/a
        self.assertIn("no quantisation", bench.FlashInferPeer.why_not(bench.FormatCase("nvfp4", 8, 128, 16)))

    def test_args_mirror_paged_append_field_for_field(self):
        header = (ROOT / "examples" / "peers" / "flashinfer" / "paged_append.cuh").read_text()
        body = re.search(r"^struct kvfz_flashinfer_append \{(.*?)^\};", header, re.S | re.M).group(1)
        body = re.sub(r"//[^\n]*", "", body)
        names = [decl.split()[-1].lstrip("*") for decl in body.split(";") if decl.strip()]
        self.assertEqual([n for n, _ in bench.FlashInferArgs._fields_], names)
        # The C compiler's size of the struct (bench_driver.cu's kvfuzz_flashinfer_args_size() returns the same).
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler to measure sizeof(kvfz_flashinfer_append)")
        with tempfile.TemporaryDirectory() as d:
            src, exe = pathlib.Path(d) / "size.c", pathlib.Path(d) / "size"
            src.write_text("#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n"
                           f"struct kvfz_flashinfer_append {{{body}}};\n"
                           'int main(void) { printf("%zu\\n", sizeof(struct kvfz_flashinfer_append)); return 0; }\n')
            subprocess.run([cc, str(src), "-o", str(exe)], check=True)
            size = int(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
        self.assertEqual(ctypes.sizeof(bench.FlashInferArgs), size)


class Abi(unittest.TestCase):
    def test_append_args_mirror_the_header_field_for_field(self):
        header = (ROOT / "include" / "kvfuzz_plugin.h").read_text()
        body = re.search(r"typedef struct kvfz_append_args \{(.*?)\} kvfz_append_args;", header, re.S).group(1)
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        names = []
        for decl in body.split(";"):
            decl = decl.strip()
            if decl:
                first, *rest = decl.split(",")
                names += [first.split()[-1].lstrip("*").split("[")[0]] + [r.strip().lstrip("*") for r in rest]
        self.assertEqual([n for n, _ in bench.AppendArgs._fields_], names)
        # The C compiler's size of the struct (cuda_entry.cu's kvfuzz_bench_args_size() returns the same).
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler to measure sizeof(kvfz_append_args)")
        with tempfile.TemporaryDirectory() as d:
            src, exe = pathlib.Path(d) / "size.c", pathlib.Path(d) / "size"
            src.write_text('#include <stdio.h>\n#include "kvfuzz_plugin.h"\n'
                           'int main(void) { printf("%zu\\n", sizeof(kvfz_append_args)); return 0; }\n')
            subprocess.run([cc, "-I", str(ROOT / "include"), str(src), "-o", str(exe)], check=True)
            size = int(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
        self.assertEqual(ctypes.sizeof(bench.AppendArgs), size)

    def test_format_numbers_are_the_headers(self):
        header = (ROOT / "include" / "kvfuzz_plugin.h").read_text()
        enum = dict((n, int(v)) for n, v in re.findall(r"\b(KVFZ_[A-Z0-9_]+) = (\d+)", header))
        nv, mx = bench.QUANT["nvfp4"], bench.QUANT["mxfp8_e4m3"]
        self.assertEqual((nv.abi, mx.abi), (enum["KVFZ_QUANT_NVFP4"], enum["KVFZ_QUANT_MXFP8_E4M3"]))
        self.assertEqual((nv.code_dtype, nv.scale_dtype), (enum["KVFZ_FP4_E2M1"], enum["KVFZ_FP8_E4M3"]))
        self.assertEqual((mx.code_dtype, mx.scale_dtype), (enum["KVFZ_FP8_E4M3"], enum["KVFZ_FP8_E8M0"]))
        self.assertEqual(nv.rule_bits, 1 << enum["KVFZ_RULE_NVFP4_FLASHINFER"] | 1 << enum["KVFZ_RULE_SCALE_LAYOUT_LINEAR"])
        self.assertEqual(mx.rule_bits, 1 << enum["KVFZ_RULE_MX_OCP_FLOOR"])

    def test_format_fields_are_filled_as_the_plugin_target_does(self):
        a = bench.AppendArgs()
        bench.flat_field(a.fields[1], 1, 0, 3, 1, 8, (4, 16, 8, 8), (1024, 64, 8, 1), 16, 0)
        f = a.fields[1]
        self.assertEqual((f.role, f.index, f.dtype, f.buffer, f.offset, f.group, f.scale, f.zero), (1, 0, 3, 1, 8, 16, 0, -1))
        self.assertEqual([(m.rank, list(m.extent), list(m.stride)) for m in f.mode],
                         [(1, [4, 1, 1], [1024, 0, 0]), (1, [16, 1, 1], [64, 0, 0]), (1, [8, 1, 1], [8, 0, 0]),
                          (1, [8, 1, 1], [1, 0, 0])])

    def test_n_a_rows_are_not_failures(self):
        self.assertTrue(bench.verified({"verify": "ok"}))
        self.assertTrue(bench.verified({"verify": "n/a: kvfuzz_triton takes layouts nhd/hnd, family kv"}))
        self.assertFalse(bench.verified({"verify": "MISMATCH k_cache (x_packed [2]): ..."}))
        self.assertFalse(bench.verified({"verify": "error: RuntimeError: boom"}))


class Targets(unittest.TestCase):
    def test_ratios_and_verdicts(self):
        cases = [c for c in bench.all_cases() if c.heads == 8 and c.head_dim == 128]
        res = fake_results(cases, {"copy": lambda c: 100.0,
                                   "cuda": lambda c: 104.0 if c.layout == "nhd" else 120.0,
                                   "slow": lambda c: 200.0})
        r = bench.find(res, "cuda", "nhd-bf16-h8-d128-t65536")
        self.assertAlmostEqual(r["ratio"], 100 / 104)
        self.assertAlmostEqual(r["gbps"], r["bytes_moved"] / 104e3)
        got = {t["target"]: t["met"] for t in bench.evaluate_targets(res, {}, "cuda")}
        self.assertTrue(got["bf16 NHD T=65536 >= 95% of copy"])
        self.assertFalse(got["HND within 10% of NHD (bf16-h8-d128, T=65536)"])  # 120 / 104 = 1.15
        self.assertFalse(got["graph replay per call at T <= 256 <= 1.3 us (all cases)"])
        slow = {t["target"]: t["met"] for t in bench.evaluate_targets(res, {}, "slow")}
        self.assertFalse(slow["bf16 NHD T=65536 >= 95% of copy"])

    def test_new_formats_leave_the_issue_targets_alone(self):
        cases = [c for c in bench.all_cases() if c.heads == 8 and c.head_dim == 128 or c.family == "mla"]
        res = fake_results(cases, {"copy": lambda c: 1.0,
                                   "cuda": lambda c: 1.0 if c.layout in ("nhd", "hnd") and c.family == "kv" else 9.0})
        got = {t["target"]: t for t in bench.evaluate_targets(res, {}, "cuda")}
        self.assertTrue(got["graph replay per call at T <= 256 <= 1.3 us (all cases)"]["met"])
        self.assertFalse(any("legacy" in t or "mla" in t for t in got))
        self.assertAlmostEqual(bench.find(res, "cuda", "mla-bf16-h1-d576-t65536")["ratio"], 1 / 9)

    def test_ceiling_is_the_faster_copy_timing(self):
        self.assertEqual(bench.ceiling_us({"graph_us": 791.0, "stream_us": 507.0}), 507.0)
        self.assertEqual(bench.ceiling_us({"graph_us": 1.0, "stream_us": 14.0}), 1.0)
        self.assertIsNone(bench.ceiling_us({"verify": "error"}))

    def test_markdown_has_every_row(self):
        cases = bench.select_cases(bench.all_cases(), ["nhd-bf16-h8-d128"])
        res = fake_results(cases, {"copy": lambda c: 2.0, "cuda": lambda c: 4.0})
        res.append({"impl": "triton", "case": cases[0].name, "group": cases[0].group, "tokens": 1,
                    "bytes_moved": 1, "verify": "error: boom"})
        bench.summarise(res)
        md = bench.render_markdown(res, {"device": "test", "targets": bench.evaluate_targets(res, {}, "cuda")})
        self.assertIn("## nhd-bf16-h8-d128", md)
        self.assertIn("| cuda | 65536 | 537.395 | 4.00 |", md)
        self.assertIn("| 50% |", md)
        self.assertIn("| triton | 1 | 0.000 | - |", md)
        self.assertIn("error: boom", md)


class KernelVariants(unittest.TestCase):
    """bench/kernel_variant.py: each variant of the current kernel rewrites its sites, and only them
    (a stale site exits non-zero and names the file); aligned_static targets kernels before 01eb8c2."""

    def run_variant(self, name, out):
        return subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_variant.py"), name, str(out)],
                              capture_output=True, text=True)

    def test_current_kernel_variants_apply(self):
        sys.path.insert(0, str(ROOT / "bench"))
        import kernel_variant
        with tempfile.TemporaryDirectory() as tmp:
            for name, sites in kernel_variant.VARIANTS.items():
                out = pathlib.Path(tmp) / name
                r = self.run_variant(name, out)
                if name == "aligned_static":
                    self.assertNotEqual(r.returncode, 0)
                    self.assertIn("occurs 0 times", r.stderr)
                    continue
                self.assertEqual(r.returncode, 0, r.stderr)
                for file, old, new in sites:
                    text = (out / file).read_text()
                    self.assertNotIn(old, text, f"{name}: {file}")
                    self.assertEqual(text.count(new), 1, f"{name}: {file}")
                changed = {f.name for f in out.iterdir() if f.read_bytes() != (ROOT / "kernels" / "cuda" / f.name).read_bytes()}
                self.assertEqual(changed, {file for file, _, _ in sites}, name)

    def test_existing_output_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.run_variant("div2", tmp)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("exists", r.stderr)


if __name__ == "__main__":
    unittest.main()
