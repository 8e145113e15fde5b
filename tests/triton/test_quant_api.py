"""kv_append_quant (kvfuzz_triton/quant_api.py), the torch API of the quantised formats, under the interpreter.

The API reads only .shape, .stride(), .data_ptr(), .element_size(), .dtype and .device of its
tensors, so FakeTensor (a numpy view that speaks that much of torch, and Triton's pointer protocol
through HostPtr) stands in for torch, which the test venv lacks. Each test views the buffers of a
hand-built batch (format_cases.py) as the API's tensors, K and V caches as two views into one
buffer, and expects exactly the bytes test_formats.py checks for the raw entry point.

    build/venv-triton/bin/python -m pytest -q tests/triton/test_quant_api.py
"""
import os

import numpy as np
import pytest

from format_cases import GROUP, describe_difference, expected, make_case
from kvfuzz_triton import HostPtr, kv_append_quant
from kvfuzz_triton.format_api import FormatRules

# Interpreter only: these launches pass host buffers (numpy through HostPtr), which a GPU launch
# refuses. On the GPU the formats are checked by `kvfuzz run --target triton` (the AOT cubins) and
# by bench/bench.py's nvfp4 and mxfp8 rows (kv_append_quant on CUDA tensors).
pytestmark = pytest.mark.skipif(os.environ.get("KVFUZZ_TRITON_GPU") == "1", reason="interpreter-only test")

TORCH = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


class FakeTensor(HostPtr):
    class _Device:
        type = "cpu"

        def __str__(self):
            return "cpu"

    def __init__(self, base, offset, shape, strides, dtype, itemsize):
        """A view of `shape` and element `strides` at element `offset` of numpy array `base`."""
        super().__init__(base.ctypes.data + offset * itemsize, "torch." + dtype)
        self.base, self.shape, self.strides, self.itemsize = base, tuple(shape), tuple(strides), itemsize
        self.device = FakeTensor._Device()

    def stride(self, i=None):
        return self.strides if i is None else self.strides[i]

    def element_size(self):
        return self.itemsize


