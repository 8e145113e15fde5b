#!/usr/bin/env python3
"""kvfuzz kernel benchmark (issue 7): verify, then time, the append kernels on one CUDA GPU.

    python3 bench/bench.py --cuda-lib tuned=PATH.so [--cuda-lib v0=OTHER.so ...] [--peer flashinfer=DRIVER.so] --out DIR
    python3 bench/bench.py --list                # the cases, no GPU needed

PATH.so is bench/cuda_entry.cu built with a kernel folder (bench/build_cuda_entry.sh): the launcher
kvf::kv_append_cuda() and kernel of kernels/cuda, the code kvfuzz's `cuda` target fuzzes. The Triton
kernel runs through the package's torch API (kvfuzz_triton.kv_append, JIT-compiled here).

For every case (layout, dtype, heads, head_dim, tokens) and every implementation:
  1. verify: both caches (and the per-token-head scale caches) are filled with poison 0xFF bytes,
     the implementation runs once, and the whole cache must equal the expectation bit for bit:
     the rows at the slots hold the reference, every other byte is still poison. The fp8 reference
     is computed on the CPU by kvfuzz's rules (IEEE fp32 x / scale, round to nearest even,
     saturation) and a sample is cross-checked with tests/triton/reference.py's independent model;
  2. time (CUDA events, 20 warm-up calls first):
     - graph_us: N calls captured in one CUDA graph, replayed R times; median replay / N. The GPU
       time per call without launch gaps: the table's main number;
     - stream_us: median over R of event -> one call -> event, calls issued back to back;
     - host_us: wall time of issuing N calls without synchronising, per call (Python + launch).
Bytes per call = valid tokens x (K+V read + K+V written) + 8 B of slot per token (+ 2 x 4 B of
scale per token-head for per_token_head). `copy` is torch's device-to-device copy_ of half that
many bytes (it reads and writes them), the ceiling; ratio = copy µs (the smaller of its graph_us and
stream_us) / implementation graph_us.
Nothing is flushed between calls: T <= 4096 (<= 34 MB) stays in the 60 MB L2 of an H200.

Besides the paged NHD/HND rows, two formats of docs/formats.md (bf16 and fp8 per-tensor, T as above):
  - vllm_legacy-*: vLLM's legacy cache pair, K x-packed [nb, H, D/x, bs, x] (x = 16 B of cache
    elements: 8 bf16, 16 fp8) and V transposed [nb, H, D, bs], H 8, D 128; the same bytes as NHD;
  - mla-*: one MLA latent entry per slot, cache [nb, bs, 576] = kv_c (512) then k_pe (64), read as
    two slices of one [T, 576] projection row; no V, so one entry of bytes per token (fp8: one
    per-tensor scale, K's, for the whole entry).
The expected caches are built in this file (torch advanced indexing into tensors of each format's
shape, cross-checked at sampled elements against the flat offset formulas of elem_offset()), and
compared whole, bit for bit; a row that fails verification is reported and not timed. The Triton
kernel takes paged NHD/HND only: its rows of the other formats read "n/a".

And two quantised formats of docs/quant-formats.md (issue 15), paged NHD, bf16 inputs, H 8, D 128:
  - nhd-nvfp4-*: e2m1 codes two per byte [nb, bs, H, 64] and an e4m3 scale per 16 dims [nb, bs, H,
    8] under an fp32 decode global scale per tensor (FlashInfer's convention, linear scales);
  - nhd-mxfp8-e4m3-*: e4m3 codes [nb, bs, H, 128] and an e8m0 scale per 32 dims [nb, bs, H, 4]
    (OCP MX, floor rule).
The CUDA kernel gets kvfz_append_args' quantised fields as kvfuzz's plugin target fills them; the
Triton kernel runs through kvfuzz_triton.kv_append_quant. Verification (check_format_rows): every
byte outside the slots' rows is still poison, the bytes at the slots decode (numpy, this file's
tables) to within the format's quantisation error of the input, and all implementations wrote the
same bytes, bit for bit (bit-exactness against the contract is what the kvfuzz campaigns check).
Bytes per call: the bf16 K and V read, codes and scales written, 8 B of slot per token.
Select case groups with --cases (comma = or, '+' = and), e.g.
    --cases nhd-bf16-h8-d128,hnd-bf16-h8-d128,vllm_legacy,mla,nvfp4,mxfp8

Peers (--peer NAME=PATH, repeatable; PEERS lists the names): another library's kernel, timed in the
same run on the same tensors and verified like every other row. flashinfer: FlashInfer's own
flashinfer::AppendPagedKVCache (the kernel of flashinfer.append_paged_kv_cache), PATH the driver
examples/peers/flashinfer/bench_driver.cu built against a pinned flashinfer-python's headers
(examples/peers/flashinfer: fetch-headers.sh, then build.sh -t bench). It takes paged NHD/HND bf16
K and V, no quantisation ("n/a" on the other cases, and on head dims other than 64/128/256/512,
which the driver refuses). FlashInfer addresses the cache the CSR way, not through a slot_mapping:
the case's slots become a decode batch (flashinfer_csr: token t is the newest token of request t,
whose one page is slot // 16), built on the host before anything is timed. Its bytes moved are the
case's (FlashInfer reads 16 B of indices per token where the slot_mapping is 8 B).
"""
import argparse
import ctypes
import json
import os
import pathlib
import platform
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKENS = (1, 16, 256, 4096, 65536)
BLOCK_SIZE = 16
K_SCALE, V_SCALE = 0.02, 0.03  # per-tensor scales (as in research/baseline-h200.md); MLA uses K's
ELEM_BYTES = {"bf16": 2, "fp8_e4m3": 1}
INPUT_BYTES = 2  # inputs are bf16
DTYPE_ENUM = {"f16": 0, "bf16": 1, "f32": 2, "fp8_e4m3": 3}
SCALE_ENUM = {"none": 0, "per_tensor": 1, "per_token_head": 4}
LAYOUT_ENUM = {"nhd": 0, "hnd": 1, "vllm_legacy": 6}  # kvfz_layout
FAMILY_ENUM = {"kv": 0, "mla": 3}  # kvfz_family
MLA_KV_C_DIM, MLA_ROPE_DIM = 512, 64  # DeepSeek's latent entry: kv_c then k_pe, 576 dims
TRITON_LAYOUTS = ("nhd", "hnd")  # kvfuzz_triton.kv_append's layouts (family kv only)


class QuantSpec:
    """One quantised format as the bench writes it: include/kvfuzz_plugin.h's numbers for it and the
    Triton API's names. abi: kvfz_quant_format; code_dtype, scale_dtype: kvfz_dtype (their names are
    CODE_VALUES' keys); code_bits: 4 (two codes a byte, element 2j in the low nibble) or 8; group: dims
    per scale; rule_bits: 1u << kvfz_quant_rule of the conventions benched (kvfuzz's defaults);
    emax: the element's largest exponent (MX's scale rule)."""

    def __init__(self, abi, code, code_dtype, code_bits, scale, scale_dtype, group, rule_bits, rules, emax=0):
        self.abi, self.code, self.code_dtype, self.code_bits = abi, code, code_dtype, code_bits
        self.scale, self.scale_dtype, self.group, self.rule_bits = scale, scale_dtype, group, rule_bits
        self.rules, self.emax = rules, emax


QUANT = {
    # KVFZ_QUANT_NVFP4; FP4_E2M1 codes, FP8_E4M3 scales; rules NVFP4_FLASHINFER (0), SCALE_LAYOUT_LINEAR (2)
    "nvfp4": QuantSpec(1, "fp4_e2m1", 6, 4, "fp8_e4m3", 3, 16, (1 << 0) | (1 << 2),
                       {"nvfp4": "flashinfer"}),
    # KVFZ_QUANT_MXFP8_E4M3; FP8_E4M3 codes, FP8_E8M0 scales; rule MX_OCP_FLOOR (5)
    "mxfp8_e4m3": QuantSpec(2, "fp8_e4m3", 3, 8, "fp8_e8m0", 7, 32, 1 << 5, {"mx": "ocp_floor"}, emax=8),
}
# NVFP4's fp32 decode global scales g (value = e2m1 x e4m3 scale x g): randn inputs (amax < 8 for K,
# < 12 for V) keep every block scale amax / (6 g) below e4m3's 448. K and V differ so a swap shows.
NVFP4_GLOBAL = {"k": 1 / 336, "v": 1 / 224}


# ---------------------------------------------------------------------------------------------
# Cases, byte counts and cache addressing (no GPU needed)

