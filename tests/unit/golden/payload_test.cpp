// payload_test.cpp — canaries, input payloads and context payloads of values/payload.h.
//
//   ctest --test-dir build -R 'Payload\.' --output-on-failure
//
// Cases are built by hand (no generator): a batch whose rows cycle through written, padding and
// invalid slots, plus CUDA-graph rows past T.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "golden/block_quant.h"
#include "values/convert.h"
#include "values/payload.h"

namespace kvf::golden {
namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};
constexpr Canary kTags[] = {Canary::cache_gap,   Canary::free_block,  Canary::block_tail, Canary::guard,
                            Canary::input_gap,   Canary::padding_row, Canary::invalid_row, Canary::graph_row};

uint32_t all_ones(DType t) { return t == DType::f32 ? 0xFFFFFFFFu : 0xFFFFu; }

// Row r of the batch: slot r (written) unless r % 7 == 3 (padding, -1) or r % 11 == 5 (invalid).
enum class RowKind { written, padding, invalid, graph };
RowKind kind_of(const Case& c, int64_t row) {
  if (row >= c.num_slots()) return RowKind::graph;
  const int64_t s = c.slot_mapping[static_cast<size_t>(row)];
  return s < 0 ? RowKind::padding : s >= c.capacity() ? RowKind::invalid : RowKind::written;
}

Case make_case(DType in, DType cache, ValueDist dist, uint64_t seed = 42, int64_t rows = 2000) {
  Case c;
  c.num_heads = 3;
  c.head_dim = 37;
  c.input_dtype = in;
  c.cache_dtype = cache;
  c.cache.num_blocks = 1000;
  c.cache.block_size = 8;  // capacity 8000
  c.num_input_rows = rows + 5;
  for (int64_t r = 0; r < rows; ++r) {
    c.slot_mapping.push_back(r % 7 == 3 ? -1 : r % 11 == 5 ? c.capacity() + r : r);
  }
  c.requests.resize(4);
  c.dist = dist;
  c.payload_seed = seed;
  return c;
}

// Calls fn(tensor, row, head, dim, bits) for every element of every input row (including rows >= T).
template <typename Fn>
void for_each_input(const Case& c, Fn fn) {
  for (int64_t row = 0; row < c.num_input_rows; ++row) {
    for (Tensor t : {Tensor::key, Tensor::value}) {
      for (int64_t h = 0; h < c.num_heads; ++h) {
        for (int64_t d = 0; d < c.head_dim; ++d) fn(t, row, h, d, input_bits(c, t, row, h, d));
      }
    }
  }
}

TEST(Payload, canariesAreDistinctNansOfEveryDtype) {
  for (DType t : kDTypes) {
    std::set<uint32_t> seen;
    for (Canary tag : kTags) {
      const uint32_t bits = canary_bits(t, tag);
      EXPECT_TRUE(is_nan_bits(bits, t));
      EXPECT_NE(bits, canonical_nan_bits(t)) << "a converted NaN must not look like a canary";
      EXPECT_TRUE(seen.insert(bits).second) << "duplicate canary";
      ASSERT_TRUE(canary_of(bits, t).has_value());
      EXPECT_EQ(*canary_of(bits, t), tag);
    }
    EXPECT_EQ(canary_bits(t, Canary::guard), all_ones(t));
    EXPECT_FALSE(canary_of(canonical_nan_bits(t), t).has_value());
    EXPECT_FALSE(canary_of(0, t).has_value());
  }
  EXPECT_EQ(canary_bits(DType::f16, Canary::padding_row), 0x7E06u);
  EXPECT_EQ(canary_bits(DType::bf16, Canary::invalid_row), 0x7FC7u);
  EXPECT_EQ(canary_bits(DType::f32, Canary::graph_row), 0x7FC00008u);
  EXPECT_FALSE(canary_of(0x7E04u, DType::f16).has_value());  // the guard tag's NaN slot is unused
  EXPECT_FALSE(canary_of(0x7E09u, DType::f16).has_value());
}

TEST(Payload, rowsThatMustNotBeReadCarryTheirTag) {
  for (DType in : kDTypes) {
    const Case c = make_case(in, DType::f16, ValueDist::special, 7, 200);
    int counts[4] = {};
    for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
      const RowKind k = kind_of(c, row);
      ++counts[static_cast<int>(k)];
      switch (k) {
        case RowKind::padding: ASSERT_EQ(bits, canary_bits(in, Canary::padding_row)); break;
        case RowKind::invalid: ASSERT_EQ(bits, canary_bits(in, Canary::invalid_row)); break;
        case RowKind::graph: ASSERT_EQ(bits, canary_bits(in, Canary::graph_row)); break;
        case RowKind::written: ASSERT_FALSE(canary_of(bits, in).has_value()); break;
      }
    });
    for (int n : counts) EXPECT_GT(n, 0) << "fixture must exercise every row kind";
  }
}

