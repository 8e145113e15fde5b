"""The quantised formats of kv_append_format_kernel under Triton's interpreter, against format_reference.py.

Every format x every convention it reads, on small hand-built batches (format_cases.py: padding,
an invalid slot, shuffled slots, rows of NaN, ±Inf, ±0, constant, tiny, huge and grid values) in
bf16, f16 and f32 inputs; whole buffers compared byte for byte (codes, scales, zero points, and
every canary byte around them). Plus the codecs one by one against ml_dtypes, and the tiles the
ahead-of-time build uses.

    build/venv-triton/bin/python -m pytest -q tests/triton/test_formats.py
"""
import itertools
import os

import ml_dtypes
import numpy as np
import pytest

import format_reference as ref
from format_cases import describe_difference, expected, make_case, run
from kvfuzz_triton.format_api import FORMAT_AOT_BLOCK, FormatRules

# Interpreter only: these launches pass host buffers (numpy through HostPtr), which a GPU launch
# refuses. On the GPU the formats are checked by `kvfuzz run --target triton` (the AOT cubins) and
# by bench/bench.py's nvfp4 and mxfp8 rows (kv_append_quant on CUDA tensors).
pytestmark = pytest.mark.skipif(os.environ.get("KVFUZZ_TRITON_GPU") == "1", reason="interpreter-only test")

INPUTS = ("bf16", "f16", "f32")


def check(c, **launch_args):
    want_cache, want_scales = expected(c)
    run(c, **launch_args)
    problems = [describe_difference("cache", c.cache, want_cache), describe_difference("scales", c.scales, want_scales)]
    problems = [p for p in problems if p]
    assert not problems, "; ".join(problems)
    assert c.counter[0] == (1 if c.T > 3 else 0), "the invalid slot is counted once"


@pytest.mark.parametrize("in_dtype", INPUTS)
@pytest.mark.parametrize("rule", ["flashinfer", "flashinfer_precise"])
@pytest.mark.parametrize("scale_layout", ["linear", "swizzled_v", "swizzled"])
def test_nvfp4(in_dtype, rule, scale_layout):
    check(make_case("nvfp4", in_dtype, FormatRules(nvfp4=rule), scale_layout=scale_layout, D=64, BS=4, seed=1))


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4"])
@pytest.mark.parametrize("rule", ["ocp_floor", "nv_ceil"])
@pytest.mark.parametrize("in_dtype", INPUTS)
def test_mx(fmt, rule, in_dtype):
    check(make_case(fmt, in_dtype, FormatRules(mx=rule), D=64, seed=2))


@pytest.mark.parametrize("rule", ["flt_min", "pow2"])
@pytest.mark.parametrize("in_dtype", INPUTS)
def test_ds_mla(rule, in_dtype):
    check(make_case("ds_mla", in_dtype, FormatRules(ds_mla=rule), D=256 + 32, rope_dim=32, seed=3))


def test_ds_mla_record_of_656_bytes():
    c = make_case("ds_mla", "bf16", FormatRules(ds_mla="pow2"), D=576, rope_dim=64, T=3, NB=2, BS=2, seed=4)
    assert c.cache.size == 2 * 2 * 2 * 656 + 16  # K's records, the gap, V's (unused) records
    check(c)


@pytest.mark.parametrize("rule", ["fp32", "ue8m0_log2f", "ue8m0_exact"])
@pytest.mark.parametrize("in_dtype", INPUTS)
def test_indexer_k(rule, in_dtype):
    check(make_case("indexer_k", in_dtype, FormatRules(indexer=rule), D=256, seed=5))


def test_indexer_log2f_rounds_down_just_above_a_power_of_two():
    # amax / 448 = 1024 (1 + 2^-23): log2f rounds to 10, so ue8m0_log2f stores 2^10, ue8m0_exact 2^11.
    c = make_case("indexer_k", "f32", FormatRules(indexer="ue8m0_log2f"), D=128, T=2, NB=1, BS=2, seed=6)
    amax = np.float32(458752.03125)
    assert ref.pow2_ceil_log2f(amax / np.float32(448)) == 1024 and ref.pow2_ceil(amax / np.float32(448)) == 2048
    for t in range(2):
        c.key[t, :128] = np.linspace(-1, 1, 128, dtype=np.float32).view(np.uint32)
        c.key[t, 7] = amax.view(np.uint32)
    c.slots[:] = [0, 1]
    check(c)
    assert c.cache[:2 * 128 + 8].size  # codes and the two scales were compared whole
    scales = c.cache[256:264].view(np.float32)
    assert list(scales) == [1024.0, 1024.0]


@pytest.mark.parametrize("fmt", ["fp8_inline", "int8_inline"])
@pytest.mark.parametrize("pad", [4, 16])
@pytest.mark.parametrize("in_dtype", INPUTS)
def test_inline(fmt, pad, in_dtype):
    check(make_case(fmt, in_dtype, D=48, pad=pad, seed=7))


