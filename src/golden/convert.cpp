// convert.cpp — bit-level software conversions between f16, bf16 and f32 (see convert.h).
//
// Written from the IEEE 754 encodings alone, without CUDA headers or intrinsics, so the golden
// model is an independent implementation of the contract; tests/unit/golden/convert_test.cpp
// checks it exhaustively (16-bit inputs) and at every rounding boundary (f32 inputs) against the
// CUDA toolkit's host-side __half2float / __float2half_rn / __float2bfloat16_rn.
//
// Formats (sign | exponent | mantissa, bias):
//   f16   1 | 5 | 10, bias 15     subnormal unit 2^-24
//   bf16  1 | 8 |  7, bias 127    the upper half of an f32
//   f32   1 | 8 | 23, bias 127
#include "convert.h"

#include <cstring>

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

bool is_nan_bits(uint32_t bits, DType t) {
  switch (t) {
    case DType::f16: return (bits & 0x7FFFu) > 0x7C00u;
    case DType::bf16: return (bits & 0x7FFFu) > 0x7F80u;
    case DType::f32: return (bits & 0x7FFFFFFFu) > 0x7F800000u;
  }
  return false;
}

uint32_t canonical_nan_bits(DType t) {
  switch (t) {
    case DType::f16: return 0x7FFFu;
    case DType::bf16: return 0x7FFFu;
    case DType::f32: return 0x7FFFFFFFu;
  }
  return 0;
}

uint32_t convert_bits(uint32_t bits, DType from, DType to) {
  if (from != DType::f32) bits &= 0xFFFFu;
  if (from == to) return bits;  // bit copy: NaN payloads survive
  if (is_nan_bits(bits, from)) return canonical_nan_bits(to);

  // Widen exactly to f32, then narrow with RNE (widening is exact, so no double rounding).
  float f = 0.0f;
  switch (from) {
    case DType::f16: f = f16_to_f32(static_cast<uint16_t>(bits)); break;
    case DType::bf16: f = bf16_to_f32(static_cast<uint16_t>(bits)); break;
    case DType::f32: f = f32_from_bits(bits); break;
  }
  switch (to) {
    case DType::f16: return f32_to_f16_rne(f);
    case DType::bf16: return f32_to_bf16_rne(f);
    case DType::f32: return f32_bits(f);
  }
  return 0;
}

}  // namespace kvf::golden
