// minifloat.cpp — fp4 e2m1 and e8m0 codecs and power-of-two scale rounding (see minifloat.h).
//
// Written from the format definitions, with integer arithmetic on the bits only.
#include "minifloat.h"

#include <bit>
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

constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32CanonicalNan = 0x7FFFFFFFu;

// Shifts `m` right by `shift` (1..31) and rounds the discarded bits to nearest, ties to even.
uint32_t shift_right_rne(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u) != 0)) return kept + 1u;
  return kept;
}

}  // namespace

uint8_t f32_to_fp4_e2m1(float f, E2m1Nan nan) {
  // e2m1: exponent field 0 is subnormal (0, 0.5 = 1 unit of 2^-1), fields 1..3 are 2^0..2^2 with
  // one mantissa bit; the largest magnitude code 0x7 is 6.
  const uint32_t x = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 28) & 0x8u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > kF32Inf) return nan == E2m1Nan::max_positive ? uint8_t{0x7} : sign;
  const int exp = static_cast<int>(abs >> 23) - 127;  // unbiased (f32 subnormals: -127)
  if (exp > 2) return sign | 0x7u;                    // |x| >= 8 and ±Inf: saturate
  const uint32_t mant = abs & 0x7FFFFFu;
  uint32_t code;
  if (exp >= 0) {
    // Normal e2m1 (biased exponent exp + 1): keep one mantissa bit with RNE. A carry bumps the
    // exponent; past 0x7 (6) is beyond the format and saturates.
    code = shift_right_rne((static_cast<uint32_t>(exp + 1) << 23) | mant, 22);
  } else {
    // Subnormal (or zero): |x| in units of 0.5 is sig >> (22 - exp). 0.25 (shift 24, exactly half a
    // unit) is the tie that rounds to the even value 0; below it (shift > 24) everything is 0.
    const int shift = 22 - exp;
    if (shift > 24) return sign;
    code = shift_right_rne(mant | 0x800000u, shift);
  }
  if (code > 0x7u) code = 0x7u;
  return static_cast<uint8_t>(sign | code);
}

float fp4_e2m1_to_f32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8u) << 28;
  const uint32_t exp_field = (code >> 1) & 0x3u;
  const uint32_t mant = code & 0x1u;
  if (exp_field == 0) return f32_from_bits(sign | (mant != 0 ? 0x3F000000u : 0u));  // ±0, ±0.5
  // 2^(exp_field - 1) * (1 + mant / 2): f32 biased exponent exp_field - 1 + 127.
  return f32_from_bits(sign | ((exp_field + 126u) << 23) | (mant << 22));
}

uint8_t f32_to_e8m0(float f, E8m0Rounding rounding, E8m0Overflow overflow) {
  const uint32_t abs = f32_bits(f) & 0x7FFFFFFFu;  // the sign is ignored
  const uint8_t too_large = overflow == E8m0Overflow::saturate ? 0xFE : 0xFF;
  if (abs > kF32Inf) return 0xFF;
  if (abs == kF32Inf) return too_large;
  const uint32_t exp_field = abs >> 23;
  const uint32_t mant = abs & 0x7FFFFFu;
  if (exp_field == 0) {
    // 0 and f32 subnormals: |x| < 2^-126. floor(log2 |x|) <= -127 clips to 2^-127; the ceiling is
    // 2^-126 for |x| > 2^-127 (bits 0x00400000) and clips to 2^-127 otherwise (0 included).
    return rounding == E8m0Rounding::ceil && abs > 0x00400000u ? uint8_t{1} : uint8_t{0};
  }
  // A normal f32 2^(exp_field - 127) * 1.m: floor is the exponent field itself (the e8m0 bias is
  // f32's); ceil adds one unless the value is a power of two. 255 would be 2^128.
  const uint32_t code = exp_field + (rounding == E8m0Rounding::ceil && mant != 0 ? 1u : 0u);
  return code > 0xFEu ? too_large : static_cast<uint8_t>(code);
}

float e8m0_to_f32(uint8_t code) {
  if (code == 0xFF) return f32_from_bits(kF32CanonicalNan);
  if (code == 0x00) return f32_from_bits(0x00400000u);  // 2^-127, subnormal in f32
  return f32_from_bits(static_cast<uint32_t>(code) << 23);
}

