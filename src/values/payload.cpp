// payload.cpp — the pre-run value of every key/value row, context cell and canary (see payload.h).
//
// All values are raw element bits computed from (case.payload_seed, coordinates) with SplitMix64's
// mix64, so any element can be recomputed in O(1) by the arena fill and by the diff's decoder.
//
// Finite values (dist finite, context cells, the 5/6 non-special share of dist special):
//   sign      random;
//   exponent  7/8 uniform over the exponents that stay finite and non-zero in BOTH the source and
//             the destination dtype (e.g. f32 -> f16: 2^-24 .. 2^15, so conversions are exercised on
//             values that survive them), 1/8 uniform over every finite exponent of the source dtype
//             (f32/bf16 subnormals, overflow to +-Inf and underflow to +-0 in a narrower cache);
//   mantissa  a bijection of the element's linear index mod 2^mantissa_bits, so elements within
//             2^m consecutive indices never share a mantissa: f32 payloads of one case are unique
//             up to 8M elements.
// A copy of 16-bit values (input dtype == cache dtype, f16 or bf16) instead takes each input
// element's whole pattern from a seeded affine permutation k -> (a * k + b) mod M of its linear
// index k over the M finite patterns (f16 63488, bf16 65280; every sign, exponent and mantissa, so
// the spread of values is that of the scheme above): the finite input values of a case whose views
// hold at most M elements are unique, so the diff's decoder names every writer of a copied value
// exactly (decode.h). Converting caches keep the scheme above (conversion merges values anyway).
// Real NaNs (dist special) avoid every canary pattern, the guard pattern and the canonical NaN:
//   f16  sign | 0x7D00..0x7DFF (signalling) or 0x7F00..0x7FFE (quiet, even low byte)
//   bf16 sign | 0x7F81..0x7FBF (signalling) or 0x7FE0..0x7FFE (quiet, even)
//   f32  sign | 0x7FA00000..0x7FBFFFFF (signalling) or 0x7FE00000..0x7FFFFFFE (quiet, even)
// Canaries are quiet NaNs with the tag in the low mantissa bits (0x7E00|tag, 0x7FC0|tag,
// 0x7FC00000|tag); the guard pattern is all ones.
//
// Quantised caches (fp8_e4m3, fp8_e5m2, int8) have 256 codes and few or no NaNs, so their canaries
// cannot all be values a correct quantisation never produces. The guard stays 0xFF (e4m3 and e5m2
// NaN; int8 -1). Where a NaN code exists that no correct quantisation produces (every NaN quantises
// to 0x7F), it is used: e5m2 tail 0x7D, free block 0x7E, stride gap 0xFD, input gap 0xFE. e4m3 has
// one NaN besides the guard, 0x7F, which is also what a NaN input quantises to; it marks free
// blocks (a stray write of a NaN element into a free block goes unseen there, but the block tail,
// which is also the pre-run value of new-token cells, stays a non-NaN code so that a skipped NaN
// element is a visible missing write). Every other tag is the code 0xA0 | tag (e4m3 about -0.13..
// -0.2, e5m2 about -0.008, int8 -95..-88): real values that a correct write can produce, so a
// single cell holding one proves nothing. The diff therefore classifies 1-byte caches by location
// only (arena/classify.cpp), never by canary_of(). Context cells of 1-byte caches avoid every canary code and
// every NaN.
//
// Static scales (scale_bits) and context scales (context_scale_bits) are positive finite fp32:
//   unit     1.0
//   pow2     2^k, k uniform in [-4, 4] (x / scale is exact, so ties survive the division)
//   random   2^e * (1 + m), e in [-6, 6], m a bijection of (index, tensor) over 23 bits: distinct
//            per index and between K and V
//   extreme  as random with e in [-24, -16] or [16, 24]
//   context  as random with e in [-10, 10], distinct per (request, pos, head, tensor)
//
// dist ties (input_bits), per element:
//   float cache, input dtype != cache dtype: the exact midpoint of two adjacent cache values
//     (random code, random sign; the top one is the overflow tie max + ulp/2 -> Inf) when the input
//     dtype holds it exactly (always for f32 input; else often not, then a finite value), 1/8
//     exact cache values; equal dtypes: finite.
//   quantised cache, static scales: v / scale for v drawn as 6/8 midpoints of adjacent stored
//     values (fp8: adjacent codes; int8: k + 0.5), 1/8 values beyond saturation (|v| > QMAX,
//     including the tie QMAX + ulp/2 for int8 127.5), 1/8 exact stored values; x = v * scale in
//     fp32, kept if the input dtype holds x exactly and x / scale == v (always for unit and pow2
//     scales within range), else x rounded to the input dtype (near a tie, not on one).
//   quantised cache, per_token_head: the row's scale is computed from the row itself, so the row
//     is built around it: one element (dim chosen per row) is ±QMAX * 2^k, k in [-4, 4] (lowered
//     until QMAX * 2^k fits the input dtype), making amax = QMAX * 2^k and scale = 2^k exactly;
//     every other element is a midpoint or an exact stored value times 2^k, all with |v| < QMAX.
//     These are exact ties; rows never exceed saturation (the amax element sits exactly on it).
#include "payload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "case/placement.h"
#include "base/rng.h"
#include "convert.h"
#include "remainder.h"

