// convert.cpp — bit-level software conversions between f16, bf16, f32, fp8 (e4m3, e5m2) and int8
// (see convert.h).
//
// Written from the format definitions alone, without CUDA headers or intrinsics, and with integer
// arithmetic only (no dependence on the FP environment; the one float operation is the IEEE
// division x / scale of quantize_bits, round-to-nearest as in every C++ program that leaves the
// rounding mode alone), so the golden model is an independent
// implementation of the contract. tests/unit/golden/convert_test.cpp and convert_quant_test.cpp
// check it exhaustively (8- and 16-bit inputs), at every rounding boundary and over >= 10^8 f32
// inputs against the CUDA toolkit's host-side conversions (__half2float, __float2half_rn,
// __float2bfloat16_rn, __nv_cvt_float_to_fp8 with __NV_SATFINITE, __nv_cvt_fp8_to_halfraw).
//
// Formats (sign | exponent | mantissa, bias):
//   f16       1 | 5 | 10, bias 15     subnormal unit 2^-24, max 65504
//   bf16      1 | 8 |  7, bias 127    the upper half of an f32
//   f32       1 | 8 | 23, bias 127
//   fp8_e4m3  1 | 4 |  3, bias 7      subnormal unit 2^-9,  max 448 (0x7E); no Inf; NaN = S.1111.111
//   fp8_e5m2  1 | 5 |  2, bias 15     subnormal unit 2^-16, max 57344 (0x7B); Inf 0x7C; the upper
//                                     byte of an f16
//   int8      two's complement [-128, 127]
#if defined(__FAST_MATH__)
#error "convert.cpp needs IEEE fp32 division (quantize_bits): build without -ffast-math"
#endif
#include "convert.h"

#include <cstring>

#include "minifloat.h"

namespace kvf::golden {

namespace {

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Shifts `m` right by `shift` (1..31) and rounds the discarded bits to nearest, ties to even.
uint32_t shift_right_rne(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u) != 0)) return kept + 1u;
  return kept;
}

// An fp8 format: 1 sign bit, `exp_bits` exponent bits with bias `bias`, `mant_bits` mantissa bits,
// largest finite magnitude code `max_code`.
struct Fp8Format {
  int exp_bits;
  int mant_bits;
  int bias;
  uint32_t max_code;
};
constexpr Fp8Format kE4M3{4, 3, 7, 0x7Eu};
constexpr Fp8Format kE5M2{5, 2, 15, 0x7Bu};
constexpr uint8_t kFp8Nan = 0x7F;  // what every NaN becomes (both formats, sign dropped)

// f32 -> fp8 with round to nearest even and saturation to +-max finite (satfinite): every finite
// value beyond the largest finite fp8 value and +-Inf give +-max finite, NaN gives 0x7F.
uint8_t f32_to_fp8(float f, Fp8Format fmt) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return kFp8Nan;
  if (abs == 0x7F800000u) return static_cast<uint8_t>(sign | fmt.max_code);
  const int exp = static_cast<int>(abs >> 23) - 127;  // unbiased (f32 subnormals: -127)
  const uint32_t mant = abs & 0x7FFFFFu;
  const int emin = 1 - fmt.bias;                               // exponent of the smallest normal
  const int emax = (1 << fmt.exp_bits) - 1 - fmt.bias;         // exponent of the all-ones field
  if (exp > emax) return static_cast<uint8_t>(sign | fmt.max_code);  // far beyond max finite
  uint32_t code;
  if (exp >= emin) {
    // Normal fp8: drop 23 - mant_bits mantissa bits with RNE. A carry out of the mantissa bumps
    // the exponent; a result past max_code (a NaN code for e4m3, Inf or NaN for e5m2) saturates.
    const int drop = 23 - fmt.mant_bits;
    const uint32_t biased = static_cast<uint32_t>(exp + fmt.bias);
    code = shift_right_rne((biased << 23) | mant, drop);
  } else {
    // Subnormal fp8 (or zero): value = sig * 2^(exp-23) with the implicit bit; in units of the
    // smallest subnormal 2^(emin - mant_bits) that is sig >> shift. Below half a unit (shift > 24,
    // sig < 2^24) everything rounds to zero; exactly half a unit is a tie that rounds to the even
    // value 0. A carry into the implicit-bit position yields the smallest normal, correctly.
    const int shift = (23 - fmt.mant_bits) + (emin - exp);  // >= 24 - mant_bits
    if (shift > 24) return static_cast<uint8_t>(sign);
    code = shift_right_rne(mant | 0x800000u, shift);
  }
  if (code > fmt.max_code) code = fmt.max_code;
  return static_cast<uint8_t>(sign | code);
}

