"""The golden model's fp4 e2m1, e8m0 and fp8 codecs against an independent oracle: ml_dtypes.

    ctest --test-dir build -R golden.ml_dtypes --output-on-failure

kvfuzz_minifloat_table (tests/golden/minifloat_table.cpp) prints what the golden model gives on every
code and on every rounding boundary (each tie between neighbouring values and the f32s one and two
ulps around it, the saturation and underflow boundaries, the specials); this file converts the same
inputs with ml_dtypes' float4_e2m1fn, float8_e8m0fnu, float8_e4m3fn and float8_e5m2 and requires the
same bytes. Where ml_dtypes differs by design (no saturation, its own NaN codes, e8m0 rounded to
nearest), the difference is asserted value by value rather than skipped.

Environment: KVFUZZ_MINIFLOAT_TABLE, the table program (ctest sets it).
"""

import os
import subprocess
import ml_dtypes
import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN and overflow casts are the point


@pytest.fixture(scope="module")
def table():
    out = subprocess.run([os.environ["KVFUZZ_MINIFLOAT_TABLE"]], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        kind, a, b = line.split()
        rows.setdefault(kind, []).append((int(a, 16), int(b, 16)))
    return {kind: (np.array([a for a, _ in v], dtype=np.uint32), np.array([b for _, b in v], dtype=np.uint32))
            for kind, v in rows.items()}


def f32(bits):
    return bits.astype(np.uint32).view(np.float32)


def is_nan_bits(bits):
    return (bits & 0x7FFFFFFF) > 0x7F800000


def test_every_e2m1_code_decodes_like_ml_dtypes(table):
    codes, ours = table["e2m1_dec"]
    assert len(codes) == 16
    theirs = codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(ours, theirs)  # bit for bit: -0 for 0x8


@pytest.mark.parametrize("kind", ["e2m1_enc", "e2m1_enc_fi"])
def test_e2m1_encodes_every_tie_like_ml_dtypes_except_nan(kind, table):
    inputs, ours = table[kind]
    x = f32(inputs)
    theirs = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8).astype(np.uint32) & 0xF
    nan = np.isnan(x)
    assert nan.sum() >= 3 and (~nan).sum() > 150
    # Every number, ties, saturation (ml_dtypes also saturates fp4 to ±6, Inf included) and
    # underflow: the same code.
    np.testing.assert_array_equal(ours[~nan], theirs[~nan])
    # NaN (e2m1 has no NaN code): ml_dtypes stores a zero; the golden model stores +6 under CUDA's
    # policy and a zero of the NaN's sign under FlashInfer's.
    assert np.all(theirs[nan] & 0x7 == 0)
    if kind == "e2m1_enc":
        assert np.all(ours[nan] == 0x7)
    else:
        assert np.all(ours[nan] == (inputs[nan] >> 28) & 0x8)


def test_every_e8m0_code_decodes_like_ml_dtypes(table):
    codes, ours = table["e8m0_dec"]
    assert len(codes) == 256
    theirs = codes.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float32).view(np.uint32)
    finite = codes != 0xFF
    np.testing.assert_array_equal(ours[finite], theirs[finite])  # 0x00 is 2^-127, an f32 subnormal
    assert is_nan_bits(theirs[~finite]).all() and (ours[~finite] == 0x7FFFFFFF).all()