namespace kvf::golden {

namespace {

// Encoding parameters of a float dtype.
struct Format {
  int exp_bits;   // width of the exponent field
  int mant_bits;  // width of the mantissa field
  int bias;       // exponent bias
  int emin_sub;   // unbiased exponent of the smallest subnormal (2^emin_sub)
  int emax;       // unbiased exponent of the largest finite binade
};

// For quantised dtypes only emin_sub and emax are meaningful (shared_exponents uses them to keep
// values within the stored range at unit scale): e4m3 2^-9 .. 448, e5m2 2^-16 .. 57344, int8 1 .. 127.
Format format_of(DType t) {
  switch (t) {
    case DType::f16: return {5, 10, 15, -24, 15};
    case DType::bf16: return {8, 7, 127, -133, 127};
    case DType::f32: return {8, 23, 127, -149, 127};
    case DType::fp8_e4m3: return {4, 3, 7, -9, 8};
    case DType::fp8_e5m2: return {5, 2, 15, -16, 15};
    case DType::int8: return {0, 7, 0, 0, 6};
    default: break;  // the quantised formats' dtypes: inputs are scaled per group, any finite value fits
  }
  return {8, 23, 127, -149, 127};
}

// Salts separating the streams (mixed into the seed so streams never share a hash input).
constexpr uint64_t kSaltInput = 0x1a2b3c4d5e6f7081ull;
constexpr uint64_t kSaltContext = 0xc0ffee0ddba11ull;
constexpr uint64_t kSaltConstant = 0x5eed0fc0275a47ull;
constexpr uint64_t kSaltTies = 0x71e5a11ce0ffull;
constexpr uint64_t kSaltScale = 0x5ca1e5ca1e5ull;
constexpr uint64_t kSaltContextScale = 0xc0275ca1eull;
constexpr uint64_t kSaltUnique = 0xd15717c7f1e1dull;
constexpr uint64_t kSaltEdges = 0xed6e5ed6e5ull;

// A bijection on [0, 2^bits): multiply by odd constants and xorshift, all invertible mod 2^bits.
uint32_t permute_bits(uint64_t x, int bits) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  x &= mask;
  x = (x * 0x9E3779B97F4A7C15ull) & mask;
  x ^= x >> ((bits + 1) / 2);
  x = (x * 0xBF58476D1CE4E5B9ull) & mask;
  x ^= x >> ((bits + 2) / 3);
  x = (x * 0x94D049BB133111EBull) & mask;
  return static_cast<uint32_t>(x);
}

// Range of biased exponent fields [lo, hi] whose normal values are finite and non-zero in both
// `src` and `dst` (including dst's subnormal binades, which are normal binades of a wider src).
struct ExpRange {
  int lo, hi;
};
ExpRange shared_exponents(DType src, DType dst) {
  const Format s = format_of(src);
  const Format d = format_of(dst);
  const int src_lo_unbiased = 1 - s.bias;  // smallest normal binade of src
  const int lo_unbiased = std::max(src_lo_unbiased, d.emin_sub);
  const int hi_unbiased = std::min(s.emax, d.emax);
  int lo = lo_unbiased + s.bias;
  const int hi = hi_unbiased + s.bias;
  // Subnormals of src are representable in dst whenever dst reaches below src's normal range.
  if (lo_unbiased == src_lo_unbiased && d.emin_sub <= s.emin_sub) lo = 0;
  return {lo, hi};
}

// finite_bits() with its exponent field chosen: the sign from `h`, the mantissa from `index`.
uint32_t finite_with_field(const Format& f, int field, uint64_t h, uint64_t index) {
  const uint32_t sign = static_cast<uint32_t>((h >> 40) & 1u) << (f.exp_bits + f.mant_bits);
  const uint32_t mant = permute_bits(index, f.mant_bits);
  return sign | (static_cast<uint32_t>(field) << f.mant_bits) | mant;
}

// A finite value of dtype `src` (never NaN or Inf), see the file comment. `h` supplies sign and
// exponent, `index` the mantissa bijection, `dst` the dtype the value is headed for.
uint32_t finite_bits(const Format& f, const ExpRange& r, uint64_t h, uint64_t index) {
  const int max_field = (1 << f.exp_bits) - 2;  // largest finite exponent field
  int field;
  if ((h & 7u) != 0) {
    field = r.lo + static_cast<int>((h >> 3) % static_cast<uint64_t>(r.hi - r.lo + 1));
  } else {
    field = static_cast<int>((h >> 3) % static_cast<uint64_t>(max_field + 1));
  }
  return finite_with_field(f, field, h, index);
}

// Unique finite 16-bit payloads of a copy (input dtype == cache dtype, f16 or bf16): the element's
// linear index k goes through a seeded affine permutation k -> (a * k + b) mod M of the M finite
// bit patterns (f16 63488: exponent != 0x1F; bf16 65280: exponent != 0xFF), so no two elements of
// a case whose key/value views hold at most M elements share bits, and above M each pattern serves
// at most ceil(count / M) elements. Pattern p is sign p / (M / 2), then the low 15 bits p % (M / 2)
// (every pattern below the all-ones exponent).
class UniqueFinite {
 public:
  // Engaged for a copy of f16 or bf16 (not for a quantised format's inputs), else empty.
  static std::optional<UniqueFinite> of(const Case& c) {
    if (c.has_format() || c.input_dtype != c.cache_dtype) return std::nullopt;
    if (c.input_dtype != DType::f16 && c.input_dtype != DType::bf16) return std::nullopt;
    return UniqueFinite(c.input_dtype, c.payload_seed);
  }
  uint32_t operator()(uint64_t index) const {
    const uint64_t p = (a_ * by_m_.of(index) + b_) % m_;  // a_ < m_ and index mod m_ < m_: no overflow
    return static_cast<uint32_t>((p / half_) << 15 | p % half_);
  }

 private:
  UniqueFinite(DType t, uint64_t seed)
      : half_(t == DType::f16 ? 0x7C00u : 0x7F80u), m_(2 * half_), by_m_(m_) {
    const uint64_t h = mix64(seed ^ kSaltUnique);
    a_ = (h % m_) | 1u;
    while (std::gcd(a_, m_) != 1) a_ = (a_ + 2) % m_;  // M is even: a odd and coprime with M's odd part
    b_ = (h >> 32) % m_;
  }
  uint64_t half_;     // finite patterns of one sign
  uint64_t m_;        // finite patterns
  Remainder by_m_;    // of m_
  uint64_t a_ = 1, b_ = 0;
};

// finite_bits(src, dst, h, index) for the elements of a row: the same bits, with its two
// remainders taken by multiplication (remainder.h) instead of a 64-bit division per element.
class FiniteRow {
 public:
  FiniteRow(DType src, DType dst)
      : f_(format_of(src)),
        r_(shared_exponents(src, dst)),
        shared_(static_cast<uint64_t>(r_.hi - r_.lo + 1)),
        all_(static_cast<uint64_t>((1 << f_.exp_bits) - 2 + 1)) {}
  uint32_t operator()(uint64_t h, uint64_t index) const {
    const int field = (h & 7u) != 0 ? r_.lo + static_cast<int>(shared_.of(h >> 3)) : static_cast<int>(all_.of(h >> 3));
    return finite_with_field(f_, field, h, index);
  }