TEST(Payload, writtenRowsNeverHoldCanaryGuardOrCanonicalNan) {
  for (DType in : kDTypes) {
    for (DType cache : kDTypes) {
      for (ValueDist dist : {ValueDist::finite, ValueDist::special, ValueDist::constant}) {
        const Case c = make_case(in, cache, dist);
        for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
          if (kind_of(c, row) != RowKind::written) return;
          if (in != DType::f32) {
            ASSERT_EQ(bits >> 16, 0u) << "16-bit payload uses the low half only";
          }
          ASSERT_FALSE(canary_of(bits, in).has_value()) << std::hex << bits;
          ASSERT_NE(bits, all_ones(in));
          ASSERT_NE(bits, canonical_nan_bits(in)) << "real NaNs must differ from converted ones";
          if (in == DType::f16) {
            ASSERT_FALSE(bits >= 0x7E00u && bits <= 0x7E1Fu) << std::hex << bits;
          }
          if (in == DType::bf16) {
            ASSERT_FALSE(bits >= 0x7FC0u && bits <= 0x7FDFu) << std::hex << bits;
          }
          if (in == DType::f32) {
            ASSERT_FALSE(bits >= 0x7FC00000u && bits <= 0x7FC0001Fu) << std::hex << bits;
          }
        });
      }
    }
  }
}

TEST(Payload, isDeterministicAndDependsOnTheSeed) {
  const Case a = make_case(DType::f32, DType::f16, ValueDist::special, 1, 300);
  const Case b = make_case(DType::f32, DType::f16, ValueDist::special, 2, 300);
  int64_t same_seed_diff = 0, other_seed_same = 0, written = 0;
  for_each_input(a, [&](Tensor t, int64_t row, int64_t h, int64_t d, uint32_t bits) {
    if (kind_of(a, row) != RowKind::written) return;
    ++written;
    same_seed_diff += bits != input_bits(a, t, row, h, d);
    other_seed_same += bits == input_bits(b, t, row, h, d);
  });
  EXPECT_EQ(same_seed_diff, 0);
  EXPECT_LT(other_seed_same, written / 20);  // only coinciding specials (+-Inf, +-0, ...)
  EXPECT_EQ(context_bits(a, Tensor::value, 2, 5, 1, 3), context_bits(a, Tensor::value, 2, 5, 1, 3));
  EXPECT_NE(context_bits(a, Tensor::value, 2, 5, 1, 3), context_bits(b, Tensor::value, 2, 5, 1, 3));
}

TEST(Payload, finiteValuesAreNeverNanOrInfAndCoverSignsAndExponents) {
  for (DType in : kDTypes) {
    for (DType cache : kDTypes) {
      const Case c = make_case(in, cache, ValueDist::finite);
      const int mant_bits = in == DType::f16 ? 10 : in == DType::bf16 ? 7 : 23;
      const uint32_t exp_mask = in == DType::f16 ? 0x1Fu : 0xFFu;
      std::set<uint32_t> exponents;
      int64_t negative = 0, subnormal = 0, written = 0, finite_in_cache = 0;
      for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
        if (kind_of(c, row) != RowKind::written) return;
        ++written;
        const uint32_t exp = (bits >> mant_bits) & exp_mask;
        ASSERT_NE(exp, exp_mask) << std::hex << bits << " is Inf or NaN";
        exponents.insert(exp);
        negative += (bits >> (mant_bits + (in == DType::f16 ? 5 : 8))) & 1u;
        subnormal += exp == 0;
        // Most values survive the conversion into the cache as finite non-zero numbers.
        const uint32_t stored = convert_bits(bits, in, cache);
        const uint32_t mag = stored & (cache == DType::f32 ? 0x7FFFFFFFu : 0x7FFFu);
        const uint32_t inf = cache == DType::f32 ? 0x7F800000u : cache == DType::f16 ? 0x7C00u : 0x7F80u;
        finite_in_cache += mag != 0 && mag < inf;
      });
      EXPECT_GT(negative, written / 3);
      EXPECT_LT(negative, written * 2 / 3);
      EXPECT_GT(subnormal, 0) << "subnormals of the input dtype appear";
      // f16 has 31 finite exponents; bf16/f32 have 255 (the full range is drawn 1/8 of the time).
      EXPECT_GE(exponents.size(), in == DType::f16 ? 31u : 250u);
      EXPECT_GT(finite_in_cache, written * 8 / 10);
    }
  }
}