// fp8 -> f32, exact. NaN codes give the f32 canonical NaN (the contract's NaN rule).
float fp8_to_f32(uint8_t b, Fp8Format fmt) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t abs = b & 0x7Fu;
  const uint32_t exp_field = abs >> fmt.mant_bits;
  const uint32_t mant = abs & ((1u << fmt.mant_bits) - 1u);
  if (abs > fmt.max_code) {
    // Past the largest finite code. e4m3: only S.1111.111, NaN. e5m2: S.11111.00 is Inf, the
    // other three are NaN.
    if (fmt.exp_bits == 5 && mant == 0) return f32_from_bits(sign | 0x7F800000u);
    return f32_from_bits(0x7FFFFFFFu);
  }
  if (exp_field != 0) {
    const uint32_t e = exp_field - static_cast<uint32_t>(fmt.bias) + 127u;
    return f32_from_bits(sign | (e << 23) | (mant << (23 - fmt.mant_bits)));
  }
  if (mant == 0) return f32_from_bits(sign);  // +-0
  // Subnormal mant * 2^(1 - bias - mant_bits): normalise so the leading one is the implicit bit.
  int e = 1 - fmt.bias;  // exponent of the implicit-bit position 1 << mant_bits
  uint32_t m = mant;
  while ((m & (1u << fmt.mant_bits)) == 0) {
    m <<= 1;
    --e;
  }
  m &= (1u << fmt.mant_bits) - 1u;
  return f32_from_bits(sign | (static_cast<uint32_t>(e + 127) << 23) | (m << (23 - fmt.mant_bits)));
}

// Bits that hold one element of dtype t (the rest of a uint32_t element word are ignored).
uint32_t element_mask(DType t) {
  switch (t) {
    case DType::f32: return 0xFFFFFFFFu;
    case DType::f16:
    case DType::bf16: return 0xFFFFu;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::int8:
    case DType::fp8_e8m0:
    case DType::uint8: return 0xFFu;
    case DType::fp4_e2m1:
    case DType::uint4: return 0xFu;
  }
  return 0xFFFFFFFFu;
}

// f32 -> dtype t with the contract's rounding (RNE; fp8 satfinite; int8 half-even, saturating).
// NaN gives the target's canonical NaN (0 for int8).
uint32_t narrow_f32(float f, DType t) {
  switch (t) {
    case DType::f16: return f32_to_f16_rne(f);
    case DType::bf16: return f32_to_bf16_rne(f);
    case DType::f32: return f32_bits(f);
    case DType::fp8_e4m3: return f32_to_fp8(f, kE4M3);
    case DType::fp8_e5m2: return f32_to_fp8(f, kE5M2);
    case DType::int8: return static_cast<uint8_t>(f32_to_int8(f));
    case DType::fp4_e2m1: return f32_to_fp4_e2m1(f);
    default: break;  // fp8_e8m0, uint8, uint4: codes of the quantised formats' own rules (block_quant.h)
  }
  return 0;
}

