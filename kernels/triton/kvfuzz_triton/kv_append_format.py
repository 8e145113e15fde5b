"""Triton kernel of the quantised formats (docs/formats.md "Quantised formats", src/case/quant_format.h),
bit for bit the golden model's block quantisers (src/golden/block_quant.h states every formula).

One @triton.jit kernel, `kv_append_format_kernel`, writes every format of kvf::QuantFormat: nvfp4,
mxfp8_e4m3, mxfp8_e5m2, mxfp4, ds_mla, indexer_k, fp8_inline, int8_inline, asym_int8, asym_int4. The
format, the input dtype, the fp8 conversion and the tile are constexprs (so the AOT build compiles one
kernel per input dtype x format x slot dtype); every convention of kvf::QuantRules is a runtime integer
(kvf::FormatRules), and so is every field's layout.

Fields (kvf::KvAppendParams code_layout, scale_layout, zero_layout, rope_layout). Each stored field is
passed as a layout of kernels/cuda/kv_format.cuh, in elements of its own dtype (nibbles for fp4 and
uint4 codes, bytes for fp8/int8/uint8 codes and e4m3/e8m0 scales, 4-byte words for fp32 scales and
zero points, input elements for ds_mla's rope copy) from the byte 0 of its buffer (cache_ptr for the
codes and the rope part, scales_ptr for scales and zero points). The block and head axes are flat
(one stride), the pos and dim axes have up to two sub-modes: coordinate c of a mode (x, *):(s0, s1)
is at (c % x)*s0 + (c // x)*s1, a flat mode of stride s being x = 1, s1 = s. That covers every
layout quant_fields.cpp builds: NVFP4's 4x4-swizzled scales (pos (4, bs/4):(1, 4P), group
(S/4, 4):(4, P)) and asym_int4's split_half codes (dim (D/2, 2):(2, 1)). Per field F the kernel takes
F_offset, F_block, F_pos_x, F_pos0, F_pos1, F_head, F_dim_x, F_dim0, F_dim1 with F in kc, vc (K's and
V's codes; kc is ds_mla's latent codes), ks, vs (their scales), kz, vz (zero points, asymmetric formats)
and rp (ds_mla's rope dims).

4-bit codes are packed two per byte, the low nibble at the even nibble offset. The kernel writes whole
bytes: it walks pairs (lo, hi) of dims whose nibbles share a byte, found from the codes' dim mode: the
sub-mode of stride 1 steps from a byte's low nibble to its high one, so hi = lo + delta with delta =
1 (flat, element 2j in the low nibble of byte j: NVFP4, MXFP4, asym_int4 adjacent) or the first
sub-mode's extent (asym_int4 split_half: dim d and d + D/2), and pair i is lo = i % delta + (i //
delta) * 2 * delta. A code byte is never read, so no two programs (or lanes) share one.

Arithmetic (exactly block_quant.h's, in its order):
  - every division is IEEE (tl.math.div_rn; `/` lowers to the approximate div.full.f32 on the GPU);
    no product is followed by an addition that fp fusion could turn into an FMA;
  - amax = max |x| over the group ignoring NaN (0 for an all-NaN group);
  - e2m1 codes by comparing the magnitude's bits with the round-to-nearest-even thresholds (0.25,
    0.75, 1.25, 1.75, 2.5, 3.5, 5), saturating, sign kept; NaN -> 0x0 for NVFP4 (FlashInfer: the
    GPU's product of a NaN is +NaN, a signed zero of sign +) and 0x7 (+6) for MXFP4 (cvt.rn.satfinite);
  - e8m0 scales and powers of two from the exponent bits (no log2): floor, ceil, pow2_ceil and the
    log2f-rounded pow2_ceil_log2f that vLLM's indexer writes;
  - fp8 codes by kv_append.py's _fp8_bits (the exact integer conversion, FP8_SOFTWARE, or the
    hardware cvt.rn.satfinite: both round to nearest even, saturate, NaN -> 0x7F); int8 by _int8_bits;
  - asymmetric formats: min and max over the row's real lanes (masked-off lanes never enter, unless
    the case's asym_lanes convention is LMDeploy's zero_padded_pow2), NaN ignored like fminf/fmaxf,
    ties between +0 and -0 resolved as glibc's fminf/fmaxf do (the first of equal operands), and each
    operation rounded to f16 or bf16 (asym_arith; NaN canonical, as values/convert.cpp) or kept f32.

Grid: (num_slots, num_heads). Program (t, h) writes head h of slot entry t: K (then V) group by group
in tiles of BLOCK dims ([BLOCK // G, G] for a format of groups of G dims; a per-token-head format
reads its row twice, once for its amax or min and max and once to store), or for ds_mla the record's
latent tiles, their scales and the rope dims. Rows are addressed like kv_append.py's (slot_mapping,
FlashInfer's CSR arrays, ring windows, context-parallel ranks), invalid slots counted once per row.
"""
import triton
import triton.language as tl

