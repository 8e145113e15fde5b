"""Hand-built batches of the quantised formats for test_formats.py: buffers, fields, expected bytes.

A FormatCase holds the input rows, slot_mapping and the two byte buffers a format writes (the cache
and, for nvfp4, MX and the asymmetric formats, the scale cache), both filled with a canary byte, and
the fields laid out by hand from the description of src/case/quant_fields.cpp (not from its code):

  nvfp4, mxfp4       codes [nb, bs, H, D/2] bytes (nibbles: pos stride 2*H*D/2, ...), scales [nb, bs, H, S]
                     (S = D/16 or D/32), NVFP4's V (swizzled_v) or K and V (swizzled) 4x4-transposed
  mxfp8_e4m3/e5m2    codes [nb, bs, H, D], scales as mxfp4
  ds_mla             one record per slot (H 1): latent codes, fp32 scales, rope in the input dtype
  indexer_k          per block: bs rows of D codes, then bs * D/128 fp32 scales (H 1)
  fp8_/int8_inline   rows of D codes and an fp32 scale at byte D, row stride D + pad
  asym_int8/int4     codes [nb, bs, H, D] (or D/2 bytes, split_half or adjacent nibbles); per row an
                     fp32 scale and zero point side by side in the scale cache

K's rows come first in each buffer, then a gap of GAP bytes, then V's. expected() writes what the
numpy model (format_reference.py) says into copies of the buffers; everything else must keep its
canary, so comparing whole buffers also catches stray writes.
"""
import dataclasses

import ml_dtypes
import numpy as np

import format_reference as ref
from kvfuzz_triton import HostPtr, KvAppendParams
from kvfuzz_triton.format_api import FormatField, FormatRules

CANARY = 0xA5
GAP = 16
SCALE_CANARY = 0x5A
GROUP = {"nvfp4": 16, "mxfp8_e4m3": 32, "mxfp8_e5m2": 32, "mxfp4": 32, "ds_mla": 128, "indexer_k": 128}
TRITON = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}


def to_bits(values, dtype):
    """float32 values -> the input dtype's bits (round to nearest even)."""
    v = np.asarray(values, np.float32)
    if dtype == "f16":
        return v.astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        return v.astype(ml_dtypes.bfloat16).view(np.uint16)
    return v.view(np.uint32)


def widen(bits, dtype):
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float32)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float32)


@dataclasses.dataclass
class FormatCase:
    fmt: str
    in_dtype: str
    rules: FormatRules
    scale_layout: str
    T: int
    H: int
    D: int  # the row's dims (ds_mla: latent + rope)
    NB: int
    BS: int
    slots: np.ndarray
    key: np.ndarray  # [T, key row] bits
    value: np.ndarray
    rope: np.ndarray
    rope_dim: int
    cache: np.ndarray
    scales: np.ndarray
    fields: dict  # name -> FormatField
    globals: np.ndarray  # fp32 [2]: nvfp4's K and V global scales
    has_value: bool
    counter: np.ndarray

    @property
    def latent(self):
        return self.D - self.rope_dim

    def params(self):
        P = HostPtr.of
        t = TRITON[self.in_dtype]
        stride = self.key.shape[1]
        return KvAppendParams(
            key=P(self.key, t), value=P(self.value, t), key_stride_token=stride, key_stride_head=self.D if self.fmt != "ds_mla" else 0,
            value_stride_token=stride, value_stride_head=self.D, slot_mapping=P(self.slots, "i64"),
            num_slots=self.T, k_cache=None, v_cache=None, num_blocks=self.NB, block_size=self.BS, stride_block=0,
            stride_pos=0, stride_head=0, num_heads=self.H, head_dim=self.D, input_dtype=self.in_dtype,
            invalid_slots=P(self.counter, "i64"), has_value=self.has_value,
            rope=P(self.rope, t) if self.rope_dim else None, rope_stride_token=self.rope.shape[1], rope_dim=self.rope_dim,
            k_scale=P(self.globals[:1], "fp32"), v_scale=P(self.globals[1:], "fp32"),
            quant_format=self.fmt, format_rules=self.rules, format_cache=P(self.cache, "u8"),
            format_scales=P(self.scales if self.scales.size else self.cache, "u8"),
            k_codes=self.fields.get("kc"), v_codes=self.fields.get("vc"), k_scales=self.fields.get("ks"),
            v_scales=self.fields.get("vs"), k_zeros=self.fields.get("kz"), v_zeros=self.fields.get("vz"),
            rope_field=self.fields.get("rp"))