TEST(Payload, f32FiniteValuesAreUniqueWithinACase) {
  const Case c = make_case(DType::f32, DType::f32, ValueDist::finite, 99, 4000);
  std::unordered_set<uint32_t> seen;
  int64_t written = 0;
  for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
    if (kind_of(c, row) != RowKind::written) return;
    ++written;
    seen.insert(bits);
  });
  EXPECT_EQ(static_cast<int64_t>(seen.size()), written);
}

TEST(Payload, sixteenBitValuesOfOneRowAreDistinct) {
  // H * D = 111 <= 2^7: the mantissa bijection keeps every element of a row distinct.
  for (DType in : {DType::f16, DType::bf16}) {
    const Case c = make_case(in, in, ValueDist::finite, 5, 300);
    for (int64_t row = 0; row < c.num_slots(); ++row) {
      if (kind_of(c, row) != RowKind::written) continue;
      for (Tensor t : {Tensor::key, Tensor::value}) {
        std::set<uint32_t> seen;
        for (int64_t h = 0; h < c.num_heads; ++h) {
          for (int64_t d = 0; d < c.head_dim; ++d) seen.insert(input_bits(c, t, row, h, d));
        }
        ASSERT_EQ(seen.size(), static_cast<size_t>(c.num_heads * c.head_dim)) << "row " << row;
      }
    }
  }
}

TEST(Payload, sixteenBitCopiesAreUniqueWithinACaseUpToTheFinitePatterns) {
  // A copy (input dtype == cache dtype) of f16 or bf16: the finite values of a case holding at most
  // M elements (f16 63488, bf16 65280) are unique, so the diff's decoder names every writer; above
  // M each pattern serves at most ceil(count / M) elements. 280 rows * 2 * 3 * 37 = 62160 <= M.
  for (DType in : {DType::f16, DType::bf16}) {
    const uint32_t m = in == DType::f16 ? 63488u : 65280u;
    for (int64_t rows : {int64_t{280}, int64_t{2000}}) {
      const Case c = make_case(in, in, ValueDist::finite, 17, rows);
      std::unordered_map<uint32_t, int64_t> uses;
      int64_t written = 0;
      for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
        if (kind_of(c, row) != RowKind::written) return;
        ++written;
        ++uses[bits];
      });
      // Indices run over every row below T (padding and invalid rows included), so bound by those.
      const int64_t count = c.num_slots() * 2 * c.num_heads * c.head_dim;
      const int64_t most = (count + m - 1) / m;
      for (const auto& [bits, n] : uses) ASSERT_LE(n, most) << std::hex << bits << " rows " << std::dec << rows;
      if (count <= m) EXPECT_EQ(static_cast<int64_t>(uses.size()), written);
    }
  }
}

TEST(Payload, specialDistributionProducesEverySpecialClass) {
  for (DType in : kDTypes) {
    const Case c = make_case(in, DType::f32, ValueDist::special);
    const bool wide = in == DType::f32;
    const uint32_t sign = wide ? 0x80000000u : 0x8000u;
    const uint32_t inf = wide ? 0x7F800000u : in == DType::f16 ? 0x7C00u : 0x7F80u;
    const uint32_t min_normal = wide ? 0x00800000u : in == DType::f16 ? 0x0400u : 0x0080u;
    const uint32_t special_values[] = {inf, sign | inf, 0u, sign, 1u, min_normal - 1, min_normal, inf - 1, sign | (inf - 1)};
    std::vector<int64_t> counts(std::size(special_values), 0);
    int64_t nans = 0, written = 0;
    for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
      if (kind_of(c, row) != RowKind::written) return;
      ++written;
      nans += is_nan_bits(bits, in);
      for (size_t i = 0; i < std::size(special_values); ++i) counts[i] += bits == special_values[i];
    });
    EXPECT_GT(nans, written / 100);
    for (size_t i = 0; i < counts.size(); ++i) EXPECT_GT(counts[i], written / 200) << "class " << i;
    // About one element in six is special (each class ~1/60).
    EXPECT_GT(nans, written / 120);
    EXPECT_LT(nans, written / 30);
  }
}