from .enums import QUANT_FORMATS_ID
from .kv_append import FP8_E4M3, FP8_E5M2, _bits_ptr, _fp8_bits, _int8_bits, _load_f32, _row_slot, _widen

# The formats: the numbers of kvf::QuantFormat (kernels/enums.json).
NVFP4 = tl.constexpr(QUANT_FORMATS_ID["nvfp4"])
MXFP8_E4M3 = tl.constexpr(QUANT_FORMATS_ID["mxfp8_e4m3"])
MXFP8_E5M2 = tl.constexpr(QUANT_FORMATS_ID["mxfp8_e5m2"])
MXFP4 = tl.constexpr(QUANT_FORMATS_ID["mxfp4"])
DS_MLA = tl.constexpr(QUANT_FORMATS_ID["ds_mla"])
INDEXER_K = tl.constexpr(QUANT_FORMATS_ID["indexer_k"])
FP8_INLINE = tl.constexpr(QUANT_FORMATS_ID["fp8_inline"])
INT8_INLINE = tl.constexpr(QUANT_FORMATS_ID["int8_inline"])
ASYM_INT8 = tl.constexpr(QUANT_FORMATS_ID["asym_int8"])
ASYM_INT4 = tl.constexpr(QUANT_FORMATS_ID["asym_int4"])

FLT_MIN = tl.constexpr(1.1754943508222875e-38)  # 2^-126
NO_DIM = tl.constexpr(2147483647)  # "no zero seen yet" (first-zero index of the asymmetric formats)


# ---------------------------------------------------------------------------------------------
# Codecs (exact, on the bits)

@triton.jit
def _e2m1(v, NAN_CODE: tl.constexpr):
    """fp32 -> fp4 e2m1 code (low nibble): round to nearest even, saturate to ±6, sign kept; NaN -> NAN_CODE."""
    u = v.to(tl.uint32, bitcast=True)
    a = u & 0x7FFFFFFF
    code = ((a > 0x3E800000).to(tl.uint32) + (a >= 0x3F400000).to(tl.uint32) + (a > 0x3FA00000).to(tl.uint32)
            + (a >= 0x3FE00000).to(tl.uint32) + (a > 0x40200000).to(tl.uint32) + (a >= 0x40600000).to(tl.uint32)
            + (a > 0x40A00000).to(tl.uint32))
    code = code | ((u >> 28) & 0x8)
    return tl.where(a > 0x7F800000, NAN_CODE, code)