 private:
  Format f_;
  ExpRange r_;
  Remainder shared_;  // of r.hi - r.lo + 1: the exponents shared by src and dst
  Remainder all_;     // of max_field + 1: every finite exponent of src
};
uint32_t finite_bits(DType src, DType dst, uint64_t h, uint64_t index) {
  return finite_bits(format_of(src), shared_exponents(src, dst), h, index);
}

// A real NaN of dtype t that is neither a canary, the guard pattern nor the canonical NaN.
uint32_t real_nan_bits(DType t, uint64_t h) {
  const bool quiet = (h & 1u) != 0;
  const bool negative = (h & 2u) != 0;
  const uint64_t r = h >> 8;
  switch (t) {
    case DType::f16: {
      const uint32_t v = quiet ? 0x7F00u | (r & 0xFEu) : 0x7D00u | (r & 0xFFu);
      return v | (negative ? 0x8000u : 0u);
    }
    case DType::bf16: {
      const uint32_t v = quiet ? 0x7FE0u | (r & 0x1Eu) : 0x7F81u + static_cast<uint32_t>(r % 0x3F);
      return v | (negative ? 0x8000u : 0u);
    }
    case DType::f32: {
      const uint32_t v = quiet ? 0x7FE00000u | (r & 0x1FFFFEu) : 0x7FA00000u | (r & 0x1FFFFFu);
      return v | (negative ? 0x80000000u : 0u);
    }
    default: break;  // quantised dtypes are never inputs
  }
  return 0;
}

// One of the ten special classes of dist special: 0 real NaN, 1 +Inf, 2 -Inf, 3 +0, 4 -0,
// 5 +-smallest subnormal, 6 +-largest subnormal, 7 +-smallest normal, 8 +max finite, 9 -max finite.
uint32_t special_bits(DType t, int which, uint64_t h) {
  const Format f = format_of(t);
  const uint32_t sign_bit = 1u << (f.exp_bits + f.mant_bits);
  const uint32_t inf = ((1u << f.exp_bits) - 1u) << f.mant_bits;
  const uint32_t mant_all = (1u << f.mant_bits) - 1u;
  const uint32_t sign = ((h >> 20) & 1u) != 0 ? sign_bit : 0u;
  switch (which) {
    case 0: return real_nan_bits(t, h >> 24);
    case 1: return inf;                                  // +Inf
    case 2: return sign_bit | inf;                       // -Inf
    case 3: return 0;                                    // +0
    case 4: return sign_bit;                             // -0
    case 5: return sign | 1u;                            // +-smallest subnormal
    case 6: return sign | mant_all;                      // +-largest subnormal
    case 7: return sign | (1u << f.mant_bits);           // +-smallest normal
    case 8: return inf - 1u;                             // +max finite
    default: return sign_bit | (inf - 1u);               // -max finite
  }
}

// Hash of up to five coordinates under a seed and a stream salt.
uint64_t coord_hash(uint64_t seed, uint64_t salt, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                    uint64_t e) {
  uint64_t h = mix64(seed ^ salt);
  h = mix64(h ^ a);
  h = mix64(h ^ b);
  h = mix64(h ^ c);
  h = mix64(h ^ d);
  return mix64(h ^ e);
}


// ---------------------------------------------------------------------------------------------
// Exact rounding ties (dist ties)

float f32_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The exact f32 value of a float-dtype element.
float widen(uint32_t bits, DType t) {
  switch (t) {
    case DType::f16: return f16_to_f32(static_cast<uint16_t>(bits));
    case DType::bf16: return bf16_to_f32(static_cast<uint16_t>(bits));
    default: return f32_of(bits);
  }
}

// Bits of x in float dtype t if t holds x exactly (same value, same sign), else nullopt.
std::optional<uint32_t> exact_in(float x, DType t) {
  const uint32_t xb = bits_of(x);
  if (t == DType::f32) return xb;
  const uint32_t b = convert_bits(xb, DType::f32, t);
  if (bits_of(widen(b, t)) != xb) return std::nullopt;
  return b;
}

// x rounded to float dtype t (RNE; the value closest to an intended tie).
uint32_t rounded_in(float x, DType t) { return t == DType::f32 ? bits_of(x) : convert_bits(bits_of(x), DType::f32, t); }

// Largest finite non-negative code of an fp8 format: 0x7E = 448 (e4m3), 0x7B = 57344 (e5m2).
uint32_t fp8_max_code(DType t) { return t == DType::fp8_e4m3 ? 0x7Eu : 0x7Bu; }

// What a tie element should equal after division by its scale (before conversion), for quantised
// dtype q: 6/8 a midpoint of two adjacent stored values, 1/8 (only if `beyond`) a value past
// saturation, else an exact stored value. With !beyond every |v| stays <= QMAX, and < QMAX for
// midpoints, so the value never raises a per_token_head row's amax.
float quant_tie_target(DType q, uint64_t h, bool beyond) {
  const int which = static_cast<int>(h % 8);  // 0..5 midpoint, 6 beyond (or exact), 7 exact
  const float sign = ((h >> 3) & 1u) != 0 ? -1.0f : 1.0f;
  const uint64_t r = h >> 8;
  const float qmax = quant_max(q);
  if (q == DType::int8) {
    if (which < 6) {  // k + 0.5: k in [-128, 126] (static), [-127, 126] (dynamic)
      const int64_t lo = beyond ? -128 : -127;
      return static_cast<float>(lo + static_cast<int64_t>(r % static_cast<uint64_t>(126 - lo + 1))) + 0.5f;
    }
    if (which == 6 && beyond) {  // 127.5 and -128.5 tie into saturation; then clear overflows
      const float far[4] = {127.5f, -128.5f, 128.0f * static_cast<float>(1 + r % 8), -1000.0f};
      return far[(r >> 3) % 4];
    }
    const int64_t lo = beyond ? -128 : -127;
    return static_cast<float>(lo + static_cast<int64_t>(r % static_cast<uint64_t>(127 - lo + 1)));
  }
  const uint32_t max_code = fp8_max_code(q);
  if (which < 6) {
    const auto code = static_cast<uint32_t>(r % max_code);  // midpoint of code and code + 1
    return sign * ((bits_to_f32(code, q) + bits_to_f32(code + 1, q)) / 2.0f);
  }
  if (which == 6 && beyond) {  // max + ulp/2 (the satfinite tie), 2 * max, larger
    const float top_ulp = qmax - bits_to_f32(max_code - 1, q);
    const float far[4] = {qmax + top_ulp / 2.0f, 2.0f * qmax, qmax * 1.125f * 16.0f, qmax + top_ulp};
    return sign * far[(r >> 3) % 4];
  }
  return sign * bits_to_f32(static_cast<uint32_t>(r % (max_code + 1)), q);
}

// Input bits of a ties element of a quantised cache (see the file comment).
uint32_t quant_tie_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t dim) {
  const DType in = c.input_dtype;
  const DType q = c.cache_dtype;
  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const uint64_t h = coord_hash(c.payload_seed, kSaltTies, tensor, static_cast<uint64_t>(row),
                                static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 0);
  if (c.scale_kind == ScaleKind::per_token_head) {
    // scale = 2^k exactly: one element of the row is +-QMAX * 2^k, all others are smaller.
    const uint64_t hr = coord_hash(c.payload_seed, kSaltTies, tensor, static_cast<uint64_t>(row),
                                   static_cast<uint64_t>(head), 0, 1);
    int k = static_cast<int>(hr % 9) - 4;
    while (k > -4 && !exact_in(std::ldexp(quant_max(q), k), in)) --k;
    const float pow2k = std::ldexp(1.0f, k);
    const int64_t row_dims = t == Tensor::key ? c.head_dim : c.value_dim();
    const int64_t amax_dim = static_cast<int64_t>((hr >> 8) % static_cast<uint64_t>(row_dims));
    const float v = dim == amax_dim ? (((hr >> 40) & 1u) != 0 ? -quant_max(q) : quant_max(q)) : quant_tie_target(q, h, false);
    const float x = v * pow2k;  // exact: a power-of-two multiple (no overflow or underflow in f32)
    if (const auto b = exact_in(x, in)) return *b;
    return rounded_in(x, in);
  }
  int64_t index = 0;
  if (c.scale_kind == ScaleKind::per_head) index = head;
  if (c.scale_kind == ScaleKind::per_block) {
    index = c.slot_mapping[static_cast<size_t>(row)] / c.cache.block_size * c.num_heads + head;
  }
  const float scale = f32_of(scale_bits(c, t, index));
  const float v = quant_tie_target(q, h, true);
  const float x = v * scale;
  if (const auto b = exact_in(x, in); b && x / scale == v) return *b;
  return rounded_in(x, in);
}