def test_e8m0_floor_and_ceil_bracket_ml_dtypes_round_to_nearest(table):
    inputs, floor = table["e8m0_floor"]
    inputs_c, ceil = table["e8m0_ceil"]
    np.testing.assert_array_equal(inputs, inputs_c)
    x = f32(inputs)
    theirs = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8).astype(np.uint32)
    a = np.abs(x.astype(np.float64))
    positive = (x > 0) & np.isfinite(x)
    in_range = positive & (a >= 2.0**-127) & (a < 1.5 * 2.0**127)
    assert in_range.sum() > 2000
    # Exact powers of two: all three agree.
    power = in_range & (np.frexp(a)[0] == 0.5)
    assert power.sum() >= 254
    np.testing.assert_array_equal(floor[power], theirs[power])
    np.testing.assert_array_equal(ceil[power], theirs[power])
    # Between two powers ml_dtypes rounds to the nearer one, the midpoint 1.5 * 2^k upwards: it is
    # our floor below the midpoint and our ceil from it on.
    lower = np.ldexp(1.0, np.floor(np.log2(a[in_range])).astype(int))
    expected = np.where(a[in_range] < 1.5 * lower, floor[in_range], ceil[in_range])
    np.testing.assert_array_equal(theirs[in_range], expected)
    assert (theirs[in_range] != floor[in_range]).any() and (theirs[in_range] != ceil[in_range]).any()
    # Below 2^-127: ml_dtypes 0x00, like both of ours (except ceil just above 2^-127 / 2).
    tiny = positive & (a < 2.0**-127)
    assert tiny.sum() > 150 and (theirs[tiny] == 0).all() and (floor[tiny] == 0).all()
    # From 1.5 * 2^127 (and +Inf): ml_dtypes NaN, ours saturate to 2^127.
    huge = (x > 0) & (a >= 1.5 * 2.0**127)
    assert huge.sum() >= 3 and (theirs[huge] == 0xFF).all()
    assert (floor[huge] == 0xFE).all() and (ceil[huge] == 0xFE).all()
    # Zero and every negative: ml_dtypes NaN (e8m0 has no sign and no zero); ours round |x| (sign
    # ignored, as CUDA's cvt) and clip zero to 2^-127.
    nonpositive = ~np.isnan(x) & ~(x > 0)
    assert nonpositive.sum() > 2000 and (theirs[nonpositive] == 0xFF).all()
    zero = nonpositive & (a == 0)
    assert (floor[zero] == 0).all() and (ceil[zero] == 0).all()
    negative = nonpositive & (a > 0)
    neg_inputs = inputs[negative] & 0x7FFFFFFF
    pos_index = {int(u): i for i, u in enumerate(inputs)}
    np.testing.assert_array_equal(floor[negative], floor[[pos_index[int(u)] for u in neg_inputs]])
    # NaN: NaN everywhere.
    nan = np.isnan(x)
    assert nan.any() and (theirs[nan] == 0xFF).all() and (floor[nan] == 0xFF).all() and (ceil[nan] == 0xFF).all()


@pytest.mark.parametrize("kind,dtype", [("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2)])
def test_every_fp8_code_decodes_like_ml_dtypes(kind, dtype, table):
    codes, ours = table[kind + "_dec"]
    theirs = codes.astype(np.uint8).view(dtype).astype(np.float32).view(np.uint32)
    nan = is_nan_bits(theirs)
    assert nan.sum() == (2 if kind == "e4m3" else 6)
    np.testing.assert_array_equal(ours[~nan], theirs[~nan])
    assert (ours[nan] == 0x7FFFFFFF).all()


@pytest.mark.parametrize("kind,dtype,top,limit", [
    ("e4m3", ml_dtypes.float8_e4m3fn, 0x7E, 464.0),   # 464: the tie 448 | 480 still rounds to 448
    ("e5m2", ml_dtypes.float8_e5m2, 0x7B, 61440.0),  # 61440: the tie 57344 | 65536 rounds to Inf
])
def test_fp8_encodes_every_tie_like_ml_dtypes_until_it_overflows(kind, dtype, top, limit, table):
    inputs, ours = table[kind + "_enc"]
    x = f32(inputs)
    theirs = x.astype(dtype).view(np.uint8).astype(np.uint32)
    a = np.abs(x.astype(np.float64))
    nan = np.isnan(x)
    past = ~nan & ((a > limit) if kind == "e4m3" else (a >= limit))
    inside = ~nan & ~past
    assert inside.sum() > 2000 and past.sum() > 20
    np.testing.assert_array_equal(ours[inside], theirs[inside])
    sign = (inputs >> 24) & 0x80
    # Past the largest finite value ours saturate (satfinite); ml_dtypes does not: e4m3fn gives its
    # NaN with the input's sign, e5m2 gives ±Inf.
    np.testing.assert_array_equal(ours[past], sign[past] | top)
    np.testing.assert_array_equal(theirs[past], sign[past] | (0x7F if kind == "e4m3" else 0x7C))
    # NaN: ours 0x7F whatever the sign; ml_dtypes a NaN code of the input's sign.
    assert (ours[nan] == 0x7F).all()
    assert is_nan_bits(theirs[nan].astype(np.uint8).view(dtype).astype(np.float32).view(np.uint32)).all()
    assert ((theirs[nan] & 0x80) == sign[nan]).all()