@pytest.mark.parametrize("arith", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("lanes", ["exact", "zero_padded_pow2"])
@pytest.mark.parametrize("D", [64, 48])
def test_asym_int8(arith, lanes, D):
    check(make_case("asym_int8", "f16", FormatRules(asym_arith=arith, asym_lanes=lanes), D=D, seed=8))


@pytest.mark.parametrize("pairing", ["split_half", "adjacent"])
@pytest.mark.parametrize("lanes", ["exact", "zero_padded_pow2"])
@pytest.mark.parametrize("D", [64, 80, 40])
def test_asym_int4(pairing, lanes, D):
    check(make_case("asym_int4", "bf16", FormatRules(int4_pairing=pairing, asym_lanes=lanes), D=D, seed=9))


def test_asym_int4_ignores_the_arithmetic_rule():
    # LMDeploy's int4 path upcasts to fp32: asym_arith does not apply (block_quant.h).
    check(make_case("asym_int4", "f16", FormatRules(asym_arith="bf16"), D=64, seed=10))


@pytest.mark.parametrize("fmt", ["asym_int8", "asym_int4"])
def test_asym_zero_padding_shows_only_off_powers_of_two(fmt):
    # Rows of positive values: the zero_padded_pow2 convention's min is 0 when the width is not a
    # power of two, the row's own min when it is.
    for D, differs in ((64, False), (48 if fmt == "asym_int8" else 80, True)):
        caches = []
        for lanes in ("exact", "zero_padded_pow2"):
            c = make_case(fmt, "f32", FormatRules(asym_lanes=lanes, int4_pairing="split_half"), D=D, seed=11,
                          kinds=("positive",))
            check(c)
            caches.append(c.scales.copy())
        assert (not np.array_equal(*caches)) == differs, (D, differs)


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8_e4m3", "ds_mla", "indexer_k", "fp8_inline", "asym_int8",
                                 "asym_int4"])
def test_the_aot_tile_gives_the_same_bytes(fmt):
    # The AOT build compiles one BLOCK (FORMAT_AOT_BLOCK): rows longer than it loop over tiles.
    kw = {"D": 256 + 64, "rope_dim": 64} if fmt == "ds_mla" else {"D": 256 if fmt != "fp8_inline" else 200}
    from kvfuzz_triton.api import AOT_TILE
    check(make_case(fmt, "bf16", seed=12, **kw), tile=AOT_TILE)
    assert FORMAT_AOT_BLOCK == 128


def test_heads_and_strides():
    # Three heads, block_size 2, rows with padding after them: every (block, pos, head) lands alone.
    check(make_case("mxfp8_e4m3", "f16", H=3, NB=4, BS=2, T=6, D=32, seed=13))


# ---------------------------------------------------------------------------------------------
# The reference's codecs against ml_dtypes, and the kernel's against the reference (through rows)

def test_reference_e2m1_is_ml_dtypes_round_to_nearest_even():
    grid = np.array([i * 0.125 for i in range(-60, 61)], np.float32)
    for v in grid:
        code = ref.e2m1(v, 7)
        value = np.array([code], np.uint8).view(ml_dtypes.float4_e2m1fn)[0]
        assert float(value) == float(np.float32(v).astype(ml_dtypes.float4_e2m1fn)) or abs(v) > 6
    assert ref.e2m1(np.inf, 7) == 0x7 and ref.e2m1(-np.inf, 7) == 0xF and ref.e2m1(np.nan, 7) == 0x7
    assert [ref.e2m1(v, 7) for v in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)] == [0, 2, 2, 4, 4, 6, 6]


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
def test_every_e2m1_tie_and_neighbour(fmt):
    # A group of values at every e2m1 tie (times the scale) and one fp32 ulp either side.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    vals = []
    for t in ties:
        for v in (np.nextafter(np.float32(t), np.float32(0)), np.float32(t), np.nextafter(np.float32(t), np.float32(9))):
            vals += [v, -v]
    vals = np.array((vals * 4)[:64], np.float32)
    c = make_case(fmt, "f32", D=64, T=2, NB=1, BS=4, seed=14, kinds=("normal",))
    c.globals[:] = 1.0 / 6.0  # nvfp4: amax 6 -> sf 6 / (6 g) = 6 exactly; os = 1 / 6 * ... (the reference says)
    for t in range(2):
        row = vals.copy()
        row[0] = 4.0 if fmt == "mxfp4" else 6.0  # MX: amax 4..8 gives X = 1; NVFP4: amax 6
        c.key[t, :64] = row.view(np.uint32)
        c.key[t, 64:128] = (-row).view(np.uint32)
    c.slots[:] = [0, 1]
    check(c)


@pytest.mark.parametrize("value", [np.float32(v) for v in (0.5, 1e-4, 2.0 ** -126, 1.5e38, 1.0000001, 0.9999999)])
def test_reference_pow2_ceil(value):
    p = ref.pow2_ceil(value)
    assert p >= value and (p / 2 < value)
    assert ref.pow2_ceil_log2f(value) in (p, p / 2)