// Input bits of a ties element of a float cache: a midpoint of two adjacent cache values the input
// dtype holds exactly (7/8) or an exact cache value (1/8), else nullopt.
std::optional<uint32_t> float_tie_bits(DType in, DType cache, uint64_t h) {
  if (in == cache || cache == DType::f32) return std::nullopt;  // bit copy or exact widening: no ties
  const uint32_t max_code = cache == DType::f16 ? 0x7BFFu : 0x7F7Fu;  // largest finite positive code
  const auto code = static_cast<uint32_t>((h >> 8) % (max_code + 1));
  const float lo = widen(code, cache);
  float x = lo;
  if (h % 8 != 0) {
    // Above max finite the next value would be max + ulp: the midpoint is the overflow tie (-> Inf).
    const float hi = code == max_code ? lo + (lo - widen(code - 1, cache)) : widen(code + 1, cache);
    x = lo + (hi - lo) / 2.0f;  // exact: one bit more than the cache format needs
  }
  if (((h >> 4) & 1u) != 0) x = -x;
  return exact_in(x, in);
}

// dist edges: a group's amax placed where the block scale's own rounding is decided, so that its
// quotient sits on a rounding edge of the scale's encoding (then nudged like every element,
// edge_bits()); nullopt where the format's scale has no such edge beyond the ties' amax.
//   nvfp4          amax = T * RN(6 g), T a midpoint of two adjacent e4m3 codes in [2^k, 2^(k+1)),
//                  or 1/8 the saturation edges 448 and 464 (e4m3's largest code, the satfinite tie):
//                  amax / (6 g) and amax * RN(1 / (6 g)) fall on either side of T for some amax,
//                  which is where the two Nvfp4Rule conventions differ.
//   MX, ocp_floor  amax = 2^(k + emax + 1), the power of two above the ties' amax qmax * 2^k: the
//                  floor of its log2 is the shared exponent's edge.
// Every other element of the group stays below amax (its magnitude is at most qmax * 2^k * g).
std::optional<float> scale_edge_amax(const Case& c, float global, int k, uint64_t h) {
  const QuantFormat f = c.quant_format;
  if (f == QuantFormat::nvfp4) {
    const double six_g = static_cast<double>(6.0f * global);
    double target = std::ldexp(1.0 + static_cast<double>(2 * (h % 8) + 1) / 16.0, k);
    if ((h >> 3) % 8 == 0) target = (h >> 6) % 2 == 0 ? 448.0 : 464.0;
    return static_cast<float>(target * six_g);  // the nearest f32: the edge itself or beside it
  }
  const bool mx = f == QuantFormat::mxfp8_e4m3 || f == QuantFormat::mxfp8_e5m2 || f == QuantFormat::mxfp4;
  if (mx && c.quant_rules.mx == MxScaleRule::ocp_floor) {
    const DType code = format_code_dtype(f);
    const float qmax = code == DType::fp4_e2m1 ? 6.0f : quant_max(code);
    return std::ldexp(1.0f, k + std::ilogb(qmax) + 1);
  }
  return std::nullopt;
}