float pow2_ceil(float s) {
  const uint32_t x = f32_bits(s);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > kF32Inf) return f32_from_bits(kF32CanonicalNan);  // NaN
  if (abs == 0) return 0.0f;                                   // log2 0 = -Inf, exp2(-Inf) = +0
  if ((x >> 31) != 0) return f32_from_bits(kF32CanonicalNan);  // log2 of a negative: NaN
  if (abs == kF32Inf) return s;
  const uint32_t exp_field = abs >> 23;
  const uint32_t mant = abs & 0x7FFFFFu;
  if (exp_field == 0) {
    // Subnormal m * 2^-149: the least power of two >= m, in the same units (2^23 units is 2^-126,
    // the smallest normal, whose bits are also 1 << 23).
    return f32_from_bits(std::bit_ceil(mant));
  }
  if (mant == 0) return s;                                     // already a power of two
  return f32_from_bits(exp_field == 0xFEu ? kF32Inf : (exp_field + 1u) << 23);
}

namespace {

// floor((2^(2^(p-24)) - 1) * 2^23): the largest f * 2^23 (f the fraction of s above 2^k) for which
// log2(1 + f) stays below half an ulp 2^(p-24) of a float whose binade is [2^p, 2^(p+1)), i.e. for
// which fp32 log2 rounds k + log2(1 + f) down to k. The real value is near ln2 * 2^(p-1) and never
// near an integer (44.36, 22.18, 11.09, 5.55, 2.77, 1.39, 0.69 for p = 7..1); the test checks the
// table against long-double arithmetic.
uint32_t log2f_round_down_limit(int p) {
  switch (p) {
    case 7: return 44;
    case 6: return 22;
    case 5: return 11;
    case 4: return 5;
    case 3: return 2;
    case 2: return 1;
    default: return 0;  // p <= 1: even f = 2^-23 lifts log2 past half an ulp
  }
}

}  // namespace

float pow2_ceil_log2f(float s) {
  const float exact = pow2_ceil(s);
  const uint32_t x = f32_bits(s);
  if (x == 0 || x >= kF32Inf) return exact;  // ±0 (sign bit alone is >= Inf too), negatives, Inf, NaN
  // s = 2^k * (1 + f) with 0 <= f < 1; frac23 = f * 2^23, an integer for every f32.
  const uint32_t exp_field = x >> 23;
  const uint32_t mant = x & 0x7FFFFFu;
  int k;
  uint32_t frac23;
  if (exp_field != 0) {
    k = static_cast<int>(exp_field) - 127;
    frac23 = mant;
  } else {
    const int q = std::bit_width(mant) - 1;  // s = m * 2^-149 with 2^q <= m < 2^(q+1)
    k = q - 149;
    frac23 = (mant - (1u << q)) << (23 - q);
  }
  if (frac23 == 0) return exact;  // a power of two: log2f is exact
  // log2 s lies in (k, k + 1). It rounds to the integer k when it is within half an ulp of k; the
  // ulp is that of the floats between k and log2 s: for k >= 1 the binade of k, for k <= -1 the
  // binade just below |k| (log2 s is k plus a little, so |log2 s| is a little below |k|). For
  // k = 0 log2 s is a small positive number with tiny ulps: never rounded to 0.
  int p;
  if (k >= 1) {
    p = std::bit_width(static_cast<uint32_t>(k)) - 1;
  } else if (k <= -2) {
    p = std::bit_width(static_cast<uint32_t>(-k - 1)) - 1;
  } else {
    return exact;  // k = 0 or -1 (binade [0.5, 1): limit 0)
  }
  if (frac23 > log2f_round_down_limit(p)) return exact;
  return f32_from_bits(k >= -126 ? static_cast<uint32_t>(k + 127) << 23 : 1u << (k + 149));  // 2^k
}

std::string_view to_string(E2m1Nan v) { return v == E2m1Nan::max_positive ? "max_positive" : "signed_zero"; }
std::string_view to_string(E8m0Rounding v) { return v == E8m0Rounding::floor ? "floor" : "ceil"; }
std::string_view to_string(E8m0Overflow v) { return v == E8m0Overflow::saturate ? "saturate" : "nan"; }

}  // namespace kvf::golden