TEST(Payload, constantRowsRepeatOneValuePerRowAndTensor) {
  for (DType in : kDTypes) {
    const Case c = make_case(in, in, ValueDist::constant, 11, 200);
    int64_t key_value_equal = 0, written_rows = 0;
    for (int64_t row = 0; row < c.num_slots(); ++row) {
      if (kind_of(c, row) != RowKind::written) continue;
      ++written_rows;
      const uint32_t k = input_bits(c, Tensor::key, row, 0, 0);
      const uint32_t v = input_bits(c, Tensor::value, row, 0, 0);
      key_value_equal += k == v;
      for (int64_t h = 0; h < c.num_heads; ++h) {
        for (int64_t d = 0; d < c.head_dim; ++d) {
          ASSERT_EQ(input_bits(c, Tensor::key, row, h, d), k);
          ASSERT_EQ(input_bits(c, Tensor::value, row, h, d), v);
        }
      }
      ASSERT_FALSE(is_nan_bits(k, in));
    }
    EXPECT_LT(key_value_equal, written_rows / 10);
  }
}

TEST(Payload, contextValuesAreFiniteDistinctAndUnlikeInputs) {
  for (DType cache : kDTypes) {
    const Case c = make_case(DType::f32, cache, ValueDist::finite);
    std::unordered_set<uint32_t> seen;
    int64_t n = 0, equal_to_input = 0;
    for (int64_t req = 0; req < 4; ++req) {
      for (int64_t pos = 0; pos < 50; ++pos) {
        for (Tensor t : {Tensor::key, Tensor::value}) {
          for (int64_t h = 0; h < c.num_heads; ++h) {
            for (int64_t d = 0; d < c.head_dim; ++d) {
              const uint32_t bits = context_bits(c, t, req, pos, h, d);
              ASSERT_FALSE(is_nan_bits(bits, cache)) << std::hex << bits;
              const uint32_t mag = bits & (cache == DType::f32 ? 0x7FFFFFFFu : 0x7FFFu);
              ASSERT_NE(mag, cache == DType::f32 ? 0x7F800000u : cache == DType::f16 ? 0x7C00u : 0x7F80u);
              if (cache != DType::f32) {
                ASSERT_EQ(bits >> 16, 0u);
              }
              seen.insert(bits);
              ++n;
              equal_to_input += cache == DType::f32 && bits == input_bits(c, t, pos, h, d);
            }
          }
        }
      }
    }
    if (cache == DType::f32) {
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "f32 context values are unique";
    }
    EXPECT_EQ(equal_to_input, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Scales, 1-byte canaries and ties

float as_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(Payload, staticScalesArePositiveFiniteAndFollowTheirDistribution) {
  Case c = make_case(DType::f16, DType::fp8_e4m3, ValueDist::finite);
  for (ScaleDist dist : {ScaleDist::unit, ScaleDist::pow2, ScaleDist::random, ScaleDist::extreme}) {
    c.scale_dist = dist;
    std::set<uint32_t> seen;
    for (int64_t i = 0; i < 500; ++i) {
      const uint32_t k = scale_bits(c, Tensor::key, i), v = scale_bits(c, Tensor::value, i);
      for (uint32_t b : {k, v}) {
        const float f = as_f32(b);
        ASSERT_TRUE(std::isfinite(f) && f > 0.0f) << std::hex << b;
        const int e = std::ilogb(f);
        switch (dist) {
          case ScaleDist::unit: ASSERT_EQ(f, 1.0f); break;
          case ScaleDist::pow2: ASSERT_TRUE(e >= -4 && e <= 4 && f == std::ldexp(1.0f, e)) << f; break;
          case ScaleDist::random: ASSERT_TRUE(e >= -6 && e <= 6) << f; break;
          case ScaleDist::extreme: ASSERT_TRUE((e >= -24 && e <= -16) || (e >= 16 && e <= 24)) << f; break;
        }
      }
      if (dist != ScaleDist::unit) {
        EXPECT_NE(k, v) << "index " << i;
      }
      seen.insert(k);
      seen.insert(v);
    }
    // random and extreme: every K and V scale of the case is distinct.
    if (dist == ScaleDist::random || dist == ScaleDist::extreme) {
      EXPECT_EQ(seen.size(), 1000u);
    }
  }
}

TEST(Payload, contextScalesArePositiveFiniteAndDistinct) {
  Case c = make_case(DType::f16, DType::int8, ValueDist::finite);
  std::set<uint32_t> seen;
  int64_t n = 0;
  for (Tensor t : {Tensor::key, Tensor::value})
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t pos = 0; pos < 100; ++pos)
        for (int64_t h = 0; h < c.num_heads; ++h) {
          const float f = as_f32(context_scale_bits(c, t, r, pos, h));
          ASSERT_TRUE(std::isfinite(f) && f > 0.0f);
          seen.insert(context_scale_bits(c, t, r, pos, h));
          ++n;
        }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
}

// 1-byte formats: 8 distinct patterns, the guard 0xFF, NaN codes where the format has spare ones
// (e5m2: the four region canaries; e4m3: the free block), and canary_of inverts them.
TEST(Payload, oneByteCanariesAreDistinctAndKeepTheGuard) {
  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    std::set<uint32_t> seen;
    for (Canary tag : kTags) {
      const uint32_t b = canary_bits(t, tag);
      EXPECT_LE(b, 0xFFu);
      seen.insert(b);
      EXPECT_EQ(canary_of(b, t), tag);
    }
    EXPECT_EQ(seen.size(), 8u) << to_string(t);
    EXPECT_EQ(canary_bits(t, Canary::guard), 0xFFu);
  }
  for (Canary tag : {Canary::cache_gap, Canary::free_block, Canary::block_tail, Canary::input_gap}) {
    const uint32_t b = canary_bits(DType::fp8_e5m2, tag);
    EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(static_cast<uint8_t>(b)))) << b;
    EXPECT_NE(b, 0x7Fu);  // what a NaN quantises to
  }
  EXPECT_EQ(canary_bits(DType::fp8_e4m3, Canary::free_block), 0x7Fu);
  EXPECT_FALSE(std::isnan(fp8_e4m3_to_f32(static_cast<uint8_t>(canary_bits(DType::fp8_e4m3, Canary::block_tail)))));
}

