"""An independent numpy model of the quantised formats, for the Triton tests (test_formats.py).

Written from the formulas in src/golden/block_quant.h's comments, not from the kernel: one row (or
group) at a time in numpy float32 (IEEE, one rounding per operation, the order of the comments),
element values through ml_dtypes where it agrees with the formats (float4_e2m1fn and float8_e4m3fn /
float8_e5m2 round to nearest even; saturation, the NaN codes and e8m0 are the formats', since
ml_dtypes' differ: research notes §0.2), powers of two through math.frexp (exact), and the log2f of
vLLM's indexer as float64 log2 rounded to float32 (a correctly rounded log2f). Codes are returned
one per dim (4-bit codes as their nibble); the tests pack and place them.
"""
import math

import ml_dtypes
import numpy as np

f32 = np.float32


def _finite_code(value, dtype, bits):
    """The code of a finite value already in range, through ml_dtypes (round to nearest even)."""
    return int(np.array([value], np.float32).astype(dtype).view(np.uint8)[0]) & ((1 << bits) - 1)


def e2m1(v, nan_code):
    """fp4 e2m1 code (nibble) of fp32 v: nearest even, ±Inf and beyond ±6 saturate, NaN -> nan_code."""
    v = f32(v)
    if np.isnan(v):
        return nan_code
    return _finite_code(np.clip(v, -6, 6), ml_dtypes.float4_e2m1fn, 4)


def e4m3(v):
    """fp8 e4m3 code: nearest even, saturate to ±448 (±Inf too), NaN -> 0x7F."""
    v = f32(v)
    if np.isnan(v):
        return 0x7F
    return _finite_code(np.clip(v, -448, 448), ml_dtypes.float8_e4m3fn, 8)


def e5m2(v):
    """fp8 e5m2 code: nearest even, saturate to ±57344, NaN -> 0x7F."""
    v = f32(v)
    if np.isnan(v):
        return 0x7F
    return _finite_code(np.clip(v, -57344, 57344), ml_dtypes.float8_e5m2, 8)


def e4m3_value(code):
    return f32(np.array([code], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])


def int8(v):
    v = f32(v)
    if np.isnan(v):
        return 0
    return int(np.int8(np.clip(np.rint(v), -128, 127))) & 0xFF


def pow2_ceil(s):
    """The least power of two >= s > 0 (exact)."""
    s = float(s)
    if math.isinf(s):
        return f32(s)
    m, e = math.frexp(s)  # s = m 2^e, m in [0.5, 1)
    return f32(s if m == 0.5 else math.ldexp(1.0, e))


def pow2_ceil_log2f(s):
    """exp2f(ceilf(log2f(s))) with a correctly rounded fp32 log2f."""
    l2 = f32(math.log2(float(s)))
    return f32(2.0 ** math.ceil(float(l2)))


def amax_of(x):
    """max |x| ignoring NaN, from 0."""
    a = f32(0)
    for v in x:
        if not np.isnan(v) and abs(v) > a:
            a = f32(abs(v))
    return a


# ---------------------------------------------------------------------------------------------

def nvfp4(x, g, rule):
    """16 values -> (16 nibble codes, e4m3 scale code) under the decode global scale g."""
    x = np.asarray(x, np.float32)
    amax, g = amax_of(x), f32(g)
    sf = f32(0)
    if amax > 0 and g > 0:
        six_g = f32(f32(6) * g)
        sf = f32(amax / six_g) if rule == "flashinfer" else f32(amax * f32(f32(1) / six_g))
    scale = e4m3(sf)
    sv = e4m3_value(scale)
    os = f32(f32(1) / f32(sv * g)) if (amax > 0 and sv > 0 and g > 0) else f32(0)
    with np.errstate(all="ignore"):
        codes = [e2m1(f32(v * os), 0) for v in x]  # a NaN product is +NaN on the GPU: code +0
    return codes, scale


MX = {"mxfp8_e4m3": (8, 448.0, e4m3), "mxfp8_e5m2": (15, 57344.0, e5m2), "mxfp4": (2, 6.0, lambda v: e2m1(v, 7))}