// Ties of a quantised format (dist ties): each group of a (row, head) gets a power of two 2^k that
// its scale comes out as (exactly, when a static global scale is a power of two too), one element at
// the group's amax that makes it so, and the others at values whose scaled quotient is a rounding
// tie of the element format (e2m1: 0.25, 0.75, ... 5; fp8: midpoints of adjacent codes; int8:
// k + 0.5), an exact code, a subnormal code or, under a floor-exponent rule, a value past the
// element's largest (saturating). The asymmetric formats get a min and min + qmax * 2^k, so that the
// scale is 2^k and every other element's (x - min) / scale + 0.5 a whole number plus one half; the
// min is 0, or a row lies wholly above or below zero.
// Values the input dtype cannot hold are rounded to it (then only near a tie).
uint32_t format_tie_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t dim, bool edges) {
  const QuantFormat f = c.quant_format;
  const DType in = c.input_dtype;
  const int64_t latent = c.head_dim - c.rope_dim;
  const int64_t group = format_group(f, c.head_dim);
  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const int64_t g = dim / group, j = dim % group;
  const uint64_t hg = coord_hash(c.payload_seed, kSaltTies, tensor, static_cast<uint64_t>(row), static_cast<uint64_t>(head),
                                 static_cast<uint64_t>(g), 3);
  const uint64_t h = coord_hash(c.payload_seed, kSaltTies, tensor, static_cast<uint64_t>(row), static_cast<uint64_t>(head),
                                static_cast<uint64_t>(dim), 4);
  const int k = static_cast<int>(hg % 9) - 4;
  const int64_t amax_j = static_cast<int64_t>((hg >> 8) % static_cast<uint64_t>(group));
  const float sign = ((h >> 3) & 1u) != 0 ? -1.0f : 1.0f;
  const bool fp4 = format_code_dtype(f) == DType::fp4_e2m1;
  const DType code = format_code_dtype(f);
  const bool asym = format_has_zero(f);
  // The element's largest value and the global scale the block scale is relative to (nvfp4).
  const float qmax = asym ? (f == QuantFormat::asym_int4 ? 15.0f : 255.0f) : fp4 ? 6.0f : quant_max(code);
  const float global = f == QuantFormat::nvfp4 ? f32_of(scale_bits(c, t, 0)) : 1.0f;
  const float unit = std::ldexp(1.0f, k) * global;
  float v = 0.0f;
  if (dim >= latent) return finite_bits(in, in, h, static_cast<uint64_t>(dim));  // ds_mla's rope dims: copied
  if (asym) {
    const uint64_t which = h % 4;
    if (j == amax_j) v = qmax;
    else if (j == (amax_j + 1) % group) v = 0.0f;
    else v = static_cast<float>((h >> 8) % static_cast<uint64_t>(qmax)) + (which == 0 ? 0.0f : 0.5f);
    // Half the rows are shifted to one sign by a whole number of scales (the codes stay ties): all
    // positive (min > 0) or all negative (max < 0), where a zero a kernel lets into the min or max
    // (masked lanes, padding) changes the scale.
    const uint64_t shift = (hg >> 20) % 4;
    const float m = static_cast<float>(1 + (hg >> 24) % 8);
    if (shift == 2) v += m;
    if (shift == 3) v -= qmax + m;
    v *= unit;
  } else if (j == amax_j) {
    v = sign * qmax * unit;
    if (edges && (hg >> 32) % 4 == 0) {
      if (const auto e = scale_edge_amax(c, global, k, hg >> 34)) v = sign * *e;
    }
  } else {
    const uint64_t which = h % 8;
    if (fp4) {
      const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
      v = ties[which];
      if (which == 7 && f == QuantFormat::mxfp4 && c.quant_rules.mx == MxScaleRule::ocp_floor) v = 7.0f;  // saturates
    } else if (code == DType::int8) {
      v = static_cast<float>((h >> 8) % 127) + 0.5f;
    } else {
      const uint32_t max_code = fp8_max_code(code);
      const auto b = static_cast<uint32_t>((h >> 8) % max_code);
      v = which < 6 ? (bits_to_f32(b, code) + bits_to_f32(b + 1, code)) / 2.0f : bits_to_f32(which == 6 ? (b % 8) : b, code);
    }
    v *= sign * unit;
  }
  if (const auto b = exact_in(v, in)) return *b;
  return rounded_in(v, in);
}

// ---------------------------------------------------------------------------------------------
// Near edges (dist edges)

// `bits` of float dtype t moved one step of t's encoding towards zero (dir 1) or away from it
// (dir 2); dir 0, zeros, non-finite values and a step that would leave the finite range keep it.
uint32_t nudge(uint32_t bits, DType t, int dir) {
  const int width = t == DType::f32 ? 32 : 16;
  const uint32_t sign = uint32_t{1} << (width - 1);
  const uint32_t inf = t == DType::f32 ? 0x7F800000u : t == DType::f16 ? 0x7C00u : 0x7F80u;
  const uint32_t mag = bits & (sign - 1);
  if (dir == 0 || mag == 0 || mag >= inf) return bits;
  if (dir == 1) return (bits & sign) | (mag - 1);
  return mag + 1 == inf ? bits : (bits & sign) | (mag + 1);
}

// Input bits of an edges element: its ties value (a rounding midpoint, a saturation edge or an
// exact stored value of the code conversion, for formats also a block scale's edge), left as it is
// (1/3), or the input dtype's neighbour towards zero (1/3) or away from it (1/3). For an f32 input
// the neighbours' quotients are the edge's fp32 neighbours (one ulp below and above); a 16-bit
// input holds no value nearer. Elements with no edge (a copy, an f32 cache) are finite values.
bool is_byte_dtype(DType t);

uint32_t edge_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t dim) {
  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const uint64_t h = coord_hash(c.payload_seed, kSaltEdges, tensor, static_cast<uint64_t>(row),
                                static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 0);
  const int dir = static_cast<int>(h % 3);
  if (c.has_format()) {
    if (dim >= c.head_dim - c.rope_dim) return format_tie_bits(c, t, row, head, dim, true);  // copied rope dims
    return nudge(format_tie_bits(c, t, row, head, dim, true), c.input_dtype, dir);
  }
  if (is_byte_dtype(c.cache_dtype)) return nudge(quant_tie_bits(c, t, row, head, dim), c.input_dtype, dir);
  const uint64_t ht = coord_hash(c.payload_seed, kSaltTies, tensor, static_cast<uint64_t>(row),
                                 static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 2);
  if (const auto b = float_tie_bits(c.input_dtype, c.cache_dtype, ht)) return nudge(*b, c.input_dtype, dir);
  return finite_bits(c.input_dtype, c.cache_dtype, mix64(h), static_cast<uint64_t>(dim) + mix64(h >> 8));
}

// ---------------------------------------------------------------------------------------------
// 1-byte formats

bool is_byte_dtype(DType t) { return t == DType::fp8_e4m3 || t == DType::fp8_e5m2 || t == DType::int8; }

bool is_byte_nan(uint32_t b, DType t) {
  if (t == DType::fp8_e4m3) return (b & 0x7Fu) == 0x7Fu;
  if (t == DType::fp8_e5m2) return (b & 0x7Fu) > 0x7Cu;
  return false;
}

std::vector<uint8_t> make_context_codes(DType t) {
  std::vector<uint8_t> out;
  for (uint32_t b = 0; b < 256; ++b) {
    if (!is_byte_nan(b, t) && !canary_of(b, t)) out.push_back(static_cast<uint8_t>(b));
  }
  return out;
}