// Position of stored bits on an ordered integer line of format t: consecutive representable
// values are consecutive integers, +0 and -0 are both 0 (sign-magnitude -> two's-complement-like).
int64_t ordered(uint32_t bits, DType t) {
  if (t == DType::int8) return static_cast<int8_t>(static_cast<uint8_t>(bits));
  if (t == DType::uint8 || t == DType::uint4 || t == DType::fp8_e8m0) return bits & element_mask(t);  // unsigned codes in value order
  const uint32_t mask = element_mask(t);
  const uint32_t sign_bit = (mask >> 1) + 1u;  // 0x80, 0x8000 or 0x80000000
  const int64_t magnitude = bits & (sign_bit - 1u);
  return (bits & sign_bit) != 0 ? -magnitude : magnitude;
}

}  // namespace

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {  // Inf or NaN: keep the payload in the top mantissa bits
    return f32_from_bits(sign | 0x7F800000u | (mant << 13));
  }
  if (exp != 0) {  // normal: rebias 15 -> 127
    return f32_from_bits(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
  }
  if (mant == 0) return f32_from_bits(sign);  // +-0
  // Subnormal mant * 2^-24: normalise so the leading one becomes the implicit bit.
  int e = -14;  // exponent of the implicit-bit position 0x400
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  mant &= 0x3FFu;
  return f32_from_bits(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 13));
}

float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

uint16_t f32_to_f16_rne(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0x7FFF;                  // NaN -> canonical NaN
  if (abs == 0x7F800000u) return sign | 0x7C00u;         // +-Inf
  const int exp = static_cast<int>(abs >> 23) - 127;     // unbiased (f32 subnormals: -127)
  const uint32_t mant = abs & 0x7FFFFFu;
  if (exp > 15) return sign | 0x7C00u;                   // >= 2^16: beyond max finite 65504 + half ulp
  if (exp >= -14) {
    // Normal f16: drop 13 mantissa bits with RNE. A carry out of the mantissa bumps the exponent
    // (and 0x7BFF + 1 = 0x7C00 is +Inf: the IEEE overflow threshold 65520 falls out naturally).
    const uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1FFFu;
    const uint32_t rounded = (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ? h + 1u : h;
    return static_cast<uint16_t>(sign | rounded);
  }
  // Subnormal f16 (or zero): value = sig * 2^(exp-23) with the implicit bit, in units of 2^-24 that
  // is sig >> (-exp - 1). Below 2^-25 (shift > 24) everything rounds to zero; exactly 2^-25 is a
  // tie that rounds to the even value 0. A carry into 0x400 yields the smallest normal, correctly.
  // f32 subnormals (exp == -127) are far below that and need no special case.
  const int shift = -exp - 1;  // 14..126
  if (shift > 24) return sign;
  const uint32_t sig = mant | 0x800000u;
  return static_cast<uint16_t>(sign | shift_right_rne(sig, shift));
}

uint16_t f32_to_bf16_rne(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;  // NaN -> canonical NaN
  // Same exponent range as f32: drop the low 16 bits with RNE. The carry handles mantissa
  // overflow, max-finite -> Inf and subnormal -> smallest normal uniformly.
  return static_cast<uint16_t>(shift_right_rne(x, 16));
}

uint8_t f32_to_fp8_e4m3(float f) { return f32_to_fp8(f, kE4M3); }
uint8_t f32_to_fp8_e5m2(float f) { return f32_to_fp8(f, kE5M2); }
float fp8_e4m3_to_f32(uint8_t b) { return fp8_to_f32(b, kE4M3); }
float fp8_e5m2_to_f32(uint8_t b) { return fp8_to_f32(b, kE5M2); }

int8_t f32_to_int8(float f) {
  // Integer arithmetic on the bits, so the result does not depend on the FP rounding mode.
  const uint32_t x = f32_bits(f);
  const bool negative = (x >> 31) != 0;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0;                      // NaN -> 0
  const int exp = static_cast<int>(abs >> 23) - 127;     // unbiased (f32 subnormals: -127)
  if (exp >= 8) return negative ? -128 : 127;            // |x| >= 256 (and +-Inf): saturate
  if (exp < -1) return 0;                                // |x| < 0.5 rounds to 0
  // |x| = sig * 2^(exp-23); the integer nearest to it, ties to even, is sig >> (23 - exp) rounded.
  const uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
  const int32_t magnitude = static_cast<int32_t>(shift_right_rne(sig, 23 - exp));  // 0..256
  const int32_t value = negative ? -magnitude : magnitude;
  return static_cast<int8_t>(value < -128 ? -128 : (value > 127 ? 127 : value));
}

float quant_max(DType t) {
  switch (t) {
    case DType::fp8_e4m3: return 448.0f;
    case DType::fp8_e5m2: return 57344.0f;
    case DType::int8: return 127.0f;
    case DType::fp4_e2m1: return 6.0f;
    default: break;
  }
  return 0.0f;  // not a quantised format
}

uint32_t quantize_bits(float x, float scale, DType to) {
  // IEEE fp32 division, correctly rounded (never x * (1 / scale), which rounds twice). x / 0 is
  // +-Inf (saturates) and 0 / 0 NaN, as on the GPU. For float dtypes this is the scaled value
  // narrowed with RNE.
  const float scaled = x / scale;
  return narrow_f32(scaled, to);
}

float bits_to_f32(uint32_t bits, DType t) {
  bits &= element_mask(t);
  switch (t) {
    case DType::f16: return f16_to_f32(static_cast<uint16_t>(bits));
    case DType::bf16: return bf16_to_f32(static_cast<uint16_t>(bits));
    case DType::f32: return f32_from_bits(bits);
    case DType::fp8_e4m3: return fp8_e4m3_to_f32(static_cast<uint8_t>(bits));
    case DType::fp8_e5m2: return fp8_e5m2_to_f32(static_cast<uint8_t>(bits));
    case DType::int8: return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(bits)));
    case DType::fp4_e2m1: return fp4_e2m1_to_f32(static_cast<uint8_t>(bits));
    case DType::fp8_e8m0: return e8m0_to_f32(static_cast<uint8_t>(bits));
    case DType::uint8:
    case DType::uint4: return static_cast<float>(bits);
  }
  return 0.0f;
}