class Case:
    """One benchmark case. layout: "nhd", "hnd" or "vllm_legacy"; family: "kv" (K and V [T, H, D])
    or "mla" (one latent entry of head_dim = 512 + 64 dims per token, layout "nhd" with H 1)."""

    quant = None  # a FormatCase's quantised format

    def __init__(self, layout, cache_dtype, scale, heads, head_dim, tokens, family="kv"):
        self.layout, self.cache_dtype, self.scale = layout, cache_dtype, scale
        self.heads, self.head_dim, self.tokens = heads, head_dim, tokens
        self.family = family

    @property
    def name(self):
        dt = "bf16" if self.scale == "none" else f"fp8-{self.scale.replace('_', '-')}"
        kind = self.layout if self.family == "kv" else self.family
        return f"{kind}-{dt}-h{self.heads}-d{self.head_dim}-t{self.tokens}"

    @property
    def group(self):
        return self.name.rsplit("-t", 1)[0]

    @property
    def has_value(self):
        return self.family == "kv"

    @property
    def rope_dim(self):
        return MLA_ROPE_DIM if self.family == "mla" else 0

    @property
    def x(self):
        """vllm_legacy's x: cache elements per 16 bytes (0 for other layouts)."""
        return 16 // ELEM_BYTES[self.cache_dtype] if self.layout == "vllm_legacy" else 0

    @property
    def capacity(self):
        """Cache slots: at least twice the tokens (random distinct slots), at least 4096."""
        return max(2 * self.tokens, 4096)

    @property
    def num_blocks(self):
        return self.capacity // BLOCK_SIZE

    def forms(self):
        """{field name: form} of the stored fields (forms: cache_shape / elem_offset)."""
        if self.family == "mla":
            return {"k_cache": "latent"}
        if self.layout == "vllm_legacy":
            return {"k_cache": "x_packed", "v_cache": "transposed"}
        return {"k_cache": self.layout, "v_cache": self.layout}

    def cache_shape(self, field):
        return cache_shape(self.forms()[field], self.num_blocks, BLOCK_SIZE, self.heads, self.head_dim, self.x)

    def triton_supported(self):
        return self.family == "kv" and self.layout in TRITON_LAYOUTS

    def bytes_moved(self):
        """Input read + cache written per call: K and V rows (one entry for MLA), 8 B of slot per
        token, per_token_head's fp32 scale per (field, head). vllm_legacy moves NHD's bytes."""
        fields = 2 if self.has_value else 1
        row = self.heads * self.head_dim
        per_token = fields * row * (INPUT_BYTES + ELEM_BYTES[self.cache_dtype]) + 8
        if self.scale == "per_token_head":
            per_token += fields * self.heads * 4
        return self.tokens * per_token

    def copy_bytes(self):
        """Bytes the ceiling copies: half the bytes moved (a copy reads and writes each), 16-B rounded."""
        return max(16, (self.bytes_moved() // 2 + 15) // 16 * 16)

    def as_dict(self):
        return {"name": self.name, "layout": self.layout, "family": self.family, "cache_dtype": self.cache_dtype,
                "scale": self.scale, "heads": self.heads, "head_dim": self.head_dim, "rope_dim": self.rope_dim,
                "tokens": self.tokens, "block_size": BLOCK_SIZE, "capacity": self.capacity,
                "caches": {f: {"form": form, "shape": list(self.cache_shape(f))} for f, form in self.forms().items()},
                "bytes_moved": self.bytes_moved(), "copy_bytes": self.copy_bytes()}


class FormatCase(Case):
    """A quantised format's case (QUANT), paged NHD, K and V: a codes tensor [nb, bs, H, code_row]
    and a scales tensor [nb, bs, H, D / group] per field."""

    def __init__(self, quant, heads, head_dim, tokens):
        super().__init__("nhd", QUANT[quant].code, "none", heads, head_dim, tokens)
        self.quant = quant

    @property
    def spec(self):
        return QUANT[self.quant]

    @property
    def name(self):
        return f"nhd-{self.quant.replace('_', '-')}-h{self.heads}-d{self.head_dim}-t{self.tokens}"

    @property
    def code_row(self):
        """Bytes of one (token, head) row of codes."""
        return self.head_dim * self.spec.code_bits // 8

    @property
    def scale_row(self):
        """Scales (one byte each) of one (token, head) row."""
        return self.head_dim // self.spec.group

    def forms(self):
        return {f: "nhd" for f in ("k_codes", "k_scales", "v_codes", "v_scales")}

    def cache_shape(self, field):
        row = self.code_row if field.endswith("_codes") else self.scale_row
        return (self.num_blocks, BLOCK_SIZE, self.heads, row)

    def triton_supported(self):
        return True  # kvfuzz_triton.kv_append_quant

    def bytes_moved(self):
        """Per token: K and V bf16 rows read, their codes and scales written, 8 B of slot."""
        return self.tokens * (2 * self.heads * (self.head_dim * INPUT_BYTES + self.code_row + self.scale_row) + 8)

    def as_dict(self):
        d = super().as_dict()
        d.update({"quant_format": self.quant, "code_dtype": self.spec.code, "scale_dtype": self.spec.scale,
                  "group": self.spec.group, "quant_rules": self.spec.rules, "scale": "none"})
        if self.quant == "nvfp4":
            d["global_scales"] = NVFP4_GLOBAL
        return d


def is_format_group(group):
    """True for the group of a FormatCase (no issue-7 targets)."""
    return any(f"-{q.replace('_', '-')}-" in f"{group}-" for q in QUANT)


def cache_shape(form, num_blocks, block_size, heads, head_dim, x=0):
    """Tensor shape of one cache field of the given form:
         nhd         [nb, bs, H, D]         paged, token-major
         hnd         [nb, H, bs, D]         paged, head-major
         x_packed    [nb, H, D/x, bs, x]    vllm_legacy's K: x dims of one slot adjacent
         transposed  [nb, H, D, bs]         vllm_legacy's V: the slots of one dim adjacent
         latent      [nb, bs, D]            MLA's entry (H = 1)"""
    nb, bs, H, D = num_blocks, block_size, heads, head_dim
    if form == "nhd":
        return (nb, bs, H, D)
    if form == "hnd":
        return (nb, H, bs, D)
    if form == "x_packed":
        if x <= 0 or D % x:
            raise ValueError(f"x_packed needs x > 0 dividing head_dim {D}, got x = {x}")
        return (nb, H, D // x, bs, x)
    if form == "transposed":
        return (nb, H, D, bs)
    if form == "latent":
        return (nb, bs, D)
    raise ValueError(f"unknown cache form {form!r}")


def elem_offset(form, shape, block, pos, head, dim):
    """Flat element offset of (block, pos, head, dim) in a dense tensor of cache_shape(form, ...):
    docs/formats.md's formulas, written out without tensors (the cross-check of place_rows)."""
    if form == "nhd":
        _, bs, H, D = shape
        return ((block * bs + pos) * H + head) * D + dim
    if form == "hnd":
        _, H, bs, D = shape
        return ((block * H + head) * bs + pos) * D + dim
    if form == "x_packed":
        _, H, chunks, bs, x = shape
        return (((block * H + head) * chunks + dim // x) * bs + pos) * x + dim % x
    if form == "transposed":
        _, H, D, bs = shape
        return ((block * H + head) * D + dim) * bs + pos
    if form == "latent":
        _, bs, D = shape
        assert head == 0, "a latent entry has one head"
        return (block * bs + pos) * D + dim
    raise ValueError(f"unknown cache form {form!r}")


def place_rows(form, cache, rows, blk, pos):
    """cache[(blk[t], pos[t])] = rows[t] for every t, by torch advanced indexing (numpy's works too):
    rows [T, H, D] for nhd / hnd / x_packed / transposed, [T, D] for latent; scale caches [T, H]
    into nhd [nb, bs, H] or hnd [nb, H, bs]. Advanced indices split by slices put T first, so
    cache[blk, :, pos] is [T, H, D] for hnd. Slots must be distinct."""
    if form in ("nhd", "latent"):
        cache[blk, pos] = rows
    elif form == "hnd":
        cache[blk, :, pos] = rows
    elif form == "x_packed":
        x = cache.shape[-1]
        cache[blk, :, :, pos, :] = rows.reshape(rows.shape[0], rows.shape[1], rows.shape[2] // x, x)
    elif form == "transposed":
        cache[blk, :, :, pos] = rows
    else:
        raise ValueError(f"unknown cache form {form!r}")


def all_cases(tokens=TOKENS):
    """Every case, the issue's main shape first (a --budget-s cut drops the last groups); the
    vllm_legacy, MLA and quantised-format groups last."""
    groups = [("bf16", "none", 8, 128), ("fp8_e4m3", "per_tensor", 8, 128), ("fp8_e4m3", "per_token_head", 8, 128),
              ("bf16", "none", 8, 96), ("bf16", "none", 32, 128)]
    cases = [Case(layout, dtype, scale, heads, head_dim, t)
             for dtype, scale, heads, head_dim in groups for layout in ("nhd", "hnd") for t in tokens]
    for dtype, scale in (("bf16", "none"), ("fp8_e4m3", "per_tensor")):
        cases += [Case("vllm_legacy", dtype, scale, 8, 128, t) for t in tokens]
    for dtype, scale in (("bf16", "none"), ("fp8_e4m3", "per_tensor")):
        cases += [Case("nhd", dtype, scale, 1, MLA_KV_C_DIM + MLA_ROPE_DIM, t, family="mla") for t in tokens]
    for quant in QUANT:
        cases += [FormatCase(quant, 8, 128, t) for t in tokens]
    return cases


def select_cases(cases, patterns):
    """Cases whose name matches one of the patterns: a pattern is alternatives split by ',' (or),
    each a '+'-joined list of substrings the name must all contain (and)."""
    alternatives = [alt for pat in patterns for alt in pat.split(",") if alt]
    if not alternatives:
        return cases
    return [c for c in cases if any(all(part in c.name for part in alt.split("+")) for alt in alternatives)]


def flashinfer_csr(slots, block_size):
    """FlashInfer's append inputs for a slot mapping (slots: list of distinct slots >= 0, one per
    token), as a decode batch: token t is the newest token of request t, whose sequence of
    slots[t] % block_size + 1 tokens lies on the one page slots[t] // block_size. {name: list of
    ints}: batch_indices [T] (t), positions [T] (slots[t] % block_size), kv_indptr [T + 1] (0..T),
    kv_indices [T] (slots[t] // block_size), kv_last_page_len [T] (positions + 1). The positions are
    those flashinfer.get_batch_indices_positions derives (each request's appended tokens are its
    last), and AppendPagedKVCache writes row t to page kv_indices[kv_indptr[t] + positions[t] //
    block_size], entry positions[t] % block_size: slot slots[t]."""
    positions = [slot % block_size for slot in slots]
    return {"batch_indices": list(range(len(slots))), "positions": positions,
            "kv_indptr": list(range(len(slots) + 1)), "kv_indices": [slot // block_size for slot in slots],
            "kv_last_page_len": [p + 1 for p in positions]}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda-lib", action="append", default=[], metavar="NAME[@PATTERN]=PATH",
                    help="a build of bench/cuda_entry.cu (bench/build_cuda_entry.sh), timed as NAME; repeatable. "
                         "With @PATTERN only on cases whose name contains PATTERN ('a+b': both, 'a,b': either)")
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=PATH",
                    help="another library's kernel, timed as row NAME; repeatable. NAME: " + ", ".join(
                        f"{n} ({p.BUILD})" for n, p in PEERS.items()))
    ap.add_argument("--out", help="folder for bench.json and bench.md (must not hold them already)")
    ap.add_argument("--cases", action="append", default=[], metavar="PATTERN",
                    help="run only cases whose name contains PATTERN ('a+b': both, 'a,b': either); repeatable. "
                         "E.g. nhd-bf16-h8-d128,hnd-bf16-h8-d128,vllm_legacy,mla")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma-separated T values")
    ap.add_argument("--no-triton", action="store_true", help="skip the Triton kernel")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch indexing peers")
    ap.add_argument("--triton-variants", default="256,65536",
                    help="T values at which Triton num_warps/variant alternatives are also timed ('' = none)")
    ap.add_argument("--reps", type=int, default=100, help="repetitions for stream_us medians")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=0,
                    help="stop starting new cases after this many seconds (0 = no limit); results so far are written")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args(argv)
    libs = []
    for spec in args.cuda_lib:
        name, sep, path = spec.partition("=")
        name, _, pattern = name.partition("@")
        if not sep or not name or not path:
            ap.error(f"--cuda-lib expects NAME[@PATTERN]=PATH, got {spec!r}")
        if (name in [n for n, _, _ in libs] or name in ("copy", "triton") or name in PEERS
                or name.startswith(("torch", "triton:"))):
            ap.error(f"--cuda-lib name {name!r} is taken")
        libs.append((name, pattern, path))
    args.cuda_lib = libs
    peers = []
    for spec in args.peer:
        name, sep, path = spec.partition("=")
        if not sep or not path:
            ap.error(f"--peer expects NAME=PATH, got {spec!r}")
        if name not in PEERS:
            ap.error(f"--peer {name!r} is not a known peer; known: {', '.join(PEERS)}")
        if name in [n for n, _ in peers]:
            ap.error(f"--peer {name!r} given twice")
        peers.append((name, path))
    args.peer = peers
    try:
        args.tokens = tuple(int(t) for t in args.tokens.split(",") if t)
        args.triton_variants = tuple(int(t) for t in args.triton_variants.split(",") if t)
    except ValueError:
        ap.error("--tokens and --triton-variants take comma-separated integers")
    if any(t <= 0 for t in args.tokens):
        ap.error("--tokens must be positive")
    if not args.list and not args.out:
        ap.error("--out is required (unless --list)")
    if args.reps < 5:
        ap.error("--reps must be >= 5")
    return args


# ---------------------------------------------------------------------------------------------
# Quantised formats: codecs and the decode check (pure Python tables, numpy; no GPU needed)

def e2m1_value(code):
    """fp4 e2m1 (1 sign, 2 exponent, 1 mantissa bit, bias 1): magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    return (-1.0 if code & 8 else 1.0) * (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)[code & 7]


def e4m3_value(code):
    """fp8 e4m3fn (bias 7, no Inf): exponent 0 is subnormal m 2^-9; S.1111.111 is NaN; max 448."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return float("nan")
    return sign * (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


def e8m0_value(code):
    """e8m0 (OCP MX scale): 2^(code - 127); 255 is NaN."""
    return float("nan") if code == 255 else 2.0 ** (code - 127)


CODE_VALUES = {"fp4_e2m1": tuple(e2m1_value(c) for c in range(16)),  # value of each code
               "fp8_e4m3": tuple(e4m3_value(c) for c in range(256)),
               "fp8_e8m0": tuple(e8m0_value(c) for c in range(256))}


def finite_grid(values):
    """The magnitudes a code table holds, ascending (NaN left out)."""
    return tuple(sorted({abs(v) for v in values if v == v}))


def within_half_step(y, q, grid):
    """Element-wise (numpy): |y - q| <= half the gap between the two grid magnitudes around |y|, the
    most round-to-nearest moves a value; past the grid's largest magnitude M, |y| - M (saturation:
    q must be +-M). Plus 2^-20 |y| for the fp32 arithmetic in which a kernel computes its y."""
    import numpy as np
    g = np.asarray(grid, dtype=np.float64)
    mag = np.abs(y)
    i = np.clip(np.searchsorted(g, mag, side="right"), 1, len(g) - 1)
    bound = np.where(mag >= g[-1], mag - g[-1], (g[i] - g[i - 1]) / 2)
    return np.abs(y - q) <= bound + mag * 2.0 ** -20


def check_format_rows(quant, x, codes, scales, global_scale=None):
    """None when every row decodes to within the format's quantisation error of its input, else
    (row, description) of the first row that does not. One (token, head) row per line: x [N, D] float32 (the
    bf16 input, widened exactly), codes [N, D * code_bits / 8] and scales [N, D / group] uint8 as
    stored. With amax = max |x| of a group, S its decoded scale and q its decoded codes:
      nvfp4       sf = amax / (6 g) (g = global_scale); S must be within half an e4m3 step of sf (448
                  past 448); y = x / (S g) and |y - q| within half an e2m1 step at |y| (|y| - 6 past 6);
                  so |x - q S g| <= that half step x S g. S = 0 leaves y = 0: q must be +-0;
      mxfp8_e4m3  S = 2^(floor(log2 amax) - 8) exactly (OCP's floor rule; 2^-127 for amax 0);
                  y = x / S and |y - q| within half an e4m3 step at |y| (|y| - 448 past 448)."""
    import numpy as np
    spec = QUANT[quant]
    x = np.asarray(x, dtype=np.float32)
    N, D = x.shape
    G = spec.group
    codes = np.asarray(codes, dtype=np.uint8)
    scales = np.asarray(scales, dtype=np.uint8)
    if spec.code_bits == 4:
        codes = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(N, D)
    q = np.asarray(CODE_VALUES[spec.code])[codes].reshape(N, D // G, G)
    S = np.asarray(CODE_VALUES[spec.scale])[scales]  # [N, D / G]
    xg = x.astype(np.float64).reshape(N, D // G, G)
    amax = np.abs(xg).max(axis=-1)
    if quant == "nvfp4":
        g = float(np.float32(global_scale))
        scale_ok = within_half_step(amax / (6 * g), S, finite_grid(CODE_VALUES["fp8_e4m3"]))
        unit = S * g
    elif quant == "mxfp8_e4m3":
        _, e = np.frexp(amax)  # amax = m 2^e, m in [0.5, 1): floor(log2 amax) = e - 1
        want = np.where(amax > 0, np.clip(e - 1 - spec.emax, -127, 127), -127) + 127
        scale_ok = scales == want
        unit = S
    else:
        raise ValueError(f"no decode check for {quant!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(unit[..., None] > 0, xg / unit[..., None], 0.0)
    code_ok = within_half_step(y, q, finite_grid(CODE_VALUES[spec.code])).all(axis=-1)
    bad = np.argwhere(~(scale_ok & code_ok))
    if not len(bad):
        return None
    r, grp = (int(v) for v in bad[0])
    what = "scale" if not scale_ok[r, grp] else "codes"
    return r, (f"group {grp} (dims {grp * G}..{grp * G + G - 1}): {what} out of bound ({len(bad)} groups in "
            f"all): amax {amax[r, grp]:.6g}, scale code 0x{int(scales[r, grp]):02x} = {S[r, grp]:.6g}, "
            f"x {xg[r, grp, :4].tolist()}... decode to {(q[r, grp, :4] * unit[r, grp]).tolist()}...")


# ---------------------------------------------------------------------------------------------
# Rendering (no GPU needed)

def fmt(x, digits=2):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}f}" if abs(x) < 1000 else f"{x:.0f}"


def ceiling_us(copy_row):
    """The copy ceiling: the faster of the copy's graph and stream times (a 1 GB copy node in a
    graph ran slower than the same copy issued on a stream)."""
    times = [copy_row.get(k) for k in ("graph_us", "stream_us") if copy_row.get(k)]
    return min(times) if times else None


def summarise(results):
    """Adds gbps and ratio (copy ceiling µs / graph_us) to every row of results (list of dicts)."""
    copy = {r["case"]: ceiling_us(r) for r in results if r["impl"] == "copy"}
    for r in results:
        c = copy.get(r["case"])
        g = r.get("graph_us")
        r["gbps"] = r["bytes_moved"] / (g * 1e3) if g else None
        r["ratio"] = (c / g) if (c and g) else None
    return results


def find(results, impl, name):
    for r in results:
        if r["impl"] == impl and r["case"] == name:
            return r
    return None


def evaluate_targets(results, meta, impl):
    """Issue 7's targets for one implementation: [{'target', 'value', 'met'}]. Over the issue's
    cases, the paged NHD/HND ones ("all cases" = all of those); vllm_legacy, MLA and quantised-format
    rows have none."""
    out = []

    def ratio_target(label, name, need):
        r = find(results, impl, name)
        v = r.get("ratio") if r else None
        out.append({"impl": impl, "target": label, "value": f"{100 * v:.1f}%" if v else "-",
                    "met": bool(v and v >= need)})
    ratio_target("bf16 NHD T=65536 >= 95% of copy", "nhd-bf16-h8-d128-t65536", 0.95)
    ratio_target("fp8 per-tensor NHD T=65536 >= 90% of copy", "nhd-fp8-per-tensor-h8-d128-t65536", 0.90)
    ratio_target("fp8 per-token-head NHD T=65536 >= 90% of copy", "nhd-fp8-per-token-head-h8-d128-t65536", 0.90)
    paged = [r for r in results if r["impl"] == impl and r["group"].startswith(("nhd-", "hnd-"))
             and not is_format_group(r["group"])]
    groups = sorted({r["group"][4:] for r in paged})
    for g in groups:
        n, h = find(results, impl, f"nhd-{g}-t65536"), find(results, impl, f"hnd-{g}-t65536")
        if n and h and n.get("graph_us") and h.get("graph_us"):
            v = h["graph_us"] / n["graph_us"]
            out.append({"impl": impl, "target": f"HND within 10% of NHD ({g}, T=65536)",
                        "value": f"HND/NHD = {v:.3f}", "met": v <= 1.10})
    small = [r for r in paged if r["tokens"] <= 256 and r.get("graph_us")]
    if small:
        worst = max(small, key=lambda r: r["graph_us"])
        out.append({"impl": impl, "target": "graph replay per call at T <= 256 <= 1.3 us (all cases)",
                    "value": f"max {worst['graph_us']:.2f} us ({worst['case']})", "met": worst["graph_us"] <= 1.3})
    return out


def render_markdown(results, meta):
    lines = [f"# kvfuzz append benchmark — {meta.get('device', '?')}", ""]
    for k in ("date", "commit", "command", "torch", "triton", "note"):
        if meta.get(k):
            lines.append(f"- {k}: {meta[k]}")
    for name, peer in meta.get("peers", {}).items():
        lines.append(f"- peer {name}: {peer['version']} ({peer['path']})")
    lines += ["", "µs per call: graph = GPU time inside a CUDA graph (median replay / calls), stream = "
              "event-to-event median of one call issued back to back, host = Python wall time per call "
              "without sync. GB/s and ratio use graph µs; ratio = copy ceiling µs (min of its graph and stream µs) / µs. verify: whole "
              "cache bit-exact against the reference before timing.", ""]
    if any(is_format_group(r["group"]) for r in results):
        lines += ["Quantised formats (nvfp4, mxfp8): verify = every byte outside the slots' rows still poison, the "
                  "codes and scales at the slots decode to within the format's quantisation error of the bf16 input "
                  "(half a code step at their scale, saturation past the largest code; check_format_rows), and all "
                  "implementations' bytes identical; bit-exactness against the contract is the kvfuzz campaigns'. "
                  "MB moved: bf16 K and V read, codes and scales written, 8 B of slot per token.", ""]
    if meta.get("targets"):
        lines += ["## Targets (issue 7)", "", "| impl | target | value | met |", "|---|---|---|---|"]
        for t in meta["targets"]:
            lines.append(f"| {t['impl']} | {t['target']} | {t['value']} | {'yes' if t['met'] else 'NO'} |")
        lines.append("")
    groups = []
    for r in results:
        if r["group"] not in groups:
            groups.append(r["group"])
    for g in groups:
        rows = [r for r in results if r["group"] == g]
        lines += [f"## {g}", "",
                  "| impl | T | MB moved | graph µs | stream µs | host µs | GB/s | ratio to copy | verify |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in sorted(rows, key=lambda r: (r["impl"], r["tokens"])):
            ratio = f"{100 * r['ratio']:.0f}%" if r.get("ratio") else "-"
            lines.append(f"| {r['impl']} | {r['tokens']} | {r['bytes_moved'] / 1e6:.3f} | {fmt(r.get('graph_us'))} | "
                         f"{fmt(r.get('stream_us'))} | {fmt(r.get('host_us'), 1)} | {fmt(r.get('gbps'), 0)} | "
                         f"{ratio} | {r.get('verify', '-')} |")
        lines.append("")
    if meta.get("host_overhead"):
        lines += ["## Python API host overhead (µs per call, wall time without sync)", "",
                  "| case | path | host µs |", "|---|---|---:|"]
        for h in meta["host_overhead"]:
            lines.append(f"| {h['case']} | {h['path']} | {h['host_us']:.1f} |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# GPU part

class CacheGeometry(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("num_blocks", "block_size", "stride_block", "stride_pos", "stride_head")]


class Mode(ctypes.Structure):
    """kvfz_mode: one axis of a quantised format's field layout."""
    _fields_ = [("rank", ctypes.c_int32), ("extent", ctypes.c_int64 * 3), ("stride", ctypes.c_int64 * 3)]


class Field(ctypes.Structure):
    """kvfz_field: one typed field of a quantised format's call."""
    _fields_ = [("role", ctypes.c_int32), ("index", ctypes.c_int32), ("dtype", ctypes.c_int32), ("buffer", ctypes.c_int32),
                ("offset", ctypes.c_int64), ("mode", Mode * 4), ("group", ctypes.c_int32), ("scale", ctypes.c_int32),
                ("zero", ctypes.c_int32), ("entry_dim", ctypes.c_int32)]


class AppendArgs(ctypes.Structure):
    """kvfz_append_args of include/kvfuzz_plugin.h (ABI version 2), field for field."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("memory", ctypes.c_int32), ("stream", ctypes.c_void_p),
        ("key", ctypes.c_void_p), ("value", ctypes.c_void_p),
        ("key_stride_token", ctypes.c_int64), ("key_stride_head", ctypes.c_int64),
        ("value_stride_token", ctypes.c_int64), ("value_stride_head", ctypes.c_int64),
        ("input_dtype", ctypes.c_int32),
        ("slot_mapping", ctypes.c_void_p), ("slot_type", ctypes.c_int32),
        ("num_slots", ctypes.c_int64), ("num_input_rows", ctypes.c_int64),
        ("k_cache", ctypes.c_void_p), ("v_cache", ctypes.c_void_p), ("cache", CacheGeometry),
        ("cache_dtype", ctypes.c_int32), ("layout", ctypes.c_int32),
        ("num_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
        ("invalid_slots", ctypes.c_void_p),
        ("scale_kind", ctypes.c_int32),
        ("k_scale", ctypes.c_void_p), ("v_scale", ctypes.c_void_p),
        ("k_scale_cache", ctypes.c_void_p), ("v_scale_cache", ctypes.c_void_p),
        ("scale_cache", CacheGeometry),
        # v2: the format family
        ("family", ctypes.c_int32), ("value_head_dim", ctypes.c_int32), ("value_cache", CacheGeometry),
        ("rope", ctypes.c_void_p), ("rope_stride_token", ctypes.c_int64), ("rope_stride_head", ctypes.c_int64),
        ("rope_dim", ctypes.c_int32),
        ("padding", ctypes.c_int32),
        ("addressing", ctypes.c_int32),
        ("batch_indices", ctypes.c_void_p),
        ("positions", ctypes.c_void_p),
        ("kv_indices", ctypes.c_void_p),
        ("kv_indptr", ctypes.c_void_p),
        ("kv_last_page_len", ctypes.c_void_p),
        ("batch_size", ctypes.c_int32),
        ("window", ctypes.c_int32),
        ("window_size", ctypes.c_int64), ("window_sinks", ctypes.c_int64),
        ("window_positions", ctypes.c_void_p),
        ("window_seq_lens", ctypes.c_void_p),
        ("cp_input", ctypes.c_int32),
        ("cp_rank", ctypes.c_int32), ("cp_world_size", ctypes.c_int32), ("cp_interleave", ctypes.c_int32),
        ("cp_positions", ctypes.c_void_p),
        # v2: the quantised formats
        ("quant_format", ctypes.c_int32), ("quant_rules", ctypes.c_uint32), ("quant_group", ctypes.c_int32),
        ("format_cache", ctypes.c_void_p), ("format_scale_cache", ctypes.c_void_p),
        ("num_fields", ctypes.c_int32), ("fields", Field * 8),
    ]


KVFZ_BENCH_UNSUPPORTED = -1  # kvfuzz_bench_append: the build's kernel lacks the case's format (bench/cuda_entry.cu)


class Unsupported(Exception):
    """An implementation that does not have the case's format: its row reads "n/a", not a failure."""


def int_view(torch, t):
    """t viewed as integers of its element size (bit comparisons; no NaN semantics)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def poisoned(torch, shape, int_dtype, device):
    """A tensor of shape and int_dtype, every byte 0xFF."""
    t = torch.empty(shape, dtype=int_dtype, device=device)
    t.view(torch.uint8).fill_(0xFF)
    return t


def fp8_reference(torch, x, scale):
    """(codes, scales) of x (a bf16 tensor [..., D]) by kvfuzz's rule, on the CPU with numpy: codes
    uint8 of x's shape; scale a float (per-tensor, scales None) or "per_token_head" (scale =
    max(amax over D, 1e-6) / 448, scales int32 bits [...])."""
    import numpy as np
    xf = x.float().cpu().numpy()
    scales = None
    if scale == "per_token_head":
        amax = np.abs(xf).max(axis=-1)
        s = np.divide(np.maximum(amax, np.float32(1e-6)), np.float32(448.0), dtype=np.float32)
        q = np.divide(xf, s[..., None], dtype=np.float32)
        scales = torch.from_numpy(s.view(np.int32).copy())
    else:
        q = np.divide(xf, np.float32(scale), dtype=np.float32)
    codes = torch.from_numpy(np.clip(q, -448.0, 448.0)).to(torch.float8_e4m3fn).view(torch.uint8)
    cross_check_fp8(q, codes)
    return codes, scales


def cross_check_fp8(q, codes):
    """A sample of the bulk fp8 reference against tests/triton/reference.py's model."""
    import numpy as np
    sys.path.insert(0, str(ROOT / "tests" / "triton"))
    import reference
    flat_q = q.reshape(-1)
    flat_c = codes.reshape(-1).numpy()
    idx = np.random.default_rng(0).choice(flat_q.size, size=min(2048, flat_q.size), replace=False)
    bad = [i for i in idx if reference.fp8_code(flat_q[i], "fp8_e4m3") != int(flat_c[i])]
    if bad:
        raise RuntimeError(f"fp8 reference disagrees with tests/triton/reference.py at {len(bad)} samples")


class Setup:
    """Tensors of one case on the GPU, and the expected contents of every cache tensor.

    Inputs: kv cases key, value [T, H, D] bf16; MLA kv [T, 576] bf16 (the projection), key = kv_c =
    kv[:, :512] and rope = k_pe = kv[:, 512:] (views, token stride 576), value None.
    tensors: {name: cache tensor} (k_cache, v_cache, per_token_head's k/v_scale_cache); expected:
    {name: (form, whole expected tensor as integers, shape of the rows placed)}."""

    def __init__(self, torch, case, gen):
        self.torch, self.case = torch, case
        H, D, T = case.heads, case.head_dim, case.tokens
        dev = "cuda"
        if case.family == "kv":
            self.key = torch.randn(T, H, D, generator=gen, device=dev).to(torch.bfloat16)
            self.value = torch.randn(T, H, D, generator=gen, device=dev).to(torch.bfloat16)
            self.kv = self.rope = None
            sources = {"k_cache": self.key, "v_cache": self.value}
        else:
            self.kv = torch.randn(T, MLA_KV_C_DIM + MLA_ROPE_DIM, generator=gen, device=dev).to(torch.bfloat16)
            self.key, self.rope = self.kv.split([MLA_KV_C_DIM, MLA_ROPE_DIM], -1)
            self.value = None
            sources = {"k_cache": torch.cat([self.key, self.rope], -1)}  # the entry: kv_c then k_pe
        cap = case.capacity
        self.num_blocks = case.num_blocks
        self.slots = torch.randperm(cap, generator=gen, device=dev)[:T].contiguous()
        self.blk = self.slots // BLOCK_SIZE
        self.pos = self.slots % BLOCK_SIZE
        cdt = torch.bfloat16 if case.cache_dtype == "bf16" else torch.uint8
        self.tensors = {f: torch.empty(case.cache_shape(f), dtype=cdt, device=dev) for f in case.forms()}
        self.k_cache, self.v_cache = self.tensors["k_cache"], self.tensors.get("v_cache")
        self.k_scale = self.v_scale = self.k_scale_cache = self.v_scale_cache = None
        if case.scale == "per_tensor":
            self.k_scale = torch.tensor([K_SCALE], dtype=torch.float32, device=dev)
            if case.has_value:
                self.v_scale = torch.tensor([V_SCALE], dtype=torch.float32, device=dev)
        elif case.scale == "per_token_head":
            if case.family != "kv" or case.layout not in ("nhd", "hnd"):
                raise ValueError(f"{case.name}: per_token_head is benchmarked for paged NHD/HND K and V only")
            sshape = (self.num_blocks, BLOCK_SIZE, H) if case.layout == "nhd" else (self.num_blocks, H, BLOCK_SIZE)
            self.k_scale_cache = self.tensors["k_scale_cache"] = torch.empty(sshape, dtype=torch.float32, device=dev)
            self.v_scale_cache = self.tensors["v_scale_cache"] = torch.empty(sshape, dtype=torch.float32, device=dev)
        self.expected = self._expected(sources)

    def _expected(self, sources):
        """The whole expected tensors: poison, and at the slots the reference rows (a bit copy for
        bf16, kvfuzz's fp8 rule for fp8), placed by place_rows and cross-checked by elem_offset."""
        torch, c = self.torch, self.case
        static = {"k_cache": K_SCALE, "v_cache": V_SCALE}
        forms = c.forms()
        out = {}
        for name, src in sources.items():
            cache = self.tensors[name]
            if c.scale == "none":
                rows, scales = int_view(torch, src), None
            else:
                codes, scales = fp8_reference(torch, src, "per_token_head" if c.scale == "per_token_head" else static[name])
                rows = codes.cuda()
            exp = poisoned(torch, cache.shape, int_view(torch, cache).dtype, cache.device)
            place_rows(forms[name], exp, rows, self.blk, self.pos)
            self._cross_check_placement(name, forms[name], exp, rows)
            out[name] = (forms[name], exp, tuple(rows.shape))
            if scales is not None:
                sname = name.replace("_cache", "_scale_cache")
                exp_s = poisoned(torch, self.tensors[sname].shape, torch.int32, cache.device)
                place_rows(c.layout, exp_s, scales.cuda(), self.blk, self.pos)
                out[sname] = (c.layout, exp_s, tuple(scales.shape))
        return out

    def _cross_check_placement(self, name, form, exp, rows, samples=512):
        """Sampled (token, head, dim) of the rows must sit in exp at elem_offset()'s flat offset:
        the tensor-shape placement and the written-out formula, two derivations of one address."""
        import random
        torch, c = self.torch, self.case
        rng = random.Random(0)
        blk, pos = self.blk.cpu().tolist(), self.pos.cpu().tolist()
        dims = rows.shape[-1]
        picks = [(rng.randrange(c.tokens), rng.randrange(c.heads), rng.randrange(dims)) for _ in range(samples)]
        offs = [elem_offset(form, exp.shape, blk[t], pos[t], h, d) for t, h, d in picks]
        t_i, h_i, d_i = (torch.tensor(v, device=rows.device) for v in zip(*picks))
        want = rows[t_i, d_i] if rows.dim() == 2 else rows[t_i, h_i, d_i]
        got = exp.reshape(-1)[torch.tensor(offs, device=exp.device)]
        if not torch.equal(got, want):
            bad = int((got != want).sum())
            raise RuntimeError(f"{c.name} {name}: the expected {form} tensor disagrees with elem_offset() at {bad} "
                               f"of {samples} sampled elements: place_rows or elem_offset is wrong")

    def poison(self):
        for t in self.tensors.values():
            t.view(self.torch.uint8).fill_(0xFF)

    def verify(self, impl=None):
        """'ok' or a description of the first tensor that differs (whole tensors compared, bit for bit)."""
        torch = self.torch
        torch.cuda.synchronize()
        for name, (form, exp, rows_shape) in self.expected.items():
            got = int_view(torch, self.tensors[name])
            if not torch.equal(got, exp):
                return self._describe(name, form, got, exp, rows_shape)
        return "ok"

    def _describe(self, name, form, got, exp, rows_shape):
        torch = self.torch
        diff = got != exp
        at_slots = torch.zeros(exp.shape, dtype=torch.bool, device=exp.device)
        place_rows(form, at_slots, torch.ones(rows_shape, dtype=torch.bool, device=exp.device), self.blk, self.pos)
        n_slot, n_out = int((diff & at_slots).sum()), int((diff & ~at_slots).sum())
        first = int(diff.reshape(-1).nonzero()[0])
        index, rest = [], first
        for extent in reversed(exp.shape):
            index.append(rest % extent)
            rest //= extent
        bits = 8 * exp.element_size()
        g, w = (int(t.reshape(-1)[first]) & ((1 << bits) - 1) for t in (got, exp))
        return (f"MISMATCH {name} ({form} {list(exp.shape)}): {n_slot} elements at the {self.case.tokens} slots differ "
                f"from the reference, {n_out} elements outside them are no longer poison; first at "
                f"{tuple(reversed(index))}: got 0x{g:0{bits // 4}x}, want 0x{w:0{bits // 4}x}")


    def disagreements(self):
        """{impl: verdict} of verified implementations to fail for differing from each other: none here,
        where each was compared with the one expected image."""
        return {}


class FormatSetup:
    """Tensors of one quantised-format case (FormatCase) on the GPU, and the checks of what an
    implementation wrote.

    Inputs key, value [T, H, D] bf16 (randn). Two byte buffers, as kvfuzz's arena has them: codes
    (K's [nb, bs, H, code_row] then V's) and scales (K's [nb, bs, H, D / group] then V's); k_codes,
    v_codes, k_scales, v_scales are views into them. nvfp4: k_global, v_global fp32 [1] decode global
    scales. verify() checks one implementation's bytes; disagreements() the implementations against
    each other."""

    ROWS_PER_CHECK = 1 << 16  # rows of check_format_rows per numpy call (memory)

    def __init__(self, torch, case, gen):
        self.torch, self.case = torch, case
        H, D, T = case.heads, case.head_dim, case.tokens
        dev = "cuda"
        self.key = torch.randn(T, H, D, generator=gen, device=dev).to(torch.bfloat16)
        self.value = torch.randn(T, H, D, generator=gen, device=dev).to(torch.bfloat16)
        self.num_blocks = case.num_blocks
        self.slots = torch.randperm(case.capacity, generator=gen, device=dev)[:T].contiguous()
        self.blk, self.pos = self.slots // BLOCK_SIZE, self.slots % BLOCK_SIZE
        self.buffers = {}  # "codes" / "scales": uint8 [2 x field bytes], K's then V's
        self.views = {}  # field name: [nb, bs, H, row] view into its buffer
        for kind in ("codes", "scales"):
            shape = case.cache_shape(f"k_{kind}")
            n = shape[0] * shape[1] * shape[2] * shape[3]
            buf = self.buffers[kind] = torch.empty(2 * n, dtype=torch.uint8, device=dev)
            self.views[f"k_{kind}"], self.views[f"v_{kind}"] = buf[:n].view(shape), buf[n:].view(shape)
        self.k_codes, self.v_codes = self.views["k_codes"], self.views["v_codes"]
        self.k_scales, self.v_scales = self.views["k_scales"], self.views["v_scales"]
        self.k_global = self.v_global = None
        if case.quant == "nvfp4":
            self.k_global = torch.tensor([NVFP4_GLOBAL["k"]], dtype=torch.float32, device=dev)
            self.v_global = torch.tensor([NVFP4_GLOBAL["v"]], dtype=torch.float32, device=dev)
        self.images = {}  # impl: (codes, scales) clones of what it wrote, for verified implementations
        self.decoded = []  # images that passed check_format_rows

    def poison(self):
        for t in self.buffers.values():
            t.fill_(0xFF)

    def verify(self, impl):
        """'ok' when every byte outside the slots' rows is still poison and the rows at the slots
        decode to within the format's quantisation error of the input (check_format_rows), else what
        is wrong. An image equal to one already decoded is not decoded again."""
        torch, c = self.torch, self.case
        torch.cuda.synchronize()
        H = c.heads
        for kind, buf in self.buffers.items():
            rest = buf.clone()
            n = buf.numel() // 2
            for half in (rest[:n], rest[n:]):
                half.view(-1, H, half.numel() // (self.num_blocks * BLOCK_SIZE * H))[self.slots] = 0xFF
            stray = rest != 0xFF
            if bool(stray.any()):
                first = int(stray.nonzero()[0])
                side, off = ("K", first) if first < n else ("V", first - n)
                shape = self.views[f"k_{kind}"].shape
                at = (off // (shape[1] * shape[2] * shape[3]), off // (shape[2] * shape[3]) % shape[1],
                      off // shape[3] % shape[2], off % shape[3])
                return (f"MISMATCH {kind}: {int(stray.sum())} bytes outside the {c.tokens} slots' rows are no longer "
                        f"poison; first: byte {first} ({side} {kind} [block, pos, head, byte] {list(at)}) holds "
                        f"0x{int(buf[first]):02x}")
        image = tuple(b.clone() for b in self.buffers.values())
        self.images[impl] = image
        if any(all(torch.equal(a, b) for a, b in zip(image, seen)) for seen in self.decoded):
            return "ok"
        for side, x, g in (("K", self.key, NVFP4_GLOBAL["k"]), ("V", self.value, NVFP4_GLOBAL["v"])):
            codes = self.views[f"{side.lower()}_codes"].reshape(-1, H, c.code_row)[self.slots].reshape(-1, c.code_row)
            scales = self.views[f"{side.lower()}_scales"].reshape(-1, H, c.scale_row)[self.slots].reshape(-1, c.scale_row)
            rows = x.reshape(-1, c.head_dim)
            for r0 in range(0, rows.shape[0], self.ROWS_PER_CHECK):
                part = slice(r0, r0 + self.ROWS_PER_CHECK)
                bad = check_format_rows(c.quant, rows[part].float().cpu().numpy(), codes[part].cpu().numpy(),
                                        scales[part].cpu().numpy(), g)
                if bad is not None:
                    r = bad[0] + r0
                    return f"DECODE {side} token {r // H} head {r % H}: {bad[1]}"
        self.decoded.append(image)
        return "ok"

    def disagreements(self):
        """{impl: verdict} for every verified implementation when their bytes are not all identical
        (which one is right is then the kvfuzz campaigns' to say, so none is timed)."""
        torch = self.torch
        names = list(self.images)
        if len(names) < 2:
            return {}
        first = self.images[names[0]]
        differ = []
        for name in names[1:]:
            for kind, a, b in zip(self.buffers, first, self.images[name]):
                diff = a != b
                if bool(diff.any()):
                    at = int(diff.nonzero()[0])
                    differ.append(f"{name} and {names[0]} differ in {int(diff.sum())} {kind} bytes (first: byte {at}: "
                                  f"{name} 0x{int(b[at]):02x}, {names[0]} 0x{int(a[at]):02x})")
        if not differ:
            return {}
        return {name: "MISMATCH between implementations: " + "; ".join(differ) for name in names}


def cache_geometry(s, field):
    """(stride_block, stride_pos, stride_head) of the ABI's kvfz_cache_geometry for one cache field."""
    c = s.case
    t = s.tensors[field]
    st = t.stride()
    form = c.forms()[field]
    if form == "nhd":
        return st[0], st[1], st[2]
    if form == "hnd":
        return st[0], st[2], st[1]
    if form == "x_packed":  # vllm_legacy: both tensors' block and head strides, stride_pos = x
        v = s.v_cache.stride()
        if (v[0], v[1]) != (st[0], st[1]):
            raise ValueError(f"{c.name}: K and V block/head strides differ: {st[:2]} vs {v[:2]}")
        return st[0], c.x, st[1]
    if form == "latent":
        return st[0], st[1], c.head_dim
    raise ValueError(f"{c.name}: no geometry for {field} of form {form}")


def flat_field(f, role, index, dtype, buffer, offset, extents, strides, group, partner):
    """Fills kvfz_field f as plugin_target's append_args does for one field of a paged tensor:
    one rank-1 mode per axis (block, pos, head, dim or group), extents and strides in elements of
    the field's dtype (nibbles for 4-bit codes); partner: its scale field (data) or data field (scale)."""
    f.role, f.index, f.dtype, f.buffer, f.offset = role, index, dtype, buffer, offset
    for axis, (extent, stride) in enumerate(zip(extents, strides)):
        f.mode[axis].rank = 1
        f.mode[axis].extent[:] = [extent, 1, 1]
        f.mode[axis].stride[:] = [stride, 0, 0]
    f.group, f.scale, f.zero, f.entry_dim = group, partner, -1, 0


def set_format_args(a, s):
    """kvfz_append_args' quantised-format part of a FormatSetup, as kvfuzz's plugin target fills it
    (src/targets/plugin/plugin_target.cpp append_args): codes dtype as cache_dtype, no classic caches,
    `cache` with the capacity and the codes' strides in bytes, nvfp4's global scales as per-tensor
    k_scale / v_scale, the default conventions' rule bits, and the fields K codes, K scales, V codes,
    V scales (each data field followed by its scale), offsets from their buffer's byte 0."""
    c = s.case
    spec = c.spec
    nib = 2 if spec.code_bits == 4 else 1  # code elements per byte
    st = s.k_codes.stride()
    a.k_cache = a.v_cache = None
    a.cache = CacheGeometry(s.num_blocks, BLOCK_SIZE, st[0], st[1], st[2])
    a.cache_dtype = spec.code_dtype
    if c.quant == "nvfp4":
        a.scale_kind = SCALE_ENUM["per_tensor"]
        a.k_scale, a.v_scale = s.k_global.data_ptr(), s.v_global.data_ptr()
    a.quant_format, a.quant_rules, a.quant_group = spec.abi, spec.rule_bits, spec.group
    a.format_cache, a.format_scale_cache = s.buffers["codes"].data_ptr(), s.buffers["scales"].data_ptr()
    a.num_fields = 4
    for index, side in enumerate("kv"):
        codes, scales = s.views[f"{side}_codes"], s.views[f"{side}_scales"]
        cs, ss = codes.stride(), scales.stride()
        flat_field(a.fields[2 * index], 0, index, spec.code_dtype, 0,
                   nib * (codes.data_ptr() - s.buffers["codes"].data_ptr()),
                   (s.num_blocks, BLOCK_SIZE, c.heads, c.head_dim), (nib * cs[0], nib * cs[1], nib * cs[2], 1),
                   spec.group, 2 * index + 1)
        flat_field(a.fields[2 * index + 1], 1, index, spec.scale_dtype, 1,
                   scales.data_ptr() - s.buffers["scales"].data_ptr(),
                   (s.num_blocks, BLOCK_SIZE, c.heads, c.scale_row), (ss[0], ss[1], ss[2], 1), spec.group, 2 * index)


def make_cuda_impl(torch, lib, s):
    c = s.case
    a = AppendArgs()
    a.struct_size = ctypes.sizeof(AppendArgs)
    a.memory = 1
    a.cp_world_size = a.cp_interleave = 1  # no context-parallel shards, as plugin_target says it
    a.key = s.key.data_ptr()
    a.key_stride_token = s.key.stride(0)
    a.key_stride_head = s.key.stride(1) if c.family == "kv" else MLA_KV_C_DIM  # kv_c as a [T, 1, 512] view
    if c.has_value:
        a.value = s.value.data_ptr()
        a.value_stride_token, a.value_stride_head = s.value.stride(0), s.value.stride(1)
    a.input_dtype = DTYPE_ENUM["bf16"]
    a.slot_mapping, a.slot_type = s.slots.data_ptr(), 1
    a.num_slots = a.num_input_rows = c.tokens
    a.num_heads, a.head_dim = c.heads, c.head_dim
    a.layout, a.family = LAYOUT_ENUM[c.layout], FAMILY_ENUM[c.family]
    if c.quant:
        set_format_args(a, s)
        return cuda_launcher(torch, lib, a, f"quantised format {c.quant}")
    a.k_cache = s.k_cache.data_ptr()
    if c.has_value:
        a.v_cache = s.v_cache.data_ptr()
    a.cache = CacheGeometry(s.num_blocks, BLOCK_SIZE, *cache_geometry(s, "k_cache"))
    a.cache_dtype = DTYPE_ENUM[c.cache_dtype]
    a.scale_kind = SCALE_ENUM[c.scale]
    if c.scale == "per_tensor":
        a.k_scale = s.k_scale.data_ptr()
        if s.v_scale is not None:
            a.v_scale = s.v_scale.data_ptr()
    elif c.scale == "per_token_head":
        a.k_scale_cache, a.v_scale_cache = s.k_scale_cache.data_ptr(), s.v_scale_cache.data_ptr()
        ss = s.k_scale_cache.stride()
        a.scale_cache = CacheGeometry(s.num_blocks, BLOCK_SIZE, ss[0], *((ss[1], ss[2]) if c.layout == "nhd" else (ss[2], ss[1])))
    if c.family == "mla":
        a.rope = s.rope.data_ptr()
        a.rope_stride_token, a.rope_stride_head = s.rope.stride(0), MLA_ROPE_DIM  # k_pe as a [T, 1, 64] view
        a.rope_dim = c.rope_dim
    return cuda_launcher(torch, lib, a, f"layout {c.layout}" if c.family == "kv" else f"family {c.family}")


def cuda_launcher(torch, lib, a, lacks):
    """A call of kvfuzz_bench_append(a) on the current stream; raises Unsupported (naming `lacks`)
    when the build's kernel lacks the case's format, RuntimeError on a launch error."""
    fn_c = lib.kvfuzz_bench_append
    ref = ctypes.byref(a)
    current_stream = torch.cuda.current_stream

    def run():
        a.stream = current_stream().cuda_stream
        rc = fn_c(ref)
        if rc == KVFZ_BENCH_UNSUPPORTED:
            raise Unsupported(f"the kernel of this build has no {lacks} (nothing launched)")
        if rc != 0:
            raise RuntimeError(f"kvfuzz_bench_append returned cudaError {rc}")
    return run


class FlashInferArgs(ctypes.Structure):
    """kvfz_flashinfer_append of examples/peers/flashinfer/paged_append.cuh, field for field."""
    _fields_ = [
        ("dtype", ctypes.c_int32), ("layout", ctypes.c_int32), ("num_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
        ("key", ctypes.c_void_p), ("value", ctypes.c_void_p),
        ("key_stride_token", ctypes.c_int64), ("key_stride_head", ctypes.c_int64),
        ("value_stride_token", ctypes.c_int64), ("value_stride_head", ctypes.c_int64),
        ("k_cache", ctypes.c_void_p), ("v_cache", ctypes.c_void_p),
        ("num_pages", ctypes.c_int64), ("page_size", ctypes.c_int64),
        ("stride_page", ctypes.c_int64), ("stride_pos", ctypes.c_int64), ("stride_head", ctypes.c_int64),
        ("batch_indices", ctypes.c_void_p), ("positions", ctypes.c_void_p), ("kv_indptr", ctypes.c_void_p),
        ("kv_indices", ctypes.c_void_p), ("kv_last_page_len", ctypes.c_void_p),
        ("batch_size", ctypes.c_int32), ("nnz", ctypes.c_int64),
        ("stream", ctypes.c_void_p),
    ]


class FlashInferPeer:
    """--peer flashinfer=PATH: FlashInfer's flashinfer::AppendPagedKVCache through PATH, the driver
    examples/peers/flashinfer/bench_driver.cu (kvfuzz_flashinfer_append(args, error, size): 0
    launched, -1 the kernel cannot take the call, else a cudaError_t). version: the FlashInfer
    version of the headers it was built against."""

    name = "flashinfer"
    BUILD = "examples/peers/flashinfer/build.sh -t bench"
    UNSUPPORTED = -1  # kvfuzz_flashinfer_append: nothing launched, the error text says why

    def __init__(self, path):
        self.path = str(pathlib.Path(path).resolve())
        lib = ctypes.CDLL(self.path)
        lib.kvfuzz_flashinfer_args_size.restype = ctypes.c_longlong
        lib.kvfuzz_flashinfer_version.restype = ctypes.c_char_p
        lib.kvfuzz_flashinfer_append.restype = ctypes.c_int
        lib.kvfuzz_flashinfer_append.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        size = lib.kvfuzz_flashinfer_args_size()
        if size != ctypes.sizeof(FlashInferArgs):
            raise ValueError(f"{path} was built with a kvfz_flashinfer_append of {size} bytes, bench.py's "
                             f"FlashInferArgs has {ctypes.sizeof(FlashInferArgs)}: rebuild it with {self.BUILD}")
        self.lib, self.version = lib, lib.kvfuzz_flashinfer_version().decode()

    @staticmethod
    def why_not(case):
        """Why the case is not one for FlashInfer's append (its row reads "n/a: ..."), or None. The
        kernel's own limits (head dims, threads per CTA, alignment) are the driver's to say."""
        if case.quant or case.family != "kv" or case.layout not in ("nhd", "hnd") or case.scale != "none":
            return "FlashInfer's append takes paged NHD/HND K and V of f16/bf16, no quantisation"
        return None

    def make_impl(self, torch, s):
        """The append on a Setup's key, value and caches, the case's slots as FlashInfer's CSR inputs
        (flashinfer_csr, on the device before anything is timed); raises Unsupported when the driver
        refuses the case, RuntimeError on a launch error."""
        c = s.case
        csr = {k: torch.tensor(v, dtype=torch.int32, device="cuda")
               for k, v in flashinfer_csr(s.slots.cpu().tolist(), BLOCK_SIZE).items()}
        if s.k_cache.stride() != s.v_cache.stride():
            raise ValueError(f"{c.name}: FlashInfer takes K and V caches of one stride, got {s.k_cache.stride()} "
                             f"and {s.v_cache.stride()}")
        a = FlashInferArgs()
        a.dtype, a.layout = DTYPE_ENUM[c.cache_dtype], LAYOUT_ENUM[c.layout]
        a.num_heads, a.head_dim = c.heads, c.head_dim
        a.key, a.value = s.key.data_ptr(), s.value.data_ptr()
        a.key_stride_token, a.key_stride_head = s.key.stride(0), s.key.stride(1)
        a.value_stride_token, a.value_stride_head = s.value.stride(0), s.value.stride(1)
        a.k_cache, a.v_cache = s.k_cache.data_ptr(), s.v_cache.data_ptr()
        a.num_pages, a.page_size = s.num_blocks, BLOCK_SIZE
        a.stride_page, a.stride_pos, a.stride_head = cache_geometry(s, "k_cache")
        a.batch_indices, a.positions = csr["batch_indices"].data_ptr(), csr["positions"].data_ptr()
        a.kv_indptr, a.kv_indices = csr["kv_indptr"].data_ptr(), csr["kv_indices"].data_ptr()
        a.kv_last_page_len = csr["kv_last_page_len"].data_ptr()
        a.batch_size, a.nnz = csr["kv_last_page_len"].numel(), c.tokens
        fn_c, ref = self.lib.kvfuzz_flashinfer_append, ctypes.byref(a)
        error = ctypes.create_string_buffer(512)
        current_stream = torch.cuda.current_stream

        def run():
            a.stream = current_stream().cuda_stream
            rc = fn_c(ref, error, len(error))
            if rc == self.UNSUPPORTED:
                raise Unsupported(f"FlashInfer's append cannot take this case: {error.value.decode()} "
                                  "(nothing launched)")
            if rc != 0:
                raise RuntimeError(f"kvfuzz_flashinfer_append returned cudaError {rc}: {error.value.decode()}")
        run.csr = csr  # the CSR tensors live as long as the call
        return run


PEERS = {"flashinfer": FlashInferPeer}  # --peer NAME: its class (name, BUILD, why_not, make_impl, version)


def make_triton_impl(torch, kt, s, variant=None, num_warps=None):
    c = s.case
    if c.quant:
        return make_triton_quant_impl(kt, s)
    kw = {}
    if c.scale == "per_tensor":
        kw = dict(scale_kind="per_tensor", k_scale=s.k_scale, v_scale=s.v_scale, cache_dtype="fp8_e4m3")
    elif c.scale == "per_token_head":
        kw = dict(scale_kind="per_token_head", k_scale_cache=s.k_scale_cache, v_scale_cache=s.v_scale_cache,
                  cache_dtype="fp8_e4m3")
    if num_warps is None:
        def run():
            kt.kv_append(s.key, s.value, s.k_cache, s.v_cache, s.slots, layout=c.layout, variant=variant, **kw)
        return run
    # Raw entry point with a prebuilt parameter block (what kv_append builds), other num_warps.
    st = s.k_cache.stride()
    sb, sp, sh = (st[0], st[1], st[2]) if c.layout == "nhd" else (st[0], st[2], st[1])
    ss = (0, 0, 0)
    if c.scale == "per_token_head":
        t = s.k_scale_cache.stride()
        ss = (t[0], t[1], t[2]) if c.layout == "nhd" else (t[0], t[2], t[1])
    p = kt.KvAppendParams(
        key=s.key, value=s.value, key_stride_token=s.key.stride(0), key_stride_head=s.key.stride(1),
        value_stride_token=s.value.stride(0), value_stride_head=s.value.stride(1), slot_mapping=s.slots,
        num_slots=c.tokens, k_cache=s.k_cache, v_cache=s.v_cache, num_blocks=s.num_blocks,
        block_size=BLOCK_SIZE, stride_block=sb, stride_pos=sp, stride_head=sh, num_heads=c.heads,
        head_dim=c.head_dim, input_dtype="bf16", cache_dtype=c.cache_dtype, scale_kind=c.scale,
        k_scale=s.k_scale, v_scale=s.v_scale, k_scale_cache=s.k_scale_cache, v_scale_cache=s.v_scale_cache,
        scale_stride_block=ss[0], scale_stride_pos=ss[1], scale_stride_head=ss[2])

    make_triton_impl.last_params = p

    def run():
        kt.launch(p, variant=variant, num_warps=num_warps)
    return run


def make_triton_quant_impl(kt, s):
    """kvfuzz_triton.kv_append_quant on a FormatSetup's tensors (the same buffers the CUDA kernel gets)."""
    c = s.case
    kw = dict(quant_format=c.quant, layout="nhd", key_scales=s.k_scales, value_scales=s.v_scales, rules=c.spec.rules)
    if c.quant == "nvfp4":
        kw.update(k_scale=s.k_global, v_scale=s.v_global, scale_layout="linear")

    def run():
        kt.kv_append_quant(s.key, s.value, s.k_codes, s.v_codes, s.slots, **kw)
    return run


def make_torch_impls(torch, s):
    """PyTorch indexing peers: {name: fn}. fp8 = cast of x / scale (device tensors), as vLLM's torch path."""
    c = s.case
    H, D = c.heads, c.head_dim
    impls = {}
    f8 = torch.float8_e4m3fn

    def quant(x, scale):
        return (x.float() / scale).to(f8).view(torch.uint8)

    if c.scale == "per_token_head":
        qmax = torch.tensor([448.0], dtype=torch.float32, device="cuda")
        floor = torch.tensor([1e-6], dtype=torch.float32, device="cuda")

        def convert(x, _):
            xf = x.float()
            scale = torch.maximum(xf.abs().amax(dim=-1), floor) / qmax
            return (xf / scale[..., None]).to(f8).view(torch.uint8), scale
    elif c.scale == "per_tensor":
        def convert(x, scale):
            return quant(x, scale), None
    else:
        def convert(x, _):
            return x, None
    if c.family == "mla":
        def index_put_mla():  # vLLM's torch path: one entry = cat(kv_c, k_pe), K's scale
            rows, _ = convert(torch.cat([s.key, s.rope], -1), s.k_scale)
            s.k_cache.view(-1, D)[s.slots] = rows
        impls["torch_index"] = index_put_mla
        return impls
    pairs = ((s.key, s.k_cache, s.k_scale, s.k_scale_cache), (s.value, s.v_cache, s.v_scale, s.v_scale_cache))
    if c.layout == "vllm_legacy":
        def index_put_legacy():  # K [nb, H, D/x, bs, x] <- [T, H, D/x, x]; V [nb, H, D, bs] <- [T, H, D]
            for (x, cache, sc, _), form in zip(pairs, ("x_packed", "transposed")):
                rows, _ = convert(x, sc)
                place_rows(form, cache, rows, s.blk, s.pos)
        impls["torch_index"] = index_put_legacy
    elif c.layout == "nhd":
        def index_put():
            for x, cache, sc, scache in pairs:
                rows, scale = convert(x, sc)
                cache.view(-1, H, D)[s.slots] = rows
                if scale is not None:
                    scache.view(-1, H)[s.slots] = scale
        impls["torch_index"] = index_put

        def index_copy():
            for x, cache, sc, scache in pairs:
                rows, scale = convert(x, sc)
                cache.view(-1, H, D).index_copy_(0, s.slots, rows)
                if scale is not None:
                    scache.view(-1, H).index_copy_(0, s.slots, scale)
        impls["torch_index_copy"] = index_copy
    else:
        def index_put_hnd():
            for x, cache, sc, scache in pairs:
                rows, scale = convert(x, sc)
                cache[s.blk, :, s.pos] = rows
                if scale is not None:
                    scache[s.blk, :, s.pos] = scale
        impls["torch_index"] = index_put_hnd
    return impls


def time_impl(torch, fn, tokens, reps):
    """{'stream_us', 'graph_us', 'host_us'} of fn (already verified)."""
    sync = torch.cuda.synchronize
    for _ in range(20):
        fn()
    sync()
    n_host = 100 if tokens <= 4096 else 20
    t0 = time.perf_counter()
    for _ in range(n_host):
        fn()
    host_us = (time.perf_counter() - t0) / n_host * 1e6
    sync()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    sync()
    stream_us = statistics.median(a.elapsed_time(b) for a, b in ev) * 1e3
    calls = 100 if tokens <= 4096 else 20
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    sync()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    sync()
    gev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(10)]
    for a, b in gev:
        a.record()
        g.replay()
        b.record()
    sync()
    graph_us = statistics.median(a.elapsed_time(b) for a, b in gev) * 1e3 / calls
    del g
    return {"stream_us": stream_us, "graph_us": graph_us, "host_us": host_us}


def host_breakdown(torch, kt, s):
    """Host µs per call of the Triton API's parts (no sync): kv_append (its launch plans and direct
    launches, and KVFUZZ_TRITON_DIRECT_LAUNCH=0's validation and JIT every call), launch() alone,
    validation alone."""
    out = []
    c = s.case
    paths = {"kv_append (API)": (make_triton_impl(torch, kt, s), "1"),
             "kv_append (API), direct launch off": (make_triton_impl(torch, kt, s), "0"),
             "launch(p) prebuilt params": (make_triton_impl(torch, kt, s, num_warps=4), "1")}
    for name, (fn, mode) in paths.items():
        previous = kt.set_direct_launch_mode(mode)
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            best.append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
        kt.set_direct_launch_mode(previous)
        out.append({"case": c.name, "path": name, "host_us": statistics.median(best)})
    import kvfuzz_triton.api as api
    real = api.launch
    api.launch = lambda *a, **k: None
    previous = kt.set_direct_launch_mode("0")  # a launch plan would skip the validation measured here
    try:
        fn = make_triton_impl(torch, kt, s)
        t0 = time.perf_counter()
        for _ in range(1000):
            fn()
        out.append({"case": c.name, "path": "kv_append validation only (launch stubbed)",
                    "host_us": (time.perf_counter() - t0) / 1000 * 1e6})
    finally:
        api.launch = real
        kt.set_direct_launch_mode(previous)
    p = make_triton_impl.last_params
    t0 = time.perf_counter()
    for _ in range(1000):
        kt.check_params(p)
    out.append({"case": c.name, "path": "check_params(p) alone", "host_us": (time.perf_counter() - t0) / 1000 * 1e6})
    dev = torch.device("cuda")
    t0 = time.perf_counter()
    for _ in range(1000):
        with torch.cuda.device(dev):
            pass
    out.append({"case": c.name, "path": "torch.cuda.device(dev) enter+exit",
                "host_us": (time.perf_counter() - t0) / 1000 * 1e6})
    return out


def run_gpu(args, cases, out_dir):
    import torch
    if not torch.cuda.is_available():
        print("bench: no CUDA device", file=sys.stderr)
        return 3
    sys.path.insert(0, str(ROOT / "kernels" / "triton"))
    kt = None
    if not args.no_triton:
        import kvfuzz_triton as kt
    libs = []
    for name, pattern, path in args.cuda_lib:
        lib = ctypes.CDLL(str(pathlib.Path(path).resolve()))
        lib.kvfuzz_bench_append.restype = ctypes.c_int
        lib.kvfuzz_bench_append.argtypes = [ctypes.c_void_p]
        if not hasattr(lib, "kvfuzz_bench_args_size"):
            # An entry built before ABI v2 reads neither layout 6 nor the family fields: it would run an
            # MLA case as K and V (V NULL: a fault that ends the process). Only paged K/V cases go to it.
            print(f"bench: {path} has no kvfuzz_bench_args_size (a bench/cuda_entry.cu before ABI v2): "
                  f"{name} runs paged NHD/HND K/V cases only; rebuild it with bench/build_cuda_entry.sh", file=sys.stderr)
            lib.kv_only = True
        else:
            lib.kvfuzz_bench_args_size.restype = ctypes.c_longlong
            size = lib.kvfuzz_bench_args_size()
            if size != ctypes.sizeof(AppendArgs):
                print(f"bench: {path} was built with a kvfz_append_args of {size} bytes, bench.py's AppendArgs has "
                      f"{ctypes.sizeof(AppendArgs)}: rebuild it with bench/build_cuda_entry.sh", file=sys.stderr)
                return 2
            lib.kv_only = False
        libs.append((name, pattern, lib))
    peers = []
    for name, path in args.peer:
        try:
            peers.append(PEERS[name](path))
        except (OSError, AttributeError, ValueError) as e:
            print(f"bench: --peer {name}={path}: {e}", file=sys.stderr)
            return 2
    props = torch.cuda.get_device_properties(0)
    import triton
    meta = {"device": f"{props.name} ({props.multi_processor_count} SMs, {props.total_memory >> 20} MiB)",
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
            "command": " ".join(sys.argv), "commit": os.environ.get("KVFUZZ_BENCH_COMMIT", ""),
            "note": "T <= 4096 stays in L2 (no flush between calls); only T = 65536 measures HBM."}
    if peers:
        meta["peers"] = {p.name: {"version": p.version, "path": p.path} for p in peers}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    results = []
    failures = 0
    t_start = time.time()
    for case in cases:
        if args.budget_s and time.time() - t_start > args.budget_s:
            print(f"bench: --budget-s {args.budget_s:g} reached; skipping {case.name} and later cases", file=sys.stderr)
            meta["skipped_for_budget"] = meta.get("skipped_for_budget", []) + [case.name]
            continue
        try:
            rows = run_case(torch, kt, libs, peers, args, case, gen)
        except Exception as e:  # one broken case must not lose the others
            print(f"bench: {case.name}: {type(e).__name__}: {e}", file=sys.stderr)
            rows = [{"impl": "setup", "verify": f"error: {type(e).__name__}: {e}"[:300]}]
        for r in rows:
            r.update({"case": case.name, "group": case.group, "tokens": case.tokens,
                      "bytes_moved": case.bytes_moved() if r["impl"] != "copy" else 2 * case.copy_bytes()})
        failures += sum(1 for r in rows if not verified(r))
        results += rows
        line = "  ".join(f"{r['impl']}={fmt(r.get('graph_us'))}" for r in rows)
        print(f"[{time.time() - t_start:6.1f}s] {case.name}: {line}", flush=True)
        (pathlib.Path(out_dir)).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(out_dir) / "bench.partial.json").write_text(json.dumps({"meta": meta, "results": results}) + "\n")
    if kt is not None:
        try:
            hcase = Case("nhd", "bf16", "none", 8, 128, 16)
            meta["host_overhead"] = host_breakdown(torch, kt, Setup(torch, hcase, gen))
            hcase = Case("nhd", "fp8_e4m3", "per_tensor", 8, 128, 16)
            meta["host_overhead"] += host_breakdown(torch, kt, Setup(torch, hcase, gen))
        except Exception as e:
            print(f"bench: host overhead: {type(e).__name__}: {e}", file=sys.stderr)
    summarise(results)
    meta["targets"] = []
    for impl in [n for n, pattern, _ in libs if not pattern] + (["triton"] if kt is not None else []):
        meta["targets"] += evaluate_targets(results, meta, impl)
    for h in meta.get("host_overhead", []):
        if h["path"] == "kv_append (API)":
            meta["targets"].append({"impl": "triton", "target": f"Python API host overhead <= 15 us ({h['case']})",
                                    "value": f"{h['host_us']:.1f} us", "met": h["host_us"] <= 15})
    meta["cases"] = [c.as_dict() for c in cases]
    meta["verify_failures"] = failures
    write_outputs(out_dir, results, meta)
    print(render_markdown(results, meta))
    if failures:
        bad = [f"{r['case']} {r['impl']}" for r in results if not verified(r)]
        print(f"bench: {failures} rows failed verification or setup (not timed): {', '.join(bad)}", file=sys.stderr)
    return 1 if failures else 0


def verified(row):
    """True for a row that passed verification, or that does not apply to its case ("n/a")."""
    v = row.get("verify", "")
    return v == "ok" or v.startswith("n/a")


def run_case(torch, kt, libs, peers, args, case, gen):
    """Verifies every implementation on one case, then times those that passed; returns its rows."""
    s = FormatSetup(torch, case, gen) if case.quant else Setup(torch, case, gen)
    impls = []
    rows = []
    for name, pattern, lib in libs:
        if select_cases([case], [pattern] if pattern else []):
            if lib.kv_only and (case.quant or not (case.family == "kv" and case.layout in ("nhd", "hnd"))):
                rows.append({"impl": name, "verify": "n/a: entry built before ABI v2"})
            else:
                impls.append((name, make_cuda_impl(torch, lib, s)))
    for peer in peers:
        why = peer.why_not(case)
        if why:
            rows.append({"impl": peer.name, "verify": f"n/a: {why}"})
        else:
            impls.append((peer.name, peer.make_impl(torch, s)))
    if kt is not None and not case.triton_supported():
        rows.append({"impl": "triton", "verify": f"n/a: kvfuzz_triton takes layouts {'/'.join(TRITON_LAYOUTS)}, family kv"})
    elif kt is not None:
        impls.append(("triton", make_triton_impl(torch, kt, s)))
        if case.tokens in args.triton_variants and case.heads == 8 and case.head_dim == 128 and not case.quant:
            # The kernel kv_append picks (the row kernel here) with other warp counts, and the general
            # kernel's two variants.
            for w in (1, 2, 8):
                impls.append((f"triton:w{w}", make_triton_impl(torch, kt, s, num_warps=w)))
            for other in ("token", "head"):
                impls.append((f"triton:{other}", make_triton_impl(torch, kt, s, variant=other)))
            if case.layout == "hnd":
                impls.append(("triton:token:w8", make_triton_impl(torch, kt, s, variant="token", num_warps=8)))
                impls.append(("triton:head:w1", make_triton_impl(torch, kt, s, variant="head", num_warps=1)))
    if not args.no_torch and not case.quant:
        impls += list(make_torch_impls(torch, s).items())
    src = torch.empty(case.copy_bytes(), dtype=torch.uint8, device="cuda").random_(0, 255, generator=gen)
    dst = torch.empty_like(src)
    copy_t = time_impl(torch, lambda: dst.copy_(src), case.tokens, args.reps)
    rows.insert(0, {"impl": "copy", "verify": "ok" if torch.equal(src, dst) else "FAIL", **copy_t})
    verdicts = {}
    for name, fn in impls:
        try:
            s.poison()
            fn()
            verdicts[name] = s.verify(name)
        except Unsupported as e:
            verdicts[name] = f"n/a: {e}"
        except Exception as e:  # a launch or compile error is a result, not a crash of the bench
            verdicts[name] = f"error: {type(e).__name__}: {e}"[:300]
    verdicts.update(s.disagreements())
    for name, fn in impls:
        verdict = verdicts[name]
        if verdict != "ok":  # a wrong cache is reported, never timed
            if not verdict.startswith("n/a"):
                print(f"bench: VERIFY FAILED {case.name} {name}: {verdict}", file=sys.stderr)
            rows.append({"impl": name, "verify": verdict[:600]})
            continue
        try:
            t = time_impl(torch, fn, case.tokens, args.reps)
        except Exception as e:
            torch.cuda.synchronize()
            t = {"timing_error": f"{type(e).__name__}: {e}"[:300]}
            print(f"bench: {case.name} {name}: timing: {t['timing_error']}", file=sys.stderr)
        rows.append({"impl": name, "verify": verdict, **t})
    return rows


def write_outputs(out_dir, results, meta):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("bench.json", "bench.md"):
        if (out / name).exists():
            raise FileExistsError(f"bench: {out / name} exists; not overwriting")
    (out / "bench.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    (out / "bench.md").write_text(render_markdown(results, meta) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    cases = select_cases(all_cases(args.tokens), args.cases)
    if args.list:
        for c in cases:
            print(f"{c.name}  {c.bytes_moved() / 1e6:.3f} MB")
        return 0
    if not cases:
        print("bench: no case matches --cases", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    if (out / "bench.json").exists() or (out / "bench.md").exists():
        print(f"bench: {out} already holds bench.json/bench.md; choose another --out", file=sys.stderr)
        return 2
    return run_gpu(args, cases, out)


if __name__ == "__main__":
    sys.exit(main())