// Codes of a 1-byte dtype that context cells may hold: neither NaN nor a canary nor the guard.
const std::vector<uint8_t>& context_codes(DType t) {
  static const std::vector<uint8_t> e4m3 = make_context_codes(DType::fp8_e4m3);
  static const std::vector<uint8_t> e5m2 = make_context_codes(DType::fp8_e5m2);
  static const std::vector<uint8_t> i8 = make_context_codes(DType::int8);
  return t == DType::fp8_e4m3 ? e4m3 : t == DType::fp8_e5m2 ? e5m2 : i8;
}

}  // namespace

uint32_t input_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t dim) {
  const DType dt = c.input_dtype;
  // Rows nobody may read carry tagged NaNs.
  if (row >= c.num_slots()) return canary_bits(dt, Canary::graph_row);
  const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
  if (c.is_padding(slot)) return canary_bits(dt, Canary::padding_row);
  if (slot >= c.capacity()) return canary_bits(dt, Canary::invalid_row);
  if (const auto given = explicit_bits(c, t == Tensor::value, row, head, dim)) return *given;

  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  // The range values must fit: the cache dtype's, or any finite input value for a quantised format,
  // whose scales follow each group.
  const DType dst = c.has_format() ? dt : c.cache_dtype;
  if (c.dist == ValueDist::edges) return edge_bits(c, t, row, head, dim);
  if (c.dist == ValueDist::ties && c.has_format()) return format_tie_bits(c, t, row, head, dim, false);
  if (c.dist == ValueDist::ties && !c.has_format()) {
    if (is_byte_dtype(c.cache_dtype)) return quant_tie_bits(c, t, row, head, dim);
    const uint64_t h = coord_hash(c.payload_seed, kSaltTies, tensor, static_cast<uint64_t>(row),
                                  static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 2);
    if (const auto b = float_tie_bits(dt, c.cache_dtype, h)) return *b;
    // else a finite value, below
  }
  if (c.dist == ValueDist::constant) {
    // One value per (row, tensor); occasionally a zero row.
    const uint64_t h = coord_hash(c.payload_seed, kSaltConstant, tensor, static_cast<uint64_t>(row), 0, 0, 0);
    if (h % 8 == 0) return special_bits(dt, (h >> 8) % 2 == 0 ? 3 : 4, h);
    return finite_bits(dt, dst, mix64(h), (h >> 32) + static_cast<uint64_t>(row));
  }

  const uint64_t h = coord_hash(c.payload_seed, kSaltInput, tensor, static_cast<uint64_t>(row),
                                static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 0);
  if (c.dist == ValueDist::special && (h >> 56) % 6 == 0) {
    return special_bits(dt, static_cast<int>((h >> 16) % 10), h);
  }
  // Linear element index: distinct for every (row, tensor, head, dim) of the case.
  const uint64_t index =
      ((static_cast<uint64_t>(row) * 2 + tensor) * static_cast<uint64_t>(c.num_heads) + static_cast<uint64_t>(head)) *
          static_cast<uint64_t>(c.max_head_dim()) +
      static_cast<uint64_t>(dim);
  if (const auto unique = UniqueFinite::of(c)) return (*unique)(index);
  return finite_bits(dt, dst, mix64(h), index + mix64(c.payload_seed ^ kSaltInput));
}

void input_row_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t first, int64_t count, uint32_t* out) {
  // input_bits() for every dim, with the row's class (graph, padding or invalid row, a constant row)
  // decided once and, for dists finite and special, the coordinate hash's prefix, the index offset
  // and finite_bits()'s exponent range hoisted out of the dim loop (coord_hash mixes the dim last
  // but one). Bit-identical by construction; fill_rows_test checks it against input_bits(). Ties
  // are computed element by element.
  const DType dt = c.input_dtype;
  auto fill = [&](uint32_t bits) { std::fill(out, out + count, bits); };
  if (row >= c.num_slots()) return fill(canary_bits(dt, Canary::graph_row));
  const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
  if (c.is_padding(slot)) return fill(canary_bits(dt, Canary::padding_row));
  if (slot >= c.capacity()) return fill(canary_bits(dt, Canary::invalid_row));
  if (c.explicit_inputs && c.explicit_inputs->index_of(row) >= 0) {  // given as data
    for (int64_t i = 0; i < count; ++i) out[i] = input_bits(c, t, row, head, first + i);
    return;
  }
  if (c.dist == ValueDist::ties || c.dist == ValueDist::edges) {
    for (int64_t i = 0; i < count; ++i) out[i] = input_bits(c, t, row, head, first + i);
    return;
  }
  if (c.dist == ValueDist::constant) return fill(input_bits(c, t, row, head, first));  // one value per (row, tensor)

  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const DType dst = c.has_format() ? dt : c.cache_dtype;
  const FiniteRow finite(dt, dst);
  const bool special = c.dist == ValueDist::special;
  const uint64_t prefix = mix64(mix64(mix64(mix64(c.payload_seed ^ kSaltInput) ^ tensor) ^ static_cast<uint64_t>(row)) ^
                                static_cast<uint64_t>(head));
  const uint64_t index0 =
      ((static_cast<uint64_t>(row) * 2 + tensor) * static_cast<uint64_t>(c.num_heads) + static_cast<uint64_t>(head)) *
      static_cast<uint64_t>(c.max_head_dim());
  const uint64_t base = index0 + mix64(c.payload_seed ^ kSaltInput);
  const std::optional<UniqueFinite> unique = UniqueFinite::of(c);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t dim = static_cast<uint64_t>(first + i);
    const uint64_t h = mix64(mix64(prefix ^ dim) ^ 0);
    if (special && (h >> 56) % 6 == 0) {
      out[i] = special_bits(dt, static_cast<int>((h >> 16) % 10), h);
      continue;
    }
    out[i] = unique ? (*unique)(index0 + dim) : finite(mix64(h), base + dim);
  }
}