int64_t ulp_distance(uint32_t a, uint32_t b, DType t) {
  a &= element_mask(t);
  b &= element_mask(t);
  const bool a_nan = is_nan_bits(a, t);
  const bool b_nan = is_nan_bits(b, t);
  if (a_nan || b_nan) return a_nan && b_nan ? 0 : -1;
  const int64_t d = ordered(a, t) - ordered(b, t);
  return d < 0 ? -d : d;
}

bool is_nan_bits(uint32_t bits, DType t) {
  switch (t) {
    case DType::f16: return (bits & 0x7FFFu) > 0x7C00u;
    case DType::bf16: return (bits & 0x7FFFu) > 0x7F80u;
    case DType::f32: return (bits & 0x7FFFFFFFu) > 0x7F800000u;
    case DType::fp8_e4m3: return (bits & 0x7Fu) == 0x7Fu;
    case DType::fp8_e5m2: return (bits & 0x7Fu) > 0x7Cu;
    case DType::int8: return false;  // no NaN encoding
    case DType::fp8_e8m0: return bits == 0xFFu;
    default: return false;  // fp4_e2m1, uint8, uint4: no NaN encoding
  }
  return false;
}

uint32_t canonical_nan_bits(DType t) {
  switch (t) {
    case DType::f16: return 0x7FFFu;
    case DType::bf16: return 0x7FFFu;
    case DType::f32: return 0x7FFFFFFFu;
    case DType::fp8_e4m3: return kFp8Nan;
    case DType::fp8_e5m2: return kFp8Nan;
    case DType::int8: return 0u;  // int8 has no NaN; the contract stores NaN as 0
    case DType::fp8_e8m0: return 0xFFu;
    default: return 0u;  // fp4_e2m1, uint8, uint4: no NaN encoding
  }
  return 0;
}

uint32_t convert_bits(uint32_t bits, DType from, DType to) {
  bits &= element_mask(from);
  if (from == to) return bits;  // bit copy: NaN payloads survive
  if (is_nan_bits(bits, from)) return canonical_nan_bits(to);
  // Widen exactly to f32 (every f16, bf16, fp8 and int8 value is an f32), then narrow once with
  // the target's rounding, so there is no double rounding. Quantised dtypes take no scale here:
  // a quantised source converts its stored value (int8 as its integer), and a quantised target
  // is quantize_bits(value, 1.0f, to). The golden model calls quantize_bits with the real scale.
  return narrow_f32(bits_to_f32(bits, from), to);
}

}  // namespace kvf::golden