TEST(Payload, oneByteContextValuesAvoidCanariesAndNans) {
  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    const Case c = make_case(DType::f16, t, ValueDist::finite);
    std::set<uint32_t> seen;
    for (int64_t pos = 0; pos < 20; ++pos)
      for (int64_t d = 0; d < c.head_dim; ++d) {
        const uint32_t b = context_bits(c, Tensor::key, 1, pos, 2, d);
        ASSERT_LE(b, 0xFFu);
        ASSERT_FALSE(canary_of(b, t).has_value()) << b;
        ASSERT_FALSE(std::isnan(bits_to_f32(b, t))) << b;
        seen.insert(b);
      }
    EXPECT_GT(seen.size(), 200u) << to_string(t);
  }
}

// The sorted finite values of a quantised format.
std::vector<float> grid(DType q) {
  std::vector<float> g;
  for (uint32_t b = 0; b < 256; ++b) {
    const float f = bits_to_f32(b, q);
    if (!std::isnan(f)) g.push_back(f);
  }
  std::sort(g.begin(), g.end());
  return g;
}

enum class TieClass { midpoint, exact, beyond, other };
// Where v = x / scale falls on q's grid: exactly halfway between two adjacent values (checked with
// the neighbours), on a value, beyond +-QMAX, or elsewhere.
TieClass classify(float v, DType q, const std::vector<float>& g) {
  if (std::fabs(v) > quant_max(q)) return TieClass::beyond;
  const auto hi = std::lower_bound(g.begin(), g.end(), v);
  if (hi != g.end() && *hi == v) return TieClass::exact;
  if (hi == g.begin() || hi == g.end()) return TieClass::other;
  const float lo = *(hi - 1);
  return static_cast<double>(v) * 2 == static_cast<double>(lo) + static_cast<double>(*hi) ? TieClass::midpoint : TieClass::other;
}