# ---------------------------------------------------------------------------------------------
# Values

def row_values(rng, kind, n, dtype):
    """n float32 values of one row, of a kind that exercises the formats' edges."""
    big = {"f16": 60000.0, "bf16": 3e38, "f32": 3e38}[dtype]
    if kind == "normal":
        return (rng.standard_normal(n) * 2.0 ** rng.integers(-6, 6)).astype(np.float32)
    if kind == "specials":  # NaN, ±Inf, ±0 and ordinary values
        v = rng.standard_normal(n).astype(np.float32)
        v[rng.integers(0, n)] = np.nan
        v[rng.integers(0, n)] = np.inf
        v[rng.integers(0, n)] = -np.inf
        v[rng.integers(0, n)] = -0.0
        return v
    if kind == "nan":  # NaN in every lane but a few
        v = np.full(n, np.nan, np.float32)
        v[rng.integers(0, n)] = 1.5
        return v
    if kind == "zeros":
        return np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(np.float32)
    if kind == "constant":
        return np.full(n, 0.75, np.float32)
    if kind == "grid":  # values on a coarse grid: quotients at rounding ties
        return (rng.integers(-24, 25, n) * 0.125).astype(np.float32)
    if kind == "huge":
        return (rng.choice([-1.0, 1.0], n) * big * rng.random(n)).astype(np.float32)
    if kind == "tiny":
        return (rng.standard_normal(n) * 1e-6).astype(np.float32)
    if kind == "positive":
        return (rng.random(n) * 3 + 0.5).astype(np.float32)
    raise ValueError(kind)


KINDS = ("normal", "specials", "grid", "zeros", "constant", "huge", "tiny", "positive", "nan")


# ---------------------------------------------------------------------------------------------
# Building