def fake(array, dtype, offset=0, shape=None, strides=None):
    shape = array.shape if shape is None else shape
    strides = tuple(s // array.itemsize for s in array.strides) if strides is None else strides
    return FakeTensor(array, offset, shape, strides, dtype, array.itemsize)


def call(c, **extra):
    """kv_append_quant on views of c's buffers, in the API's shapes."""
    T, H, D = c.T, c.H, c.D
    row_width = c.key.shape[1]
    in_t = TORCH[c.in_dtype]
    slots = fake(c.slots, "int64")
    counter = fake(c.counter, "int64")
    kw = dict(quant_format=c.fmt, rules=c.rules, invalid_slots=counter)
    if c.fmt in ("ds_mla", "indexer_k"):
        width = c.latent
        key = fake(c.key, in_t, 0, (T, width), (row_width, 1))
        G = D // 128 if c.fmt == "indexer_k" else (c.latent // 128)
        if c.fmt == "ds_mla":
            record = c.fields["kc"].pos1
            cache = fake(c.cache, "uint8", 0, (c.NB, c.BS, record), (record * c.BS, record, 1))
            rope = fake(c.rope, in_t, 0, (T, c.rope_dim), (c.rope.shape[1], 1))
            kw["rope"] = rope
        else:
            block = c.fields["kc"].block
            cache = fake(c.cache, "uint8", 0, (c.NB, c.BS, D + 4 * G), (block, D + 4 * G, 1))
        kv_append_quant(key, None, cache, None, slots, **kw, **extra)
        return
    four = c.fmt in ("nvfp4", "mxfp4", "asym_int4")
    key = fake(c.key, in_t, 0, (T, H, D), (row_width, D, 1))
    value = fake(c.value, in_t, 0, (T, H, D), (row_width, D, 1))
    unit = 2 if four else 1
    caches = []
    for side in ("kc", "vc"):
        f = c.fields[side]
        row = f.head // unit
        caches.append(fake(c.cache, "uint8", f.offset // unit, (c.NB, c.BS, H, row),
                           (f.block // unit, f.pos1 // unit, row, 1)))
    if c.fmt not in ("fp8_inline", "int8_inline"):
        asym = c.fmt in ("asym_int8", "asym_int4")
        S = 2 if asym else D // GROUP[c.fmt]
        buf = c.scales.view(np.float32) if asym else c.scales
        for name, side in (("key_scales", "ks"), ("value_scales", "vs")):
            f = c.fields[side]
            block = f.block
            kw[name] = fake(buf, "float32" if asym else "uint8", f.offset, (c.NB, c.BS, H, S), (block, H * S, S, 1))
    if c.fmt == "nvfp4":
        kw["k_scale"] = fake(c.globals[:1], "float32")
        kw["v_scale"] = fake(c.globals[1:], "float32")
        kw["scale_layout"] = c.scale_layout
    kv_append_quant(key, value, caches[0], caches[1], slots, **{**kw, **extra})


CASES = [
    ("nvfp4", dict(scale_layout="swizzled_v", D=64, BS=4), FormatRules(nvfp4="flashinfer_precise")),
    ("nvfp4", dict(scale_layout="swizzled", D=64, BS=4), FormatRules()),
    ("mxfp4", dict(D=64), FormatRules(mx="nv_ceil")),
    ("mxfp8_e5m2", dict(D=64), FormatRules()),
    ("fp8_inline", dict(D=48, pad=16), FormatRules()),
    ("int8_inline", dict(D=48, pad=4), FormatRules()),
    ("asym_int8", dict(D=48), FormatRules(asym_arith="bf16", asym_lanes="zero_padded_pow2")),
    ("asym_int4", dict(D=80), FormatRules(int4_pairing="split_half")),
    ("asym_int4", dict(D=64), FormatRules(int4_pairing="adjacent")),
    ("ds_mla", dict(D=256 + 32, rope_dim=32), FormatRules(ds_mla="flt_min")),
    ("indexer_k", dict(D=256), FormatRules(indexer="ue8m0_exact")),
]


@pytest.mark.parametrize("fmt,kw,rules", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_kv_append_quant_writes_what_the_raw_entry_point_does(fmt, kw, rules):
    c = make_case(fmt, "bf16", rules, seed=21, **kw)
    want_cache, want_scales = expected(c)
    call(c)
    problems = [p for p in (describe_difference("cache", c.cache, want_cache),
                            describe_difference("scales", c.scales, want_scales)) if p]
    assert not problems, "; ".join(problems)
    assert c.counter[0] == 1


def test_kv_append_quant_refuses_negative_views():
    c = make_case("nvfp4", "bf16", D=64, BS=4, seed=23)
    neg = fake(c.globals[:1], "float32")
    neg.is_neg = lambda: True  # as torch._neg_view's tensors: the memory holds the values negated
    with pytest.raises(ValueError, match=r"k_scale is a negative view .*k_scale.resolve_neg\(\)"):
        call(c, k_scale=neg)
    assert c.counter[0] == 0  # nothing launched


def test_kv_append_quant_names_what_does_not_fit():
    c = make_case("nvfp4", "bf16", D=64, BS=4, seed=22)
    with pytest.raises(ValueError, match="nvfp4 needs k_scale"):
        kv_append_quant(
            fake(c.key, "bfloat16", 0, (c.T, c.H, c.D), (c.key.shape[1], c.D, 1)), None,
            fake(c.cache, "uint8", 0, (c.NB, c.BS, c.H, c.D // 2), (c.BS * c.H * c.D // 2, c.H * c.D // 2, c.D // 2, 1)),
            None, fake(c.slots, "int64"), quant_format="nvfp4",
            key_scales=fake(c.scales, "uint8", 0, (c.NB, c.BS, c.H, c.D // 16), (c.BS * c.H * 4, c.H * 4, 4, 1)))
    with pytest.raises(ValueError, match="quant_format must be one of"):
        kv_append_quant(None, None, None, None, None, quant_format="nvfp8")
    with pytest.raises(ValueError, match="scale_layout is nvfp4's"):
        kv_append_quant(None, None, None, None, None, quant_format="mxfp4", scale_layout="swizzled")
    key = fake(c.key, "bfloat16", 0, (c.T, c.H, c.D), (c.key.shape[1], c.D, 1))
    wrong = fake(c.cache, "uint8", 0, (c.NB, c.BS, c.H, c.D), (c.BS * c.H * c.D, c.H * c.D, c.D, 1))  # D, not D/2
    with pytest.raises(ValueError, match="expected 2 heads and rows of 32 elements"):
        kv_append_quant(key, None, wrong, None, fake(c.slots, "int64"), quant_format="nvfp4",
                        key_scales=wrong, k_scale=fake(c.globals[:1], "float32"))