@triton.jit
def _e4m3_value(code):
    """The value of a non-negative, non-NaN e4m3 code (uint32), exact."""
    e = (code >> 3) & 0xF
    m = code & 0x7
    normal = (((e + 120) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    return tl.where(e == 0, m.to(tl.float32) * 0.001953125, normal)  # subnormal: m * 2^-9


@triton.jit
def _e8m0_value(code):
    """2^(code - 127) for an e8m0 code in [0, 254] (int32), exact (0 is the f32 subnormal 2^-127)."""
    return tl.where(code == 0, 0x00400000, code << 23).to(tl.float32, bitcast=True)


@triton.jit
def _pow2_ceil(s):
    """The least power of two >= s for s > 0 normal (golden pow2_ceil), from the bits; +Inf stays."""
    u = s.to(tl.int32, bitcast=True)
    field = u >> 23
    up = tl.where(field >= 0xFE, 0x7F800000, (field + 1) << 23)
    return tl.where(((u & 0x7FFFFF) == 0) | (field == 0xFF), u, up).to(tl.float32, bitcast=True)


@triton.jit
def _pow2_ceil_log2f(s):
    """exp2f(ceilf(log2f(s))) with a correctly rounded log2f (golden pow2_ceil_log2f) for s > 0 normal:
    pow2_ceil(s), except 2^k when s = 2^k (1 + f) lies so close above 2^k that log2f(s) rounds to k."""
    u = s.to(tl.int32, bitcast=True)
    k = (u >> 23) - 127
    frac = u & 0x7FFFFF
    # p = floor(log2 m) of m = k (k >= 1) or -k - 1 (k <= -2): the binade of the floats near log2 s.
    m = tl.where(k >= 1, k, -k - 1)
    p = ((m >= 2).to(tl.int32) + (m >= 4).to(tl.int32) + (m >= 8).to(tl.int32) + (m >= 16).to(tl.int32)
         + (m >= 32).to(tl.int32) + (m >= 64).to(tl.int32))
    # The largest fraction (units of 2^-23) for which log2f rounds down to k (golden's table).
    limit = tl.where(p == 7, 44, tl.where(p == 6, 22, tl.where(p == 5, 11, tl.where(
        p == 4, 5, tl.where(p == 3, 2, tl.where(p == 2, 1, 0))))))
    down = (frac != 0) & ((k >= 1) | (k <= -2)) & (frac <= limit) & (k < 128)
    return tl.where(down, ((k + 127) << 23).to(tl.float32, bitcast=True), _pow2_ceil(s))


@triton.jit
def _in_precision(v, arith):
    """v rounded to the asymmetric formats' arithmetic (kvf::AsymArith: 0 f32, 1 f16, 2 bf16), round to
    nearest even, a NaN canonical (values/convert.cpp: f16 0x7FFF, bf16 0x7FFF, widened back)."""
    is_nan = v != v
    half = tl.where(is_nan, 0x7FFFE000, v.to(tl.float16).to(tl.float32).to(tl.uint32, bitcast=True))
    u = v.to(tl.uint32, bitcast=True)
    brain = tl.where(is_nan, 0x7FFF0000, ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16)
    rounded = tl.where(arith == 1, half, brain).to(tl.float32, bitcast=True)
    return tl.where(arith == 0, v, rounded)


# ---------------------------------------------------------------------------------------------
# Addressing

@triton.jit
def _row_base(block, pos, head, offset, s_block, pos_x, s_pos0, s_pos1, s_head):
    """Element offset of (block, pos, head, dim 0) of a field (int64)."""
    return offset + block * s_block + (pos % pos_x) * s_pos0 + (pos // pos_x) * s_pos1 + head * s_head


@triton.jit
def _dim_off(dims, dim_x, s0, s1):
    """int64 offsets of dims (int32 >= 0) in a dim mode (x, *):(s0, s1)."""
    return (dims % dim_x).to(tl.int64) * s0 + (dims // dim_x).to(tl.int64) * s1


@triton.jit
def _pair_delta(dim_x, s0):
    """How far apart (in dims) a 4-bit code byte's two nibbles are: the dim step whose nibble step is 1."""
    return tl.where((dim_x > 1) & (s0 == 1), 1, dim_x)


# ---------------------------------------------------------------------------------------------
# Block formats: one scale per G dims

@triton.jit
def _mx_exponent(amax, mx_rule, EMAX: tl.constexpr, QMAX: tl.constexpr):
    """The shared exponent E in [-127, 127] of MX groups of this amax (kvf::MxScaleRule: 0 ocp_floor,
    E = floor(log2 amax) - emax; 1 nv_ceil, E = ceil(log2(amax / qmax))); amax 0 -> -127, Inf -> 127."""
    floor_e = (amax.to(tl.int32, bitcast=True) >> 23) - 127 - EMAX
    r = tl.math.div_rn(amax, QMAX).to(tl.int32, bitcast=True)
    ceil_code = tl.where((r >> 23) == 0, (r > 0x00400000).to(tl.int32), (r >> 23) + ((r & 0x7FFFFF) != 0).to(tl.int32))
    e = tl.where(mx_rule == 0, floor_e, tl.minimum(ceil_code, 0xFE) - 127)
    e = tl.where(amax == 0.0, -127, tl.where(amax == float("inf"), 127, e))
    return tl.minimum(tl.maximum(e, -127), 127)


@triton.jit
def _block_row(src, D, cache_ptr, scales_ptr, global_ptr, codes, c_x, c_s0, c_s1, scales, s_x, s_s0, s_s1,
               nvfp4_rule, mx_rule, ds_mla_rule, indexer_rule,
               IN_DTYPE: tl.constexpr, FORMAT: tl.constexpr, FP8_SOFTWARE: tl.constexpr, BLOCK: tl.constexpr):
    """One row of D dims (src: its dim 0, an unsigned-integer pointer) of a block format, group by group:
    codes from element offset `codes` of cache_ptr, scales from `scales` of scales_ptr, dims through
    their fields' dim modes."""
    if FORMAT == NVFP4:
        G: tl.constexpr = 16
    elif FORMAT == DS_MLA or FORMAT == INDEXER_K:
        G: tl.constexpr = 128
    else:
        G: tl.constexpr = 32
    NG: tl.constexpr = BLOCK // G
    FOUR_BIT: tl.constexpr = FORMAT == NVFP4 or FORMAT == MXFP4
    if FOUR_BIT:
        W: tl.constexpr = G // 2  # lanes per group: one per code byte
    else:
        W: tl.constexpr = G
    if FORMAT == NVFP4:
        g = tl.load(global_ptr)  # the decode global scale of the tensor
        six_g = 6.0 * g
    delta = _pair_delta(c_x, c_s0)
    rows = tl.arange(0, NG)
    lanes = tl.arange(0, W)
    for c0 in range(0, D, BLOCK):
        group = c0 // G + rows  # [NG] group index in the row
        valid = group < D // G
        if FOUR_BIT:
            i = (c0 // 2 + rows[:, None] * W + lanes[None, :])  # [NG, W] code bytes: pair index
            lo = i % delta + (i // delta) * 2 * delta
            hi = lo + delta
            mask = valid[:, None] & (i >= 0)
            x_lo = _load_f32(src + lo.to(tl.int64), mask, IN_DTYPE)
            x_hi = _load_f32(src + hi.to(tl.int64), mask, IN_DTYPE)
            amax = tl.maximum(tl.max(tl.where(x_lo != x_lo, 0.0, tl.abs(x_lo)), axis=1),
                              tl.max(tl.where(x_hi != x_hi, 0.0, tl.abs(x_hi)), axis=1))
        else:
            dims = c0 + rows[:, None] * W + lanes[None, :]  # [NG, G]
            mask = valid[:, None] & (dims >= 0)
            x = _load_f32(src + dims.to(tl.int64), mask, IN_DTYPE)
            amax = tl.max(tl.where(x != x, 0.0, tl.abs(x)), axis=1)  # [NG]; masked lanes load 0

        scale_at = scales + _dim_off(group, s_x, s_s0, s_s1)
        if FORMAT == NVFP4:
            # FlashInfer's nvfp4_append_quantize_block: sf = amax / (6 g) (rule 0) or amax * RN(1 / (6 g)),
            # its e4m3 byte, os = 1 / (e4m3 value * g), code = e2m1(x * os), a NaN product -> +0.
            gv = tl.zeros_like(amax) + g  # (the interpreter cannot & a scalar with a tensor)
            live = (amax > 0.0) & (gv > 0.0)
            sf = tl.where(nvfp4_rule == 0, tl.math.div_rn(amax, six_g), amax * tl.math.div_rn(1.0, six_g))
            sbyte = _fp8_bits(tl.where(live, sf, 0.0), FP8_E4M3, FP8_SOFTWARE)
            sval = _e4m3_value(sbyte.to(tl.uint32))
            os = tl.where(live & (sval > 0.0), tl.math.div_rn(1.0, sval * gv), 0.0)
            q_lo = _e2m1(x_lo * os[:, None], 0)
            q_hi = _e2m1(x_hi * os[:, None], 0)
            tl.store(scales_ptr + scale_at, sbyte, mask=valid)
        elif FORMAT == DS_MLA or FORMAT == INDEXER_K:
            if FORMAT == DS_MLA:  # kvf::DsMlaScale: 0 flt_min, 1 pow2
                ratio = tl.math.div_rn(amax, 448.0)
                s = tl.where(ds_mla_rule == 0, tl.maximum(ratio, FLT_MIN), _pow2_ceil(tl.maximum(ratio, 1e-4)))
            else:  # kvf::IndexerScale: 0 fp32, 1 ue8m0_log2f, 2 ue8m0_exact
                s = tl.math.div_rn(tl.maximum(amax, 1e-4), 448.0)
                s = tl.where(indexer_rule == 1, _pow2_ceil_log2f(s), tl.where(indexer_rule == 2, _pow2_ceil(s), s))
            q = _fp8_bits(tl.math.div_rn(x, s[:, None]), FP8_E4M3, FP8_SOFTWARE)
            tl.store(scales_ptr.to(tl.pointer_type(tl.float32)) + scale_at, s, mask=valid)
        else:  # MX: E from amax, X = 2^E stored as e8m0 E + 127
            if FORMAT == MXFP8_E4M3:
                e = _mx_exponent(amax, mx_rule, 8, 448.0)
            elif FORMAT == MXFP8_E5M2:
                e = _mx_exponent(amax, mx_rule, 15, 57344.0)
            else:
                e = _mx_exponent(amax, mx_rule, 2, 6.0)
            scale = _e8m0_value(e + 127)[:, None]
            inverse = _e8m0_value(127 - e)[:, None]
            if FOUR_BIT:  # ocp_floor divides by X, nv_ceil multiplies by 2^-E
                q_lo = _e2m1(tl.where(mx_rule == 0, tl.math.div_rn(x_lo, scale), x_lo * inverse), 7)
                q_hi = _e2m1(tl.where(mx_rule == 0, tl.math.div_rn(x_hi, scale), x_hi * inverse), 7)
            elif FORMAT == MXFP8_E4M3:
                q = _fp8_bits(tl.where(mx_rule == 0, tl.math.div_rn(x, scale), x * inverse), FP8_E4M3, FP8_SOFTWARE)
            else:
                q = _fp8_bits(tl.where(mx_rule == 0, tl.math.div_rn(x, scale), x * inverse), FP8_E5M2, FP8_SOFTWARE)
            tl.store(scales_ptr + scale_at, (e + 127).to(tl.uint8), mask=valid)
        if FOUR_BIT:
            byte = (q_lo | (q_hi << 4)).to(tl.uint8)
            tl.store(cache_ptr + (codes + _dim_off(lo, c_x, c_s0, c_s1)) // 2, byte, mask=mask)
        else:
            tl.store(cache_ptr + codes + _dim_off(dims, c_x, c_s0, c_s1), q, mask=mask)


# ---------------------------------------------------------------------------------------------
# Per-token-head formats: one scale (and zero point) per row

@triton.jit
def _asym_fold(x, dims, mask, mn, mx, any_real, first_zero, zero_neg):
    """Folds one tile into the row's (min, max, whether a non-NaN lane was seen, the first zero's dim
    and whether it is -0). Only `mask`ed lanes enter; NaN lanes are skipped (fminf / fmaxf)."""
    real = mask & (x == x)
    mn = tl.minimum(mn, tl.min(tl.where(real, x, float("inf")), axis=0))
    mx = tl.maximum(mx, tl.max(tl.where(real, x, -float("inf")), axis=0))
    any_real = tl.maximum(any_real, tl.max(real.to(tl.int32), axis=0))
    zero = real & (x == 0.0)
    tile_first = tl.min(tl.where(zero, dims, NO_DIM), axis=0)
    tile_neg = tl.max(tl.where(zero & (dims == tile_first), (x.to(tl.int32, bitcast=True) < 0).to(tl.int32), 0), axis=0)
    zero_neg = tl.where(tile_first < first_zero, tile_neg, zero_neg)
    first_zero = tl.minimum(first_zero, tile_first)
    return mn, mx, any_real, first_zero, zero_neg


@triton.jit
def _negate(v):
    """-v by its sign bit (Triton's unary minus is 0 - v, which makes -(+0) +0)."""
    return (v.to(tl.uint32, bitcast=True) ^ 0x80000000).to(tl.float32, bitcast=True)


@triton.jit
def _asym_code(v, scale, zero, arith, QMAX: tl.constexpr):
    """trunc(x / scale + zero + 0.5), each step in the precision, as an unsigned code; 0 where the
    source's conversion is undefined (NaN, or outside [0, qmax + 1)), as the golden model writes it."""
    q = _in_precision(_in_precision(_in_precision(tl.math.div_rn(v, scale), arith) + zero, arith) + 0.5, arith)
    inside = (q >= 0.0) & (q < QMAX + 1.0)
    return tl.where(inside, q, 0.0).to(tl.int32).to(tl.uint32)


@triton.jit
def _token_head_row(src, D, cache_ptr, scales_ptr, codes, c_x, c_s0, c_s1, scales, s_x, s_s0, s_s1, zeros,
                    asym_arith, asym_lanes, int4_pairing,
                    IN_DTYPE: tl.constexpr, FORMAT: tl.constexpr, FP8_SOFTWARE: tl.constexpr, BLOCK: tl.constexpr):
    """One row of D dims of a per-token-head format: fp8_inline / int8_inline (scale max(amax, 1e-6) /
    QMAX, codes convert(x / scale)) or asym_int8 / asym_int4 (LMDeploy: scale (max - min) / qmax, zero
    -min / scale, codes trunc(x / scale + zero + 0.5)); the scale (and zero point) at dim 0 of its field."""
    scale_ptr = scales_ptr.to(tl.pointer_type(tl.float32))
    lanes = tl.arange(0, BLOCK)
    if FORMAT == FP8_INLINE or FORMAT == INT8_INLINE:
        amax = 0.0
        for c0 in range(0, D, BLOCK):
            dims = c0 + lanes
            x = _load_f32(src + dims.to(tl.int64), dims < D, IN_DTYPE)
            amax = tl.maximum(amax, tl.max(tl.where(x != x, 0.0, tl.abs(x)), axis=0))
        if FORMAT == FP8_INLINE:
            s = tl.math.div_rn(tl.maximum(amax, 1e-6), 448.0)
        else:
            s = tl.math.div_rn(tl.maximum(amax, 1e-6), 127.0)
        tl.store(scale_ptr + scales, s)
        for c0 in range(0, D, BLOCK):
            dims = c0 + lanes
            mask = dims < D
            q = tl.math.div_rn(_load_f32(src + dims.to(tl.int64), mask, IN_DTYPE), s)
            if FORMAT == FP8_INLINE:
                code = _fp8_bits(q, FP8_E4M3, FP8_SOFTWARE)
            else:
                code = _int8_bits(q)
            tl.store(cache_ptr + codes + _dim_off(dims, c_x, c_s0, c_s1), code, mask=mask)
    else:
        if FORMAT == ASYM_INT4:
            QMAX: tl.constexpr = 15.0
            arith = asym_arith * 0  # LMDeploy's int4 path computes in fp32
            pairs = D // 2
            delta = _pair_delta(c_x, c_s0)
            width = tl.where(int4_pairing == 0, D // 2, D)  # the lanes LMDeploy loads a row as
        else:
            QMAX: tl.constexpr = 255.0
            arith = asym_arith
            pairs = D
            width = D
        mn = float("inf")
        mx = -float("inf")
        any_real = 0
        first_zero = NO_DIM
        zero_neg = 0
        for c0 in range(0, pairs, BLOCK):
            i = c0 + lanes
            mask = i < pairs
            if FORMAT == ASYM_INT4:
                lo = i % delta + (i // delta) * 2 * delta
                hi = lo + delta
                x_lo = _load_f32(src + lo.to(tl.int64), mask, IN_DTYPE)
                x_hi = _load_f32(src + hi.to(tl.int64), mask, IN_DTYPE)
                mn, mx, any_real, first_zero, zero_neg = _asym_fold(x_lo, lo, mask, mn, mx, any_real, first_zero, zero_neg)
                mn, mx, any_real, first_zero, zero_neg = _asym_fold(x_hi, hi, mask, mn, mx, any_real, first_zero, zero_neg)
            else:
                x = _load_f32(src + i.to(tl.int64), mask, IN_DTYPE)
                mn, mx, any_real, first_zero, zero_neg = _asym_fold(x, i, mask, mn, mx, any_real, first_zero, zero_neg)
        # fminf / fmaxf keep the first of equal operands: a zero min or max has the first zero's sign;
        # with no real value at all both are the row's dim 0 (NaN).
        signed_zero = tl.where(zero_neg != 0, 0x80000000, 0).to(tl.uint32).to(tl.float32, bitcast=True)
        mn = tl.where(mn == 0.0, signed_zero, mn)
        mx = tl.where(mx == 0.0, signed_zero, mx)
        x0 = _widen(tl.load(src), IN_DTYPE)
        mn = tl.where(any_real != 0, mn, x0)
        mx = tl.where(any_real != 0, mx, x0)
        if asym_lanes == 1:  # LMDeploy #4849: a row loaded as next_pow2(width) lanes, zeros entering the min/max
            if (width & (width - 1)) != 0:
                mn = tl.where(mn <= 0.0, mn, 0.0)
                mx = tl.where(mx >= 0.0, mx, 0.0)
        scale = _in_precision(tl.math.div_rn(_in_precision(mx - mn, arith), QMAX), arith)
        zero = _in_precision(tl.math.div_rn(_negate(mn), scale), arith)
        tl.store(scale_ptr + scales, scale)
        tl.store(scale_ptr + zeros, zero)
        for c0 in range(0, pairs, BLOCK):
            i = c0 + lanes
            mask = i < pairs
            if FORMAT == ASYM_INT4:
                lo = i % delta + (i // delta) * 2 * delta
                hi = lo + delta
                q_lo = _asym_code(_load_f32(src + lo.to(tl.int64), mask, IN_DTYPE), scale, zero, arith, QMAX)
                q_hi = _asym_code(_load_f32(src + hi.to(tl.int64), mask, IN_DTYPE), scale, zero, arith, QMAX)
                byte = (q_lo | (q_hi << 4)).to(tl.uint8)
                tl.store(cache_ptr + (codes + _dim_off(lo, c_x, c_s0, c_s1)) // 2, byte, mask=mask)
            else:
                q = _asym_code(_load_f32(src + i.to(tl.int64), mask, IN_DTYPE), scale, zero, arith, QMAX)
                tl.store(cache_ptr + codes + _dim_off(i, c_x, c_s0, c_s1), q.to(tl.uint8), mask=mask)


# ---------------------------------------------------------------------------------------------
# The kernel

@triton.jit
def _format_row(src, D, cache_ptr, scales_ptr, global_ptr, codes, c_x, c_s0, c_s1, scales, s_x, s_s0, s_s1, zeros,
                nvfp4_rule, mx_rule, ds_mla_rule, indexer_rule, asym_arith, asym_lanes, int4_pairing,
                IN_DTYPE: tl.constexpr, FORMAT: tl.constexpr, FP8_SOFTWARE: tl.constexpr, BLOCK: tl.constexpr):
    """One row of D dims (K's, V's or ds_mla's latent part) in the format's fields."""
    if FORMAT <= INDEXER_K:
        _block_row(src, D, cache_ptr, scales_ptr, global_ptr, codes, c_x, c_s0, c_s1, scales, s_x, s_s0, s_s1,
                   nvfp4_rule, mx_rule, ds_mla_rule, indexer_rule, IN_DTYPE, FORMAT, FP8_SOFTWARE, BLOCK)
    else:
        _token_head_row(src, D, cache_ptr, scales_ptr, codes, c_x, c_s0, c_s1, scales, s_x, s_s0, s_s1, zeros,
                        asym_arith, asym_lanes, int4_pairing, IN_DTYPE, FORMAT, FP8_SOFTWARE, BLOCK)


# Runtime integers that take the values 0 and 1 (or a few): never specialised on.
@triton.jit(do_not_specialize=["has_value", "has_counter", "nvfp4_rule", "mx_rule", "ds_mla_rule", "indexer_rule",
                               "asym_arith", "asym_lanes", "int4_pairing", "csr", "window", "window_size",
                               "window_sinks", "cp", "cp_rank", "cp_world_size", "cp_interleave"])
def kv_append_format_kernel(
    key_ptr, value_ptr, rope_ptr, slot_ptr,
    cache_ptr,  # uint8: byte 0 of the cache buffer (codes, rope, and the scales of ds_mla, indexer_k, inline)
    scales_ptr,  # uint8: byte 0 of the buffer of the scales and zero points
    k_global_ptr, v_global_ptr,  # fp32 [1]: nvfp4's global (decode) scales; never read otherwise
    invalid_slots_ptr,  # int64 counter (only touched when has_counter != 0)
    num_heads, head_dim,  # head_dim: the rows' dims (ds_mla: latent_dim + rope_dim)
    latent_dim, rope_dim,  # ds_mla: dims quantised from key (kv_c) and copied from rope (k_pe); else head_dim, 0
    key_stride_token, key_stride_head, value_stride_token, value_stride_head, rope_stride_token, rope_stride_head,
    num_blocks, block_size, has_value, has_counter,
    # The fields (module docstring): K's and V's codes, scales and zero points, ds_mla's rope part.
    kc_offset, kc_block, kc_pos_x, kc_pos0, kc_pos1, kc_head, kc_dim_x, kc_dim0, kc_dim1,
    vc_offset, vc_block, vc_pos_x, vc_pos0, vc_pos1, vc_head, vc_dim_x, vc_dim0, vc_dim1,
    ks_offset, ks_block, ks_pos_x, ks_pos0, ks_pos1, ks_head, ks_dim_x, ks_dim0, ks_dim1,
    vs_offset, vs_block, vs_pos_x, vs_pos0, vs_pos1, vs_head, vs_dim_x, vs_dim0, vs_dim1,
    kz_offset, kz_block, kz_pos_x, kz_pos0, kz_pos1, kz_head, kz_dim_x, kz_dim0, kz_dim1,
    vz_offset, vz_block, vz_pos_x, vz_pos0, vz_pos1, vz_head, vz_dim_x, vz_dim0, vz_dim1,
    rp_offset, rp_block, rp_pos_x, rp_pos0, rp_pos1, rp_head, rp_dim_x, rp_dim0, rp_dim1,
    # The conventions (kvf::FormatRules).
    nvfp4_rule, mx_rule, ds_mla_rule, indexer_rule, asym_arith, asym_lanes, int4_pairing,
    # Row addressing, as kv_append_kernel's: FlashInfer's CSR arrays, a ring window, a context-parallel rank.
    csr, csr_batch_ptr, csr_pos_ptr, csr_indices_ptr, csr_indptr_ptr,
    window, window_size, window_sinks, window_pos_ptr, window_len_ptr,
    cp, cp_rank, cp_world_size, cp_interleave, cp_pos_ptr,
    IN_DTYPE: tl.constexpr, FORMAT: tl.constexpr, FP8_SOFTWARE: tl.constexpr, BLOCK: tl.constexpr,
):
    cache_ptr = cache_ptr.to(tl.pointer_type(tl.uint8))  # whatever 1-byte (or fp32 scale) tensor holds the bytes
    scales_ptr = scales_ptr.to(tl.pointer_type(tl.uint8))
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    slot, write = _row_slot(token, slot_ptr, block_size, csr, csr_batch_ptr, csr_pos_ptr, csr_indices_ptr, csr_indptr_ptr,
                            window, window_size, window_sinks, window_pos_ptr, window_len_ptr,
                            cp, cp_rank, cp_world_size, cp_interleave, cp_pos_ptr)
    if write:
        block = slot // block_size
        pos = slot - block * block_size
        if block >= num_blocks:  # slot >= capacity: never written, counted once per slot entry
            if has_counter != 0:
                if head == 0:
                    tl.atomic_add(invalid_slots_ptr, 1)
        else:
            key_row = _bits_ptr(key_ptr, IN_DTYPE) + (token * key_stride_token + head * key_stride_head)
            kc = _row_base(block, pos, head, kc_offset, kc_block, kc_pos_x, kc_pos0, kc_pos1, kc_head)
            ks = _row_base(block, pos, head, ks_offset, ks_block, ks_pos_x, ks_pos0, ks_pos1, ks_head)
            kz = _row_base(block, pos, head, kz_offset, kz_block, kz_pos_x, kz_pos0, kz_pos1, kz_head)
            _format_row(key_row, latent_dim, cache_ptr, scales_ptr, k_global_ptr, kc, kc_dim_x, kc_dim0, kc_dim1,
                        ks, ks_dim_x, ks_dim0, ks_dim1, kz, nvfp4_rule, mx_rule, ds_mla_rule, indexer_rule,
                        asym_arith, asym_lanes, int4_pairing, IN_DTYPE, FORMAT, FP8_SOFTWARE, BLOCK)
            if FORMAT == DS_MLA:  # the rope dims, copied bit for bit in the input's dtype
                rope_row = _bits_ptr(rope_ptr, IN_DTYPE) + (token * rope_stride_token + head * rope_stride_head)
                rp = _row_base(block, pos, head, rp_offset, rp_block, rp_pos_x, rp_pos0, rp_pos1, rp_head)
                dst = _bits_ptr(cache_ptr, IN_DTYPE)
                for d0 in range(0, rope_dim, BLOCK):
                    dims = d0 + tl.arange(0, BLOCK)
                    mask = dims < rope_dim
                    bits = tl.load(rope_row + dims.to(tl.int64), mask=mask, other=0)
                    tl.store(dst + rp + _dim_off(dims, rp_dim_x, rp_dim0, rp_dim1), bits, mask=mask)
            elif has_value != 0:
                value_row = _bits_ptr(value_ptr, IN_DTYPE) + (token * value_stride_token + head * value_stride_head)
                vc = _row_base(block, pos, head, vc_offset, vc_block, vc_pos_x, vc_pos0, vc_pos1, vc_head)
                vs = _row_base(block, pos, head, vs_offset, vs_block, vs_pos_x, vs_pos0, vs_pos1, vs_head)
                vz = _row_base(block, pos, head, vz_offset, vz_block, vz_pos_x, vz_pos0, vz_pos1, vz_head)
                _format_row(value_row, head_dim, cache_ptr, scales_ptr, v_global_ptr, vc, vc_dim_x, vc_dim0,
                            vc_dim1, vs, vs_dim_x, vs_dim0, vs_dim1, vz, nvfp4_rule, mx_rule, ds_mla_rule,
                            indexer_rule, asym_arith, asym_lanes, int4_pairing, IN_DTYPE, FORMAT, FP8_SOFTWARE,
                            BLOCK)
