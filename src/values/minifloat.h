// minifloat.h — the golden model's element and scale codecs for block-scaled formats (issue 15):
// fp4 e2m1 codes, e8m0 shared-scale codes and the power-of-two rounding of fp32 scales.
//
// Bit-level software, no CUDA headers or intrinsics, integer arithmetic on the bits only (the
// results do not depend on the FP environment), like convert.h. tests/unit/golden/minifloat_test.cpp
// checks every code, every tie and its fp32 neighbours and a sweep of all 2^32 fp32 patterns
// against the CUDA toolkit's host conversions (__nv_cvt_float_to_fp4, __nv_cvt_float_to_e8m0) and
// the host libm; tests/golden/test_block_quant_oracle.py checks the same tables against ml_dtypes.
//
// Formats:
//   fp4 e2m1   1 | 2 | 1, bias 1: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf, no NaN. One code
//              per nibble (bit 3 = sign); -0 is 0x8.
//   e8m0       8 exponent bits, bias 127, no sign, no mantissa: code c is 2^(c - 127) for c in
//              0..254 (0x00 = 2^-127, an fp32 subnormal; 0xFE = 2^127); 0xFF is NaN. No zero.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvf::golden {

// What an fp4 e2m1 encoder makes of a NaN input (every other input: round to nearest, ties to
// even, saturating to ±6, signed zeros kept). Both occur in real kernels:
enum class E2m1Nan : uint8_t {
  max_positive,  // +6, code 0x7, whatever the NaN's sign: CUDA's __nv_cvt_float_to_fp4 and the
                 // PTX cvt.rn.satfinite.e2m1x2.f32 instruction (the CUDA header documents it)
  signed_zero,   // magnitude 0 with the NaN's sign bit, code 0x0 or 0x8: FlashInfer's NVFP4 append
                 // (its threshold encoder sends !(|v| > 0.25) to 0 and takes the sign from signbit)
};

// f32 -> fp4 e2m1 in the low nibble: round to nearest even, ±Inf and |x| >= 6 saturate to ±6 (the
// tie 5 between 4 and 6 goes to 4), |x| <= 0.25 gives a signed zero, NaN as `nan` says.
uint8_t f32_to_fp4_e2m1(float x, E2m1Nan nan = E2m1Nan::max_positive);

// The value of the e2m1 code in the low nibble (the high nibble is ignored); exact.
float fp4_e2m1_to_f32(uint8_t code);

// How an f32 is rounded to an e8m0 power of two. Both are exact (no log2f): the exponent comes
// from the bits. The sign is ignored (|x| is rounded); 0 and every |x| whose power of two would be
// below 2^-127 give 0x00 (2^-127); NaN gives 0xFF. What CUDA's __nv_cvt_float_to_e8m0 does with
// the rounding mode named in each comment.
enum class E8m0Rounding : uint8_t {
  floor,  // 2^floor(log2 |x|): the exponent field (cudaRoundZero, PTX cvt.rz...ue8m0x2)
  ceil,   // 2^ceil(log2 |x|): the exponent field, plus one when the mantissa is not zero; an f32
          // subnormal gives 2^-126 when |x| > 2^-127, else 2^-127 (cudaRoundPosInf, cvt.rp)
};

// What an e8m0 encoder makes of a power of two above 2^127 (±Inf, or ceil past 2^127).
enum class E8m0Overflow : uint8_t {
  saturate,  // 0xFE (2^127): __NV_SATFINITE
  nan,       // 0xFF (NaN): __NV_NOSAT
};

uint8_t f32_to_e8m0(float x, E8m0Rounding rounding, E8m0Overflow overflow = E8m0Overflow::saturate);

// The value of an e8m0 code: 2^(code - 127), exact (0x00 is the f32 subnormal 2^-127); 0xFF is the
// f32 canonical NaN 0x7FFFFFFF (the contract's NaN rule).
float e8m0_to_f32(uint8_t code);

// The "ue8m0" rounding of a scale: the least power of two >= s, as an fp32 value, computed from
// the exponent bits (exact; LMDeploy's fast_log2_ceil/fast_pow2 and DeepSeek's reference mean
// this). Defined on all inputs the way exp2f(ceilf(log2f(s))) behaves at its edges: +0 and -0 give
// +0, +Inf gives +Inf, s > 2^127 gives +Inf (2^128 overflows), negative s or NaN give the canonical
// NaN. f32 subnormals give the least power of two >= s, itself subnormal when s <= 2^-127.
float pow2_ceil(float s);

// exp2f(ceilf(log2f(s))) evaluated with a correctly rounded fp32 log2f (what vLLM's
// indexer_k_quant_and_cache writes with scale_fmt "ue8m0"). Equal to pow2_ceil(s) except just
// above a power of two: when s = 2^k * (1 + f) and log2(1 + f) is below half an fp32 ulp of k (as
// seen from k towards log2 s), log2f(s) rounds to the integer k and the result is 2^k < s, half of
// pow2_ceil(s). That happens for f * 2^23 <= 22 when |k| is 64..127 (and fewer values of f for
// smaller |k|, none for |k| < 4): 3,676 normal and 24 subnormal fp32 inputs. Modelled exactly
// from the bits, no libm; tests/unit/golden/minifloat_test.cpp proves it equal to the host libm's
// exp2f(ceilf(log2f(s))) on every input of that class and its neighbours (and on all 2^31
// non-negative fp32 patterns with KVFUZZ_FULL_SWEEP=1).
float pow2_ceil_log2f(float s);

// Stable names of the conventions (case files, reports).
std::string_view to_string(E2m1Nan v);       // "max_positive", "signed_zero"
std::string_view to_string(E8m0Rounding v);  // "floor", "ceil"
std::string_view to_string(E8m0Overflow v);  // "saturate", "nan"

}  // namespace kvf::golden