// With unit and pow2 static scales, every ties element lands exactly on a midpoint, a stored
// value, or beyond saturation, and the conversion of a midpoint is a real tie (quantize picks one
// of the two neighbours, the even one). f16 inputs are left out for e5m2, whose midpoints times a
// scale of up to 16 exceed f16's range.
TEST(Payload, tiesAreExactQuantisationMidpointsWithPow2Scales) {
  for (DType q : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    const std::vector<float> g = grid(q);
    for (DType in : {DType::f32, DType::bf16, DType::f16}) {
      if (in == DType::f16 && q == DType::fp8_e5m2) continue;
      for (ScaleKind kind : {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block}) {
        for (ScaleDist sd : {ScaleDist::unit, ScaleDist::pow2}) {
          Case c = make_case(in, q, ValueDist::ties, 7, 300);
          c.scale_kind = kind;
          c.scale_dist = sd;
          int64_t counts[4] = {0, 0, 0, 0};
          for_each_input(c, [&](Tensor t, int64_t row, int64_t h, int64_t d, uint32_t bits) {
            if (kind_of(c, row) != RowKind::written) return;
            const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
            const int64_t index = kind == ScaleKind::per_tensor ? 0 : kind == ScaleKind::per_head ? h : slot / c.cache.block_size * c.num_heads + h;
            const float scale = as_f32(scale_bits(c, t, index));
            const float v = bits_to_f32(bits, in) / scale;
            const TieClass k = classify(v, q, g);
            ++counts[static_cast<int>(k)];
            if (k == TieClass::midpoint) {
              const float r = bits_to_f32(quantize_bits(bits_to_f32(bits, in), scale, q), q);
              const auto hi = std::lower_bound(g.begin(), g.end(), v);
              ASSERT_TRUE(r == *hi || r == *(hi - 1)) << v << " -> " << r;
            }
          });
          SCOPED_TRACE(std::string(to_string(q)) + " " + std::string(to_string(in)));
          EXPECT_EQ(counts[static_cast<int>(TieClass::other)], 0);
          EXPECT_GT(counts[static_cast<int>(TieClass::midpoint)], counts[1] + counts[2]);
          EXPECT_GT(counts[static_cast<int>(TieClass::beyond)], 0);
          EXPECT_GT(counts[static_cast<int>(TieClass::exact)], 0);
        }
      }
    }
  }
}

// per_token_head rows: the contract's scale max(amax, 1e-6f) / QMAX is an exact power of two, the
// amax element sits on +-QMAX, and every element divided by it is a midpoint or a stored value.
TEST(Payload, tiesRowsMakeTheDynamicScaleAPowerOfTwo) {
  for (DType q : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    const std::vector<float> g = grid(q);
    for (DType in : {DType::f32, DType::bf16, DType::f16}) {
      Case c = make_case(in, q, ValueDist::ties, 9, 200);
      c.scale_kind = ScaleKind::per_token_head;
      int64_t midpoints = 0, total = 0;
      for (int64_t row = 0; row < c.num_slots(); ++row) {
        if (kind_of(c, row) != RowKind::written) continue;
        for (Tensor t : {Tensor::key, Tensor::value})
          for (int64_t h = 0; h < c.num_heads; ++h) {
            float amax = 0.0f;
            for (int64_t d = 0; d < c.head_dim; ++d) amax = std::fmax(amax, std::fabs(bits_to_f32(input_bits(c, t, row, h, d), in)));
            const float scale = std::fmax(amax, 1e-6f) / quant_max(q);
            ASSERT_EQ(scale, std::ldexp(1.0f, std::ilogb(scale))) << "row " << row << " scale " << scale;
            for (int64_t d = 0; d < c.head_dim; ++d) {
              const TieClass k = classify(bits_to_f32(input_bits(c, t, row, h, d), in) / scale, q, g);
              ASSERT_TRUE(k == TieClass::midpoint || k == TieClass::exact) << to_string(q) << " " << to_string(in) << " row " << row;
              midpoints += k == TieClass::midpoint;
              ++total;
            }
          }
      }
      EXPECT_GT(midpoints, total / 2) << to_string(q) << " " << to_string(in);
    }
  }
}

