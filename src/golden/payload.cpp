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
//             up to 8M elements (16-bit payloads are as distinct as 10 or 7 mantissa bits allow).
// Real NaNs (dist special) avoid every canary pattern, the guard pattern and the canonical NaN:
//   f16  sign | 0x7D00..0x7DFF (signalling) or 0x7F00..0x7FFE (quiet, even low byte)
//   bf16 sign | 0x7F81..0x7FBF (signalling) or 0x7FE0..0x7FFE (quiet, even)
//   f32  sign | 0x7FA00000..0x7FBFFFFF (signalling) or 0x7FE00000..0x7FFFFFFE (quiet, even)
// Canaries are quiet NaNs with the tag in the low mantissa bits (0x7E00|tag, 0x7FC0|tag,
// 0x7FC00000|tag); the guard pattern is all ones.
#include "payload.h"

#include <algorithm>

#include "../gen/rng.h"
#include "convert.h"

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

Format format_of(DType t) {
  switch (t) {
    case DType::f16: return {5, 10, 15, -24, 15};
    case DType::bf16: return {8, 7, 127, -133, 127};
    case DType::f32: return {8, 23, 127, -149, 127};
  }
  return {8, 23, 127, -149, 127};
}

// Salts separating the streams (mixed into the seed so streams never share a hash input).
constexpr uint64_t kSaltInput = 0x1a2b3c4d5e6f7081ull;
constexpr uint64_t kSaltContext = 0xc0ffee0ddba11ull;
constexpr uint64_t kSaltConstant = 0x5eed0fc0275a47ull;

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

// A finite value of dtype `src` (never NaN or Inf), see the file comment. `h` supplies sign and
// exponent, `index` the mantissa bijection, `dst` the dtype the value is headed for.
uint32_t finite_bits(DType src, DType dst, uint64_t h, uint64_t index) {
  const Format f = format_of(src);
  const int max_field = (1 << f.exp_bits) - 2;  // largest finite exponent field
  int field;
  if ((h & 7u) != 0) {
    const ExpRange r = shared_exponents(src, dst);
    field = r.lo + static_cast<int>((h >> 3) % static_cast<uint64_t>(r.hi - r.lo + 1));
  } else {
    field = static_cast<int>((h >> 3) % static_cast<uint64_t>(max_field + 1));
  }
  const uint32_t sign = static_cast<uint32_t>((h >> 40) & 1u) << (f.exp_bits + f.mant_bits);
  const uint32_t mant = permute_bits(index, f.mant_bits);
  return sign | (static_cast<uint32_t>(field) << f.mant_bits) | mant;
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

}  // namespace

uint32_t input_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t dim) {
  const DType dt = c.input_dtype;
  // Rows nobody may read carry tagged NaNs.
  if (row >= c.num_slots()) return canary_bits(dt, Canary::graph_row);
  const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
  if (slot < 0) return canary_bits(dt, Canary::padding_row);
  if (slot >= c.capacity()) return canary_bits(dt, Canary::invalid_row);

  const uint64_t tensor = t == Tensor::key ? 0 : 1;
  if (c.dist == ValueDist::constant) {
    // One value per (row, tensor); occasionally a zero row.
    const uint64_t h = coord_hash(c.payload_seed, kSaltConstant, tensor, static_cast<uint64_t>(row), 0, 0, 0);
    if (h % 8 == 0) return special_bits(dt, (h >> 8) % 2 == 0 ? 3 : 4, h);
    return finite_bits(dt, c.cache_dtype, mix64(h), (h >> 32) + static_cast<uint64_t>(row));
  }

  const uint64_t h = coord_hash(c.payload_seed, kSaltInput, tensor, static_cast<uint64_t>(row),
                                static_cast<uint64_t>(head), static_cast<uint64_t>(dim), 0);
  if (c.dist == ValueDist::special && (h >> 56) % 6 == 0) {
    return special_bits(dt, static_cast<int>((h >> 16) % 10), h);
  }
  // Linear element index: distinct for every (row, tensor, head, dim) of the case.
  const uint64_t index =
      ((static_cast<uint64_t>(row) * 2 + tensor) * static_cast<uint64_t>(c.num_heads) + static_cast<uint64_t>(head)) *
          static_cast<uint64_t>(c.head_dim) +
      static_cast<uint64_t>(dim);
  return finite_bits(dt, c.cache_dtype, mix64(h), index + mix64(c.payload_seed ^ kSaltInput));
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
          static_cast<uint64_t>(c.head_dim) +
      static_cast<uint64_t>(dim);
  return finite_bits(dt, dt, h, index + mix64(c.payload_seed ^ kSaltContext));
}

uint32_t canary_bits(DType t, Canary tag) {
  const uint32_t k = static_cast<uint32_t>(tag);
  if (tag == Canary::guard) return t == DType::f32 ? 0xFFFFFFFFu : 0xFFFFu;
  switch (t) {
    case DType::f16: return 0x7E00u | k;
    case DType::bf16: return 0x7FC0u | k;
    case DType::f32: return 0x7FC00000u | k;
  }
  return 0;
}

std::optional<Canary> canary_of(uint32_t bits, DType t) {
  for (Canary tag : {Canary::cache_gap, Canary::free_block, Canary::block_tail, Canary::guard, Canary::input_gap,
                     Canary::padding_row, Canary::invalid_row, Canary::graph_row}) {
    if (canary_bits(t, tag) == bits) return tag;
  }
  return std::nullopt;
}

}  // namespace kvf::golden