def mx(x, fmt, rule):
    """32 values -> (codes, e8m0 scale code)."""
    emax, qmax, encode = MX[fmt]
    amax = amax_of(x)
    if amax == 0:
        e = -127
    elif np.isinf(amax):
        e = 127
    elif rule == "ocp_floor":
        e = math.frexp(float(amax))[1] - 1 - emax  # floor(log2 amax) - emax
    else:
        ratio = f32(amax / f32(qmax))
        e = _ceil_log2(ratio) if ratio > 0 else -127
    e = max(-127, min(127, e))
    scale, inverse = f32(math.ldexp(1.0, e)), f32(math.ldexp(1.0, -e))
    with np.errstate(all="ignore"):
        if rule == "ocp_floor":
            codes = [encode(f32(f32(v) / scale)) for v in x]
        else:
            codes = [encode(f32(f32(v) * inverse)) for v in x]
    return codes, e + 127


def _ceil_log2(r):
    """ceil(log2 r) for r > 0, exact (frexp); at least -127 (e8m0's smallest)."""
    m, e = math.frexp(float(r))
    return max(-127, e - 1 if m == 0.5 else e)


def ds_mla_tile(x, rule):
    ratio = f32(amax_of(x) / f32(448))
    s = max(ratio, f32(np.finfo(np.float32).tiny)) if rule == "flt_min" else pow2_ceil(max(ratio, f32(1e-4)))
    s = f32(s)
    with np.errstate(all="ignore"):
        return [e4m3(f32(f32(v) / s)) for v in x], s


def indexer_tile(x, rule):
    s = f32(max(amax_of(x), f32(1e-4)) / f32(448))
    if rule == "ue8m0_log2f":
        s = pow2_ceil_log2f(s)
    elif rule == "ue8m0_exact":
        s = pow2_ceil(s)
    with np.errstate(all="ignore"):
        return [e4m3(f32(f32(v) / s)) for v in x], s


def inline(x, fmt):
    """fp8_inline / int8_inline: one scale max(amax, 1e-6) / QMAX for the row."""
    qmax, encode = (448.0, e4m3) if fmt == "fp8_inline" else (127.0, int8)
    s = f32(max(amax_of(x), f32(1e-6)) / f32(qmax))
    with np.errstate(all="ignore"):
        return [encode(f32(f32(v) / s)) for v in x], s


def _prec(v, arith):
    v = f32(v)
    if arith == "f32":
        return v
    if np.isnan(v):
        return np.array([0x7FFFE000 if arith == "f16" else 0x7FFF0000], np.uint32).view(np.float32)[0]
    t = np.float16 if arith == "f16" else ml_dtypes.bfloat16
    return f32(np.array([v], np.float32).astype(t).astype(np.float32)[0])


def _fmin(a, b):  # glibc's fminf: NaN ignored, the first of equal operands
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    return a if a <= b else b


def _fmax(a, b):
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    return a if a >= b else b


def asym(x, qmax, arith, lanes, width):
    """LMDeploy's asymmetric quantisation of one row: (codes, scale, zero). width: the lanes a row
    is loaded as (D, or D/2 for split int4), for the zero_padded_pow2 convention."""
    x = [f32(v) for v in x]
    mn = mx = x[0]
    for v in x:
        mn, mx = _fmin(mn, v), _fmax(mx, v)
    if lanes == "zero_padded_pow2" and width & (width - 1):
        mn, mx = _fmin(mn, f32(0)), _fmax(mx, f32(0))
    with np.errstate(all="ignore"):
        scale = _prec(f32(_prec(f32(mx - mn), arith) / f32(qmax)), arith)
        zero = _prec(f32(f32(-mn) / scale), arith)
        codes = []
        for v in x:
            q = _prec(_prec(_prec(f32(v / scale), arith) + zero, arith) + f32(0.5), arith)
            codes.append(int(q) if (q >= 0 and q < qmax + 1) else 0)
    return codes, scale, zero