// f32 rows into f16 / bf16 caches: most elements lie exactly halfway between two adjacent cache
// values (the overflow tie max + ulp/2 included), the rest on cache values.
TEST(Payload, floatTiesAreExactMidpointsOfTheCacheFormat) {
  for (DType cache : {DType::f16, DType::bf16}) {
    const Case c = make_case(DType::f32, cache, ValueDist::ties, 3, 300);
    int64_t ties = 0, exact = 0, total = 0;
    for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
      if (kind_of(c, row) != RowKind::written) return;
      ++total;
      const float x = as_f32(bits);
      const uint32_t r = convert_bits(bits, DType::f32, cache);
      const float rv = cache == DType::f16 ? f16_to_f32(static_cast<uint16_t>(r)) : bf16_to_f32(static_cast<uint16_t>(r));
      if (rv == x) {
        ++exact;
        return;
      }
      // The other neighbour: one code towards x in magnitude (from Inf, the largest finite value).
      const uint32_t mag = r & 0x7FFFu;
      const bool up = std::fabs(x) > std::fabs(rv);
      const uint32_t other = (r & 0x8000u) | (up ? mag + 1 : mag - 1);
      auto value = [&](uint32_t b) { return cache == DType::f16 ? f16_to_f32(static_cast<uint16_t>(b)) : bf16_to_f32(static_cast<uint16_t>(b)); };
      const double ov = value(other);
      // Past max finite the next value would be max + ulp (the ulp below max).
      const double mid = std::isinf(rv) ? ov + (ov - value(other - 1)) / 2 : (static_cast<double>(rv) + ov) / 2;
      ASSERT_EQ(static_cast<double>(x), mid) << std::hex << bits;
      ++ties;
    });
    EXPECT_GT(ties, total * 3 / 4) << to_string(cache);
    EXPECT_GT(exact, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Near edges (dist edges)

// bits of float dtype `in` one encoding step from `tie` (same sign), or equal: -1 towards zero, +1
// away, 0 equal, 2 neither.
int step_from(uint32_t bits, uint32_t tie, DType in) {
  const uint32_t sign = in == DType::f32 ? 0x80000000u : 0x8000u;
  if ((bits & sign) != (tie & sign)) return 2;
  const int64_t d = static_cast<int64_t>(bits & (sign - 1)) - static_cast<int64_t>(tie & (sign - 1));
  return d >= -1 && d <= 1 ? static_cast<int>(d) : 2;
}

// Every edges element of a quantised cache is its ties value or that value's neighbour in the
// input dtype, and all three occur; for an f32 input under unit and pow2 scales the quotient x /
// scale is then a midpoint, a stored value or a value past saturation, or one fp32 ulp beside one.
TEST(Payload, edgesAreTheTiesAndTheirNeighboursInTheInputDtype) {
  for (DType q : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    const std::vector<float> g = grid(q);
    for (DType in : {DType::f32, DType::bf16, DType::f16}) {
      for (ScaleKind kind : {ScaleKind::per_tensor, ScaleKind::per_block, ScaleKind::per_token_head}) {
        Case c = make_case(in, q, ValueDist::edges, 11, 300);
        c.scale_kind = kind;
        c.scale_dist = ScaleDist::pow2;
        Case ties = c;
        ties.dist = ValueDist::ties;
        int64_t steps[3] = {0, 0, 0}, beside = 0;
        for_each_input(c, [&](Tensor t, int64_t row, int64_t h, int64_t d, uint32_t bits) {
          if (kind_of(c, row) != RowKind::written) return;
          const int step = step_from(bits, input_bits(ties, t, row, h, d), in);
          ASSERT_NE(step, 2) << to_string(q) << " " << to_string(in) << " row " << row << " dim " << d;
          ++steps[step + 1];
          if (in != DType::f32 || kind == ScaleKind::per_token_head) {
            return;
          }
          const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
          const int64_t index = kind == ScaleKind::per_tensor ? 0 : slot / c.cache.block_size * c.num_heads + h;
          const float v = as_f32(bits) / as_f32(scale_bits(c, t, index));
          if (classify(v, q, g) != TieClass::other) return;
          // Not on an edge: then one fp32 ulp from one.
          const TieClass below = classify(std::nextafter(v, -INFINITY), q, g);
          const TieClass above = classify(std::nextafter(v, INFINITY), q, g);
          ASSERT_TRUE(below != TieClass::other || above != TieClass::other) << v;
          ++beside;
        });
        SCOPED_TRACE(std::string(to_string(q)) + " " + std::string(to_string(in)));
        EXPECT_GT(steps[0], 0);
        EXPECT_GT(steps[1], 0);
        EXPECT_GT(steps[2], 0);
        if (in == DType::f32 && kind != ScaleKind::per_token_head) {
          EXPECT_GT(beside, 0);
        }
      }
    }
  }
}

// NVFP4 cases of f32 inputs: the block scale amax / (6 g) (flashinfer) and amax * RN(1 / (6 g))
// (flashinfer_precise) round to different e4m3 codes for some groups of an edges case, and for
// none of a ties case (its scales are powers of two times g, far from every e4m3 midpoint). A
// random g is one per tensor and case, and the rules need not differ for every g: 8 cases.
TEST(Payload, edgesSeparateTheTwoNvfp4ScaleRules) {
  for (ScaleDist sd : {ScaleDist::unit, ScaleDist::pow2, ScaleDist::random}) {
    for (ValueDist dist : {ValueDist::edges, ValueDist::ties}) {
      int64_t differ = 0, groups = 0;
      for (uint64_t seed = 13; seed < 21; ++seed) {
        Case c = make_case(DType::f32, DType::fp4_e2m1, dist, seed, 300);
        c.quant_format = QuantFormat::nvfp4;
        c.head_dim = 64;
        c.scale_kind = ScaleKind::per_tensor;
        c.scale_dist = sd;
        for (int64_t row = 0; row < c.num_slots(); ++row) {
          if (kind_of(c, row) != RowKind::written) continue;
          for (Tensor t : {Tensor::key, Tensor::value}) {
            const float global = as_f32(scale_bits(c, t, 0));
            for (int64_t h = 0; h < c.num_heads; ++h)
              for (int64_t first = 0; first < c.head_dim; first += kNvfp4Group) {
                std::array<float, kNvfp4Group> x{};
                for (int i = 0; i < kNvfp4Group; ++i) x[static_cast<size_t>(i)] = as_f32(input_bits(c, t, row, h, first + i));
                const auto a = quantize_nvfp4(x, global, Nvfp4Rule::flashinfer);
                const auto b = quantize_nvfp4(x, global, Nvfp4Rule::flashinfer_precise);
                differ += a.scale != b.scale;
                ++groups;
              }
          }
        }
      }
      SCOPED_TRACE(std::string(to_string(dist)) + " scales " + std::string(to_string(sd)));
      if (dist == ValueDist::edges) {
        EXPECT_GT(differ, 0) << "of " << groups << " groups";
      }
      if (dist == ValueDist::ties && sd != ScaleDist::random) {
        EXPECT_EQ(differ, 0);
      }
    }
  }
}

// MX under ocp_floor (E = floor(log2 amax) - emax): some groups of an edges case have their amax
// on a power of two and some one input step below one, the two sides of the shared exponent's edge.
TEST(Payload, edgesPutMxGroupMaximaOnBothSidesOfAPowerOfTwo) {
  for (DType in : {DType::f32, DType::bf16}) {
    Case c = make_case(in, DType::fp8_e4m3, ValueDist::edges, 17, 300);
    c.quant_format = QuantFormat::mxfp8_e4m3;
    c.head_dim = 64;
    c.quant_rules.mx = MxScaleRule::ocp_floor;
    int64_t on = 0, below = 0;
    for (int64_t row = 0; row < c.num_slots(); ++row) {
      if (kind_of(c, row) != RowKind::written) continue;
      for (int64_t h = 0; h < c.num_heads; ++h)
        for (int64_t first = 0; first < c.head_dim; first += kMxGroup) {
          float amax = 0.0f;
          for (int i = 0; i < kMxGroup; ++i) amax = std::fmax(amax, std::fabs(bits_to_f32(input_bits(c, Tensor::key, row, h, first + i), in)));
          const float pow2 = std::ldexp(1.0f, std::ilogb(amax) + 1);  // the power of two above
          on += amax == std::ldexp(1.0f, std::ilogb(amax));
          const uint32_t next = convert_bits(std::bit_cast<uint32_t>(amax), DType::f32, in) + 1;  // one step up
          below += bits_to_f32(next, in) == pow2;
        }
    }
    EXPECT_GT(on, 0) << to_string(in);
    EXPECT_GT(below, 0) << to_string(in);
  }
}

// The case reader's canary check (case/explicit_inputs.cpp) has its own copy of the input canary
// patterns: it must refuse every pattern canary_bits() makes for an input dtype, and the seeded
// finite values pass it.
TEST(Payload, explicitInputsRefuseEveryInputCanaryPattern) {
  for (DType t : kDTypes) {
    for (Canary tag : kTags) EXPECT_TRUE(is_input_canary_pattern(canary_bits(t, tag), t)) << to_string(t) << " tag " << static_cast<int>(tag);
    const Case c = make_case(t, t, ValueDist::special, 5, 200);
    for_each_input(c, [&](Tensor, int64_t row, int64_t, int64_t, uint32_t bits) {
      if (kind_of(c, row) == RowKind::written) ASSERT_FALSE(is_input_canary_pattern(bits, t)) << std::hex << bits;
    });
  }
}

// generate --explicit: the same batch with its values as data reads the same bits.
TEST(Payload, explicitInputsOfThePayloadGiveTheSameBits) {
  Case c = make_case(DType::bf16, DType::bf16, ValueDist::finite, 8, 100);
  Case x = c;
  x.explicit_inputs = explicit_inputs_of_payload(c);
  EXPECT_FALSE(x.explicit_inputs->rows.empty());
  for_each_input(c, [&](Tensor t, int64_t row, int64_t h, int64_t d, uint32_t bits) { ASSERT_EQ(input_bits(x, t, row, h, d), bits); });
  x.explicit_inputs->key[0] ^= 1;  // and a given value is the one read
  const int64_t row0 = x.explicit_inputs->rows[0];
  EXPECT_EQ(input_bits(x, Tensor::key, row0, 0, 0), input_bits(c, Tensor::key, row0, 0, 0) ^ 1);
}

}  // namespace
}  // namespace kvf::golden