uint32_t context_bits(const Case& c, Tensor t, int64_t request, int64_t pos, int64_t head, int64_t dim) {
  const DType dt = c.cache_dtype;
  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const uint64_t h = coord_hash(c.payload_seed, kSaltContext, tensor, static_cast<uint64_t>(request),
                                static_cast<uint64_t>(pos), static_cast<uint64_t>(head), static_cast<uint64_t>(dim));
  // Linear index with the position outermost (its bound is not known in O(1)).
  const uint64_t requests = c.requests.empty() ? 1 : c.requests.size();
  const uint64_t index =
      (((static_cast<uint64_t>(pos) * requests + static_cast<uint64_t>(request)) * 2 + tensor) *
           static_cast<uint64_t>(c.num_heads) +
       static_cast<uint64_t>(head)) *
          static_cast<uint64_t>(c.max_head_dim()) +
      static_cast<uint64_t>(dim);
  if (is_byte_dtype(dt)) {
    const std::vector<uint8_t>& codes = context_codes(dt);
    return codes[(index + mix64(c.payload_seed ^ kSaltContext)) % codes.size()];
  }
  return finite_bits(dt, dt, h, index + mix64(c.payload_seed ^ kSaltContext));
}

namespace {

// A format field's context value of dtype t from its coordinate hash h (context_field_bits).
uint32_t format_context_bits(DType t, uint64_t h) {
  switch (t) {
    case DType::fp4_e2m1:
    case DType::uint4: return static_cast<uint32_t>(h % 12);  // 0x0..0xB: below the nibble canaries
    case DType::fp8_e8m0: return static_cast<uint32_t>(100 + h % 60);  // 2^-27 .. 2^32
    case DType::uint8: return static_cast<uint32_t>(h % 0xA0);
    case DType::f32:  // a scale or zero point: positive, finite, of a modest exponent
      return (static_cast<uint32_t>(127 + static_cast<int>(h % 21) - 10) << 23) | static_cast<uint32_t>((h >> 8) & 0x7FFFFFu);
    case DType::bf16:
    case DType::f16: return finite_bits(t, t, h, h >> 20);
    default: {
      const std::vector<uint8_t>& codes = context_codes(t);
      return codes[h % codes.size()];
    }
  }
}

}  // namespace

void context_field_row_bits(const Case& c, const CacheField& f, int64_t request, int64_t pos, int64_t head, uint32_t* out) {
  // context_field_bits() for every dim, with what does not depend on the dim computed once: the
  // coordinate hash's prefix (coord_hash mixes its coordinates in order, the dim last but one or
  // last), the index offset, and finite_bits()'s exponent range. Bit-identical by construction;
  // payload_test checks it against context_field_bits() on every format.
  const uint64_t r = static_cast<uint64_t>(request), p = static_cast<uint64_t>(pos), hd = static_cast<uint64_t>(head);
  if (!c.has_format()) {
    const DType dt = c.cache_dtype;
    const uint64_t tensor = f.index == 1 ? 1 : 0;
    const uint64_t prefix = mix64(mix64(mix64(mix64(mix64(c.payload_seed ^ kSaltContext) ^ tensor) ^ r) ^ p) ^ hd);
    const uint64_t requests = c.requests.empty() ? 1 : c.requests.size();
    const uint64_t base = (((p * requests + r) * 2 + tensor) * static_cast<uint64_t>(c.num_heads) + hd) *
                              static_cast<uint64_t>(c.max_head_dim()) + mix64(c.payload_seed ^ kSaltContext);
    if (is_byte_dtype(dt)) {
      const std::vector<uint8_t>& codes = context_codes(dt);
      const Remainder by_codes(codes.size());
      for (int64_t d = 0; d < f.head_dim; ++d) out[d] = codes[by_codes.of(base + static_cast<uint64_t>(d))];
      return;
    }
    const FiniteRow finite(dt, dt);
    for (int64_t d = 0; d < f.head_dim; ++d) out[d] = finite(mix64(prefix ^ static_cast<uint64_t>(d)), base + static_cast<uint64_t>(d));
    return;
  }
  const uint64_t field = static_cast<uint64_t>(f.role) * 2 + static_cast<uint64_t>(f.index);
  const uint64_t prefix = mix64(mix64(mix64(mix64(c.payload_seed ^ (kSaltContext ^ (field << 56))) ^ r) ^ p) ^ hd);
  for (int64_t d = 0; d < f.head_dim; ++d) out[d] = format_context_bits(f.dtype, mix64(mix64(prefix ^ static_cast<uint64_t>(d)) ^ 7));
}

uint32_t context_field_bits(const Case& c, const CacheField& f, int64_t request, int64_t pos, int64_t head, int64_t dim) {
  const Tensor t = f.index == 1 ? Tensor::value : Tensor::key;
  if (!c.has_format()) return context_bits(c, t, request, pos, head, dim);
  const uint64_t field = static_cast<uint64_t>(f.role) * 2 + static_cast<uint64_t>(f.index);
  const uint64_t h = coord_hash(c.payload_seed, kSaltContext ^ (field << 56), static_cast<uint64_t>(request),
                                static_cast<uint64_t>(pos), static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 7);
  return format_context_bits(f.dtype, h);
}

uint32_t canary_bits(DType t, Canary tag) {
  const uint32_t k = static_cast<uint32_t>(tag);
  if (t == DType::fp4_e2m1 || t == DType::uint4) {
    if (tag == Canary::guard) return 0xFu;
    return tag == Canary::cache_gap ? 0xDu : tag == Canary::free_block ? 0xEu : tag == Canary::block_tail ? 0xFu : 0xCu;
  }
  if (t == DType::fp8_e8m0) {
    if (tag == Canary::guard) return 0xFFu;
    return tag == Canary::cache_gap ? 0xFDu : tag == Canary::free_block ? 0xFFu : tag == Canary::block_tail ? 0xFEu : 0xFCu;
  }
  if (t == DType::uint8) t = DType::int8;
  if (tag == Canary::guard) return t == DType::f32 ? 0xFFFFFFFFu : is_byte_dtype(t) ? 0xFFu : 0xFFFFu;
  switch (t) {
    case DType::f16: return 0x7E00u | k;
    case DType::bf16: return 0x7FC0u | k;
    case DType::f32: return 0x7FC00000u | k;
    case DType::fp8_e4m3: return tag == Canary::free_block ? 0x7Fu : 0xA0u | k;  // see the file comment
    case DType::fp8_e5m2:
      switch (tag) {
        case Canary::block_tail: return 0x7Du;
        case Canary::free_block: return 0x7Eu;
        case Canary::cache_gap: return 0xFDu;
        case Canary::input_gap: return 0xFEu;
        default: return 0xA0u | k;
      }
    case DType::int8: return 0xA0u | k;
    default: break;
  }
  return 0;
}