def make_case(fmt, in_dtype="bf16", rules=None, scale_layout="linear", T=5, H=2, D=64, NB=3, BS=4, seed=0,
              kinds=None, pad=4, rope_dim=0, has_value=True):
    rng = np.random.default_rng(seed)
    rules = rules or FormatRules()
    if fmt in ("ds_mla", "indexer_k"):
        H, has_value = 1, False
    four = fmt in ("nvfp4", "mxfp4", "asym_int4")
    fields = {}
    # Rows of the cache buffer, in bytes: code bytes (+ inline scale and padding).
    if fmt == "ds_mla":
        latent = D - rope_dim
        groups = latent // 128
        row = latent + 4 * groups + 2 * rope_dim * (2 if in_dtype == "f32" else 1)
    elif fmt in ("fp8_inline", "int8_inline"):
        row = D + pad
    else:
        row = D // 2 if four else D
    if fmt == "indexer_k":
        groups = D // 128
        block_bytes = BS * D + BS * groups * 4 + 8
        cache = np.full(NB * block_bytes, CANARY, np.uint8)
        fields["kc"] = FormatField.flat(0, block_bytes, D, 0)
        fields["ks"] = FormatField.flat(BS * D // 4, block_bytes // 4, groups, groups)
        scales = np.zeros(0, np.uint8)
    else:
        tensor = NB * BS * H * row
        v_at = tensor + GAP
        cache = np.full(2 * tensor + GAP, CANARY, np.uint8)
        unit = 2 if four else 1  # code elements per byte
        for name, at in (("kc", 0), ("vc", v_at)):
            fields[name] = FormatField.flat(at * unit, BS * H * row * unit, H * row * unit, row * unit)
        if fmt == "asym_int4" and rules.int4_pairing == "split_half":  # dim d at nibble 2 (d mod D/2) + d // (D/2)
            for name in ("kc", "vc"):
                f = fields[name]
                fields[name] = dataclasses.replace(f, dim_x=D // 2, dim0=2, dim1=1)
        if fmt == "ds_mla":
            fields["ks"] = FormatField.flat(latent // 4, BS * row // 4, row // 4, 0)
            rope_unit = 4 if in_dtype == "f32" else 2
            fields["rp"] = FormatField.flat((latent + 4 * groups) // rope_unit, BS * row // rope_unit, row // rope_unit, 0)
        elif fmt in ("fp8_inline", "int8_inline"):
            for name, at in (("ks", 0), ("vs", v_at)):
                fields[name] = FormatField.flat((at + D) // 4, BS * H * row // 4, H * row // 4, row // 4)
        if fmt in ("ds_mla", "fp8_inline", "int8_inline"):
            scales = np.zeros(0, np.uint8)
        else:  # the scale cache: S elements per row (asymmetric: scale and zero point, fp32 words)
            asym = fmt in ("asym_int8", "asym_int4")
            S = 2 if asym else D // GROUP[fmt]
            tensor_s = NB * BS * H * S
            v_s = tensor_s + (GAP // 4 if asym else GAP)
            scales = np.full((2 * tensor_s + (GAP // 4 if asym else GAP)) * (4 if asym else 1), SCALE_CANARY, np.uint8)
            for name, at in (("ks", 0), ("vs", v_s)):
                fields[name] = FormatField.flat(at, BS * H * S, H * S, S)
                if asym:
                    fields[name[0] + "z"] = dataclasses.replace(fields[name], offset=at + 1)
                swizzled = fmt == "nvfp4" and (scale_layout == "swizzled" or (scale_layout == "swizzled_v" and name == "vs"))
                if swizzled:  # (t, s) at (4 (t/4) + s/(S/4), 4 (s mod S/4) + t mod 4) of the linear layout
                    P = H * S
                    fields[name] = dataclasses.replace(fields[name], pos_x=4, pos0=1, pos1=4 * P, dim_x=S // 4, dim0=4,
                                                       dim1=P)
    # Inputs: rows of H heads x D dims (ds_mla: kv_c's latent dims) plus 3 elements of padding.
    width = (D - rope_dim) if fmt == "ds_mla" else H * D
    kinds = kinds or KINDS
    def rows(salt):
        out = np.zeros((T, width + 3), np.float32)
        out[:, width:] = np.nan
        for t in range(T):
            for h in range(H if fmt != "ds_mla" else 1):
                n = width if fmt == "ds_mla" else D
                out[t, h * D:h * D + n] = row_values(rng, kinds[(t * H + h + salt) % len(kinds)], n, in_dtype)
        return to_bits(out, in_dtype)
    key, value = rows(0), rows(3)
    rope = to_bits(rng.standard_normal((T, rope_dim + 2)).astype(np.float32), in_dtype)
    capacity = NB * BS
    order = rng.permutation(capacity)[:T].astype(np.int64)
    order[1] = -1  # padding
    if T > 3:
        order[3] = capacity + 5  # beyond the cache: never written, counted
    globals_ = np.array([0.013, 2.5e-3], np.float32)
    return FormatCase(fmt, in_dtype, rules, scale_layout, T, H, D, NB, BS, order, key, value, rope, rope_dim, cache,
                      scales, fields, globals_, has_value, np.zeros(1, np.int64))


def run(c, **launch_args):
    from kvfuzz_triton import launch
    launch(c.params(), **launch_args)


# ---------------------------------------------------------------------------------------------
# What the buffers must hold afterwards

def put(buf, dtype, elem, value):
    if dtype == "nibble":
        b, hi = divmod(int(elem), 2)
        buf[b] = (buf[b] & (0x0F if hi else 0xF0)) | ((value & 0xF) << (4 if hi else 0))
    elif dtype == "u8":
        buf[int(elem)] = value & 0xFF
    elif dtype == "f32":
        buf.view(np.float32)[int(elem)] = value
    elif dtype == "u16":
        buf.view(np.uint16)[int(elem)] = value
    elif dtype == "u32":
        buf.view(np.uint32)[int(elem)] = value


def expected(c):
    """(cache, scales) after the call, from format_reference.py."""
    cache, scales = c.cache.copy(), c.scales.copy()
    scale_buf = cache if c.fmt in ("ds_mla", "indexer_k", "fp8_inline", "int8_inline") else scales
    code_t = "nibble" if c.fmt in ("nvfp4", "mxfp4", "asym_int4") else "u8"
    r = c.rules
    for t in range(c.T):
        slot = int(c.slots[t])
        if slot < 0 or slot >= c.NB * c.BS:
            continue
        block, pos = divmod(slot, c.BS)
        tensors = (("k", c.key, c.globals[0]),) + ((("v", c.value, c.globals[1]),) if c.has_value else ())
        for side, src, g in tensors:
            for h in range(c.H):
                n = c.latent
                x = widen(src[t, h * c.D:h * c.D + n].copy(), c.in_dtype)
                codes_f, scale_f, zero_f = c.fields[side + "c"], c.fields[side + "s"], c.fields.get(side + "z")
                code_at = lambda d, q: put(cache, code_t, codes_f.at(block, pos, h, d), q)  # noqa: E731
                G = GROUP.get(c.fmt, 0)
                if G:
                    for gi in range(n // G):
                        xs = x[gi * G:(gi + 1) * G]
                        if c.fmt == "nvfp4":
                            q, s = ref.nvfp4(xs, g, r.nvfp4)
                            put(scale_buf, "u8", scale_f.at(block, pos, h, gi), s)
                        elif c.fmt in ref.MX:
                            q, s = ref.mx(xs, c.fmt, r.mx)
                            put(scale_buf, "u8", scale_f.at(block, pos, h, gi), s)
                        else:
                            q, s = (ref.ds_mla_tile(xs, r.ds_mla) if c.fmt == "ds_mla" else ref.indexer_tile(xs, r.indexer))
                            put(scale_buf, "f32", scale_f.at(block, pos, h, gi), s)
                        for j, code in enumerate(q):
                            code_at(gi * G + j, code)
                elif c.fmt in ("fp8_inline", "int8_inline"):
                    q, s = ref.inline(x, c.fmt)
                    put(scale_buf, "f32", scale_f.at(block, pos, h, 0), s)
                    for d, code in enumerate(q):
                        code_at(d, code)
                else:
                    int4 = c.fmt == "asym_int4"
                    width = c.D // 2 if int4 and r.int4_pairing == "split_half" else c.D
                    q, s, z = ref.asym(x, 15 if int4 else 255, "f32" if int4 else r.asym_arith, r.asym_lanes, width)
                    put(scale_buf, "f32", scale_f.at(block, pos, h, 0), s)
                    put(scale_buf, "f32", zero_f.at(block, pos, h, 0), z)
                    for d, code in enumerate(q):
                        code_at(d, code)
        if c.fmt == "ds_mla":  # the rope dims, bit copies
            rp = c.fields["rp"]
            for d in range(c.rope_dim):
                put(cache, "u32" if c.in_dtype == "f32" else "u16", rp.at(block, pos, 0, d), int(c.rope[t, d]))
    return cache, scales


def describe_difference(name, got, want):
    diff = np.nonzero(got != want)[0]
    if diff.size == 0:
        return ""
    i = diff[:8]
    return f"{name}: {diff.size} bytes differ, first at {list(i)}: got {list(got[i])}, expected {list(want[i])}"