uint32_t scale_bits(const Case& c, Tensor t, int64_t index) {
  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const auto i = static_cast<uint64_t>(index);
  const uint64_t hk = coord_hash(c.payload_seed, kSaltScale, 0, i, 0, 0, 0);
  const uint64_t h = coord_hash(c.payload_seed, kSaltScale, tensor, i, 0, 0, 0);
  // A mantissa distinct per (index, tensor) (a bijection over 23 bits).
  const uint32_t mant = permute_bits(i * 2 + tensor + mix64(c.payload_seed ^ kSaltScale), 23);
  int e = 0;
  switch (c.scale_dist) {
    case ScaleDist::unit: return 0x3F800000u;
    case ScaleDist::pow2: {
      // V's exponent differs from K's at the same index.
      const int ek = static_cast<int>(hk % 9);
      const int ev = (ek + 1 + static_cast<int>((h >> 8) % 8)) % 9;
      return static_cast<uint32_t>(127 + (t == Tensor::key ? ek : ev) - 4) << 23;
    }
    case ScaleDist::random: e = static_cast<int>(h % 13) - 6; break;
    case ScaleDist::extreme: e = (h & 1u) != 0 ? 16 + static_cast<int>((h >> 1) % 9) : -24 + static_cast<int>((h >> 1) % 9); break;
  }
  return (static_cast<uint32_t>(127 + e) << 23) | mant;
}

uint32_t context_scale_bits(const Case& c, Tensor t, int64_t request, int64_t pos, int64_t head) {
  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  const uint64_t requests = c.requests.empty() ? 1 : c.requests.size();
  const uint64_t index =
      ((static_cast<uint64_t>(pos) * requests + static_cast<uint64_t>(request)) * 2 + tensor) * static_cast<uint64_t>(c.num_heads) +
      static_cast<uint64_t>(head);
  const uint64_t h = coord_hash(c.payload_seed, kSaltContextScale, tensor, static_cast<uint64_t>(request),
                                static_cast<uint64_t>(pos), static_cast<uint64_t>(head), 0);
  const int e = static_cast<int>(h % 21) - 10;
  return (static_cast<uint32_t>(127 + e) << 23) | permute_bits(index + mix64(c.payload_seed ^ kSaltContextScale), 23);
}

std::optional<Canary> canary_of(uint32_t bits, DType t) {
  for (Canary tag : {Canary::cache_gap, Canary::free_block, Canary::block_tail, Canary::guard, Canary::input_gap,
                     Canary::padding_row, Canary::invalid_row, Canary::graph_row}) {
    if (canary_bits(t, tag) == bits) return tag;
  }
  return std::nullopt;
}

}  // namespace kvf::golden

namespace kvf::golden {

namespace {

// The token (request, cache position) of each written row of c, -1/-1 for the others: the slot's
// block's first owner in the block tables and its logical block's position.
std::vector<std::pair<int64_t, int64_t>> row_tokens(const Case& c) {
  const std::map<int64_t, BlockOwner> owner = block_owners(c);
  const int64_t bs = c.cache.block_size;
  std::vector<std::pair<int64_t, int64_t>> out(static_cast<size_t>(c.num_slots()), {-1, -1});
  for (int64_t row = 0; row < c.num_slots(); ++row) {
    const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
    if (c.is_padding(slot) || slot >= c.capacity()) continue;
    const auto it = owner.find(slot / bs);
    if (it != owner.end()) out[static_cast<size_t>(row)] = {static_cast<int64_t>(it->second.request), it->second.logical * bs + slot % bs};
  }
  return out;
}

}  // namespace

ExplicitInputs explicit_inputs_of_payload(const Case& c) {
  Case seeded = c;
  seeded.explicit_inputs.reset();
  ExplicitInputs x;
  const int64_t vd = c.has_value() ? c.value_dim() : 0;
  for (int64_t row = 0; row < c.num_slots(); ++row) {
    const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
    if (c.is_padding(slot) || slot >= c.capacity()) continue;
    x.rows.push_back(row);
    for (int64_t h = 0; h < c.num_heads; ++h) {
      for (int64_t d = 0; d < c.head_dim; ++d) x.key.push_back(input_bits(seeded, Tensor::key, row, h, d));
    }
    for (int64_t h = 0; h < c.num_heads; ++h) {
      for (int64_t d = 0; d < vd; ++d) x.value.push_back(input_bits(seeded, Tensor::value, row, h, d));
    }
  }
  return x;
}

std::optional<ExplicitInputs> explicit_inputs_carried(const Case& from, const Case& c) {
  if (!from.explicit_inputs || from.input_dtype != c.input_dtype) return std::nullopt;
  std::map<std::pair<int64_t, int64_t>, int64_t> given;  // token -> row of `from` with explicit values
  const auto from_tokens = row_tokens(from);
  for (int64_t row : from.explicit_inputs->rows)
    if (from_tokens[static_cast<size_t>(row)].first >= 0) given.emplace(from_tokens[static_cast<size_t>(row)], row);
  Case seeded = c;
  seeded.explicit_inputs.reset();
  ExplicitInputs x;
  const auto tokens = row_tokens(c);
  const int64_t vd = c.has_value() ? c.value_dim() : 0;
  for (int64_t row = 0; row < c.num_slots(); ++row) {
    const auto it = given.find(tokens[static_cast<size_t>(row)]);
    if (tokens[static_cast<size_t>(row)].first < 0 || it == given.end()) continue;
    x.rows.push_back(row);
    // The given value where both cases have the (head, dim), else c's seeded one.
    const auto value = [&](bool is_value, int64_t h, int64_t d) {
      const int64_t from_dims = is_value ? (from.has_value() ? from.value_dim() : 0) : from.head_dim;
      if (h < from.num_heads && d < from_dims)
        if (const auto b = explicit_bits(from, is_value, it->second, h, d)) return *b;
      return input_bits(seeded, is_value ? Tensor::value : Tensor::key, row, h, d);
    };
    for (int64_t h = 0; h < c.num_heads; ++h)
      for (int64_t d = 0; d < c.head_dim; ++d) x.key.push_back(value(false, h, d));
    for (int64_t h = 0; h < c.num_heads; ++h)
      for (int64_t d = 0; d < vd; ++d) x.value.push_back(value(true, h, d));
  }
  return x;
}

}  // namespace kvf::golden
