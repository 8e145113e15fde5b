// convert_quant_test.cpp — the golden model's quantised conversions (fp8 e4m3/e5m2, int8) against
// the CUDA toolkit's host-side fp8 conversions and an independent int8 formulation.
//
//   ctest --test-dir build -R 'ConvertQuant\.' --output-on-failure
//
// fp8 encoding must equal __nv_cvt_float_to_fp8(x, __NV_SATFINITE, fmt) bit for bit on: every f16
// and bf16 value, every rounding tie between adjacent fp8 values (and the f32s one ulp around it,
// subnormal range, underflow and saturation boundaries included), the specials, and ~1.05e8 f32
// bit patterns (a stride-41 sweep of all 2^32). Decoding must equal __nv_cvt_fp8_to_halfraw on all
// 256 codes. int8 (no host conversion in the CUDA headers) is checked against nearest-integer in
// double precision (std::nearbyint, round-to-nearest mode), clamp, NaN -> 0, on the same sweep.
//
// CUDA's host behaviour, as pinned by the tests below: every NaN (either sign, any payload) -> 0x7F
// in both formats; +-Inf -> +-max finite (0x7E/0xFE e4m3, 0x7B/0xFB e5m2); -0 -> 0x80; decoding
// any NaN code gives the f16 canonical NaN 0x7FFF (sign dropped); e5m2 0x7C/0xFC decode to +-Inf.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "values/convert.h"
#include "kv_append.cuh"

namespace kvf::golden {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

constexpr DType kFp8Types[] = {DType::fp8_e4m3, DType::fp8_e5m2};

__nv_fp8_interpretation_t interpretation(DType t) { return t == DType::fp8_e4m3 ? __NV_E4M3 : __NV_E5M2; }
uint8_t max_code(DType t) { return t == DType::fp8_e4m3 ? 0x7E : 0x7B; }

// CUDA toolkit host-side references.
uint8_t cuda_to_fp8(float x, DType t) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, interpretation(t)));
}
uint16_t cuda_fp8_to_f16(uint8_t b, DType t) {
  return __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), interpretation(t)).x;
}

uint8_t ours_to_fp8(float x, DType t) { return t == DType::fp8_e4m3 ? f32_to_fp8_e4m3(x) : f32_to_fp8_e5m2(x); }
float ours_fp8_to_f32(uint8_t b, DType t) { return t == DType::fp8_e4m3 ? fp8_e4m3_to_f32(b) : fp8_e5m2_to_f32(b); }

// Independent int8 reference: nearest integer in double (exact for every f32), ties to even under
// the default rounding mode, then clamp; NaN -> 0.
int8_t reference_int8(float x) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(static_cast<double>(x));
  return static_cast<int8_t>(std::clamp(r, -128.0, 127.0));
}

// Checks all three quantised encodings of one f32 pattern; returns the number of mismatches. Quiet,
// so that it can run on several threads; expect_encodings() below reports the details.
int check_encodings(uint32_t u) {
  const float x = float_of(u);
  int bad = 0;
  bad += f32_to_fp8_e4m3(x) != cuda_to_fp8(x, DType::fp8_e4m3);
  bad += f32_to_fp8_e5m2(x) != cuda_to_fp8(x, DType::fp8_e5m2);
  bad += f32_to_int8(x) != reference_int8(x);
  return bad;
}

void expect_encodings(uint32_t u) {
  const float x = float_of(u);
  for (DType t : kFp8Types) {
    EXPECT_EQ(ours_to_fp8(x, t), cuda_to_fp8(x, t)) << std::hex << "f32 0x" << u << " dtype " << int(t);
    EXPECT_EQ(convert_bits(u, DType::f32, t), cuda_to_fp8(x, t)) << std::hex << "f32 0x" << u;
    EXPECT_EQ(quantize_bits(x, 1.0f, t), cuda_to_fp8(x, t)) << std::hex << "f32 0x" << u;
  }
  EXPECT_EQ(f32_to_int8(x), reference_int8(x)) << std::hex << "f32 0x" << u;
}

TEST(ConvertQuant, decodesEveryFp8CodeLikeCuda) {
  for (DType t : kFp8Types) {
    for (uint32_t b = 0; b <= 0xFFu; ++b) {
      const uint16_t cuda_h = cuda_fp8_to_f16(static_cast<uint8_t>(b), t);
      const uint32_t cuda_f = bits_of(__half2float(__ushort_as_half(cuda_h)));
      const uint32_t ours = bits_of(ours_fp8_to_f32(static_cast<uint8_t>(b), t));
      if (is_nan_bits(b, t)) {
        ASSERT_EQ(cuda_h, 0x7FFFu) << std::hex << b;     // CUDA: f16 canonical NaN, sign dropped
        ASSERT_EQ(ours, 0x7FFFFFFFu) << std::hex << b;   // ours: f32 canonical NaN (contract)
        ASSERT_EQ(convert_bits(b, t, DType::f16), 0x7FFFu) << std::hex << b;
      } else {
        ASSERT_EQ(ours, cuda_f) << std::hex << b << " dtype " << int(t);
        ASSERT_EQ(convert_bits(b, t, DType::f16), cuda_h) << std::hex << b;  // fp8 -> f16 is exact
      }
      ASSERT_EQ(bits_of(bits_to_f32(b, t)), ours) << std::hex << b;
      ASSERT_EQ(convert_bits(b, t, DType::f32), ours) << std::hex << b;
      ASSERT_EQ(convert_bits(b, t, t), b);  // bit copy
      // Round trip: every non-NaN code encodes back to itself.
      if (!is_nan_bits(b, t) && !std::isinf(float_of(ours))) {
        ASSERT_EQ(ours_to_fp8(float_of(ours), t), b) << std::hex << b;
      }
    }
  }
  // Sanity anchors of the formats.
  EXPECT_EQ(fp8_e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), 0x1p-6f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8_e5m2_to_f32(0xFC), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits_of(fp8_e4m3_to_f32(0x80)), 0x80000000u);
}

TEST(ConvertQuant, encodesEveryF16AndBf16ValueLikeCuda) {
  for (uint32_t x = 0; x <= 0xFFFFu; ++x) {
    const float from_f16 = f16_to_f32(static_cast<uint16_t>(x));
    const float from_bf16 = bf16_to_f32(static_cast<uint16_t>(x));
    for (DType t : kFp8Types) {
      const uint8_t cuda_h = cuda_to_fp8(from_f16, t);
      const uint8_t cuda_b = cuda_to_fp8(from_bf16, t);
      ASSERT_EQ(ours_to_fp8(from_f16, t), cuda_h) << std::hex << "f16 0x" << x << " dtype " << int(t);
      ASSERT_EQ(ours_to_fp8(from_bf16, t), cuda_b) << std::hex << "bf16 0x" << x << " dtype " << int(t);
      ASSERT_EQ(convert_bits(x, DType::f16, t), cuda_h) << std::hex << "f16 0x" << x;
      ASSERT_EQ(convert_bits(x, DType::bf16, t), cuda_b) << std::hex << "bf16 0x" << x;
    }
    ASSERT_EQ(f32_to_int8(from_f16), reference_int8(from_f16)) << std::hex << "f16 0x" << x;
    ASSERT_EQ(f32_to_int8(from_bf16), reference_int8(from_bf16)) << std::hex << "bf16 0x" << x;
    ASSERT_EQ(convert_bits(x, DType::f16, DType::int8), static_cast<uint8_t>(reference_int8(from_f16)));
  }
}

// For every pair of adjacent non-negative fp8 values lo < hi (codes c, c+1; for the largest finite
// value hi is the next value the format would have, 480 for e4m3 and 65536 for e5m2, so the tie is
// the saturation boundary 464 / 61440): lo, hi, the tie (lo + hi) / 2 and the f32s one ulp on either
// side, both signs. The tie must round to the even code, beyond it up, below it down, and anything
// past the largest finite value saturates; each input must also match CUDA. Pair (0, 1) is the
// underflow boundary (half the smallest subnormal rounds to 0).
TEST(ConvertQuant, roundsEveryTieAndItsNeighboursLikeCuda) {
  int checked = 0;
  for (DType t : kFp8Types) {
    const uint8_t top = max_code(t);
    for (uint32_t c = 0; c <= top; ++c) {
      const double lo = ours_fp8_to_f32(static_cast<uint8_t>(c), t);
      const double hi = c < top ? static_cast<double>(ours_fp8_to_f32(static_cast<uint8_t>(c + 1), t))
                                : lo + (lo - static_cast<double>(ours_fp8_to_f32(static_cast<uint8_t>(c - 1), t)));
      const uint32_t mid = bits_of(static_cast<float>((lo + hi) / 2));  // exact: <= 5 significant bits
      ASSERT_EQ(static_cast<double>(float_of(mid)), (lo + hi) / 2);
      const uint32_t up = c < top ? c + 1 : top;   // expected code above the tie
      const uint32_t even = c < top ? ((c & 1u) == 0 ? c : c + 1) : top;
      const std::pair<uint32_t, uint32_t> cases[] = {
          {bits_of(static_cast<float>(lo)), c}, {bits_of(static_cast<float>(lo)) + 1, c},
          {mid - 1, c},                         {mid, even},
          {mid + 1, up},                        {bits_of(static_cast<float>(hi)) - 1, up},
          {bits_of(static_cast<float>(hi)), up}, {bits_of(static_cast<float>(hi)) + 1, up},
      };
      for (auto [u, expected] : cases) {
        for (uint32_t sign : {0u, 0x80000000u}) {
          const float x = float_of(sign | u);
          const uint8_t ours = ours_to_fp8(x, t);
          ASSERT_EQ(ours, cuda_to_fp8(x, t)) << std::hex << "f32 0x" << (sign | u) << " dtype " << int(t);
          ASSERT_EQ(ours, (sign >> 24) | expected) << std::hex << "f32 0x" << (sign | u) << " dtype " << int(t);
          ++checked;
        }
      }
    }
  }
  // Named boundaries.
  EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7E);                          // tie at saturation: 448 (even)
  EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(464.0f, 1e9f)), 0x7E);    // beyond: saturates, never NaN
  EXPECT_EQ(f32_to_fp8_e4m3(-1e30f), 0xFE);
  EXPECT_EQ(f32_to_fp8_e5m2(61440.0f), 0x7B);                        // tie at saturation: odd, would be Inf
  EXPECT_EQ(f32_to_fp8_e5m2(std::nextafter(61440.0f, 0.0f)), 0x7B);
  EXPECT_EQ(f32_to_fp8_e5m2(-3.0e38f), 0xFB);
  EXPECT_EQ(f32_to_fp8_e4m3(0x1p-10f), 0x00);                        // half the smallest subnormal: 0
  EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(f32_to_fp8_e4m3(-0x1p-10f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(0x3p-10f), 0x02);                        // tie between 1 and 2 units: 2
  EXPECT_EQ(f32_to_fp8_e4m3(0x1.ep-7f), 0x08);                       // largest-subnormal tie carries into 2^-6
  EXPECT_EQ(f32_to_fp8_e5m2(0x1p-17f), 0x00);
  EXPECT_EQ(f32_to_fp8_e5m2(std::nextafter(0x1p-17f, 1.0f)), 0x01);
  EXPECT_GT(checked, 2 * 8 * 2 * (0x7B + 1));
}

TEST(ConvertQuant, handlesZerosInfinitiesAndNansLikeCuda) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    uint32_t f32;
    uint8_t e4m3, e5m2;
    int8_t i8;
  };
  const Case cases[] = {
      {0x00000000u, 0x00, 0x00, 0},     {0x80000000u, 0x80, 0x80, 0},       // +-0; int8 has no -0
      {bits_of(inf), 0x7E, 0x7B, 127},  {bits_of(-inf), 0xFE, 0xFB, -128},  // +-Inf saturate
      {0x7FC00000u, 0x7F, 0x7F, 0},     {0xFFC00000u, 0x7F, 0x7F, 0},       // quiet NaN, both signs
      {0x7F800001u, 0x7F, 0x7F, 0},     {0xFF800001u, 0x7F, 0x7F, 0},       // signalling NaN payloads
      {0x7FA5A5A5u, 0x7F, 0x7F, 0},     {0xFFFFFFFFu, 0x7F, 0x7F, 0},       // arbitrary payloads
      {0x00000001u, 0x00, 0x00, 0},     {0x80000001u, 0x80, 0x80, 0},       // f32 subnormals underflow
      {0x7F7FFFFFu, 0x7E, 0x7B, 127},   {0xFF7FFFFFu, 0xFE, 0xFB, -128},    // f32 max finite
  };
  for (const Case& c : cases) {
    const float x = float_of(c.f32);
    EXPECT_EQ(cuda_to_fp8(x, DType::fp8_e4m3), c.e4m3) << std::hex << "CUDA e4m3 of f32 0x" << c.f32;
    EXPECT_EQ(cuda_to_fp8(x, DType::fp8_e5m2), c.e5m2) << std::hex << "CUDA e5m2 of f32 0x" << c.f32;
    EXPECT_EQ(f32_to_fp8_e4m3(x), c.e4m3) << std::hex << "f32 0x" << c.f32;
    EXPECT_EQ(f32_to_fp8_e5m2(x), c.e5m2) << std::hex << "f32 0x" << c.f32;
    EXPECT_EQ(f32_to_int8(x), c.i8) << std::hex << "f32 0x" << c.f32;
    expect_encodings(c.f32);
  }
  // NaN codes of the fp8 formats and int8's lack of one.
  EXPECT_TRUE(is_nan_bits(0x7F, DType::fp8_e4m3));
  EXPECT_TRUE(is_nan_bits(0xFF, DType::fp8_e4m3));
  EXPECT_FALSE(is_nan_bits(0x7E, DType::fp8_e4m3));
  EXPECT_FALSE(is_nan_bits(0x7C, DType::fp8_e5m2));  // Inf
  for (uint32_t b : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu}) EXPECT_TRUE(is_nan_bits(b, DType::fp8_e5m2)) << b;
  for (uint32_t b = 0; b <= 0xFFu; ++b) EXPECT_FALSE(is_nan_bits(b, DType::int8));
  EXPECT_EQ(canonical_nan_bits(DType::fp8_e4m3), 0x7Fu);
  EXPECT_EQ(canonical_nan_bits(DType::fp8_e5m2), 0x7Fu);
  EXPECT_EQ(canonical_nan_bits(DType::int8), 0u);
}

// ~1.05e8 f32 patterns: every 41st of all 2^32 (41 is odd, so every low-bit pattern and every
// exponent occurs), each encoded to e4m3, e5m2 (vs CUDA) and int8 (vs the double reference), on
// two threads.
TEST(ConvertQuant, matchesTheReferencesOnAStridedSweepOfAllF32Patterns) {
  constexpr uint64_t kStride = 41;
  constexpr uint64_t kCount = ((uint64_t{1} << 32) + kStride - 1) / kStride;  // 104,755,300
  static_assert(kCount >= 100'000'000);
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);  // the int8 reference relies on it
  struct Result {
    uint64_t bad = 0;
    std::vector<uint32_t> first;
  };
  constexpr int kThreads = 2;
  Result results[kThreads];
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      const uint64_t begin = kCount * k / kThreads;
      const uint64_t end = kCount * (k + 1) / kThreads;
      for (uint64_t i = begin; i < end; ++i) {
        const uint32_t u = static_cast<uint32_t>(i * kStride);
        if (check_encodings(u) != 0) {
          if (results[k].first.size() < 10) results[k].first.push_back(u);
          ++results[k].bad;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const Result& r : results) {
    EXPECT_EQ(r.bad, 0u);
    for (uint32_t u : r.first) expect_encodings(u);  // reports the details
  }
}

TEST(ConvertQuant, roundsInt8HalfToEvenAndSaturates) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (int k = -130; k <= 130; ++k) {
    const float tie = static_cast<float>(k) + 0.5f;
    const int even = (k % 2 == 0) ? k : k + 1;
    const int expected = std::clamp(even, -128, 127);
    EXPECT_EQ(f32_to_int8(tie), expected) << tie;
    EXPECT_EQ(f32_to_int8(std::nextafter(tie, 1e9f)), std::clamp(k + 1, -128, 127)) << tie;
    EXPECT_EQ(f32_to_int8(std::nextafter(tie, -1e9f)), std::clamp(k, -128, 127)) << tie;
    EXPECT_EQ(f32_to_int8(static_cast<float>(k)), std::clamp(k, -128, 127)) << k;
    for (float x : {tie, std::nextafter(tie, 1e9f), std::nextafter(tie, -1e9f)}) expect_encodings(bits_of(x));
  }
  EXPECT_EQ(f32_to_int8(0.5f), 0);
  EXPECT_EQ(f32_to_int8(-0.5f), 0);
  EXPECT_EQ(f32_to_int8(1.5f), 2);
  EXPECT_EQ(f32_to_int8(-2.5f), -2);
  EXPECT_EQ(f32_to_int8(127.5f), 127);   // rounds to 128, saturates
  EXPECT_EQ(f32_to_int8(-128.5f), -128);
  EXPECT_EQ(f32_to_int8(-129.0f), -128);
  EXPECT_EQ(f32_to_int8(0x1p-149f), 0);
  EXPECT_EQ(f32_to_int8(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(f32_to_int8(-std::numeric_limits<float>::quiet_NaN()), 0);

  // Independent of the FP rounding mode (integer arithmetic on the bits).
  const int saved = std::fegetround();
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    volatile float a = 2.5f, b = -2.5f, c = 2.4f, d = -3.5f;
    EXPECT_EQ(f32_to_int8(a), 2) << mode;
    EXPECT_EQ(f32_to_int8(b), -2) << mode;
    EXPECT_EQ(f32_to_int8(c), 2) << mode;
    EXPECT_EQ(f32_to_int8(d), -4) << mode;
    EXPECT_EQ(f32_to_fp8_e4m3(float_of(0x3F880000u)), 0x38) << mode;  // 1.0625: tie -> 1.0
  }
  std::fesetround(saved);
}

TEST(ConvertQuant, measuresUlpDistanceOnAnOrderedLine) {
  for (DType t : kFp8Types) {
    // Independent ordering: the distinct non-NaN values sorted; +0 and -0 are one value.
    std::vector<double> values;
    for (uint32_t b = 0; b <= 0xFFu; ++b) {
      if (!is_nan_bits(b, t)) values.push_back(ours_fp8_to_f32(static_cast<uint8_t>(b), t));
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    ASSERT_EQ(values.size(), t == DType::fp8_e4m3 ? 253u : 249u);  // non-NaN codes (254 | 250) less the duplicate zero
    const auto rank = [&](uint32_t b) {
      const double v = ours_fp8_to_f32(static_cast<uint8_t>(b), t);
      return static_cast<int64_t>(std::lower_bound(values.begin(), values.end(), v) - values.begin());
    };
    for (uint32_t a = 0; a <= 0xFFu; ++a) {
      for (uint32_t b = 0; b <= 0xFFu; ++b) {
        const int64_t d = ulp_distance(a, b, t);
        ASSERT_EQ(d, ulp_distance(b, a, t));
        const bool an = is_nan_bits(a, t), bn = is_nan_bits(b, t);
        if (an && bn) ASSERT_EQ(d, 0);
        else if (an || bn) ASSERT_EQ(d, -1);
        else ASSERT_EQ(d, std::abs(rank(a) - rank(b))) << std::hex << a << " " << b << " dtype " << int(t);
      }
    }
  }
  for (int a = -128; a <= 127; ++a) {
    for (int b = -128; b <= 127; ++b) {
      ASSERT_EQ(ulp_distance(static_cast<uint8_t>(a), static_cast<uint8_t>(b), DType::int8), std::abs(a - b));
    }
  }
  // Float formats: same line.
  EXPECT_EQ(ulp_distance(0x0000u, 0x8000u, DType::f16), 0);
  EXPECT_EQ(ulp_distance(0x0001u, 0x8001u, DType::f16), 2);
  EXPECT_EQ(ulp_distance(0x7BFFu, 0x7C00u, DType::f16), 1);
  EXPECT_EQ(ulp_distance(0x3F80u, 0x3F81u, DType::bf16), 1);
  EXPECT_EQ(ulp_distance(0x7F7FFFFFu, 0x7F800000u, DType::f32), 1);
  EXPECT_EQ(ulp_distance(0x00000000u, 0x80000001u, DType::f32), 1);
  EXPECT_EQ(ulp_distance(0x7F800000u, 0xFF800000u, DType::f32), 2 * int64_t{0x7F800000});
  EXPECT_EQ(ulp_distance(0x7FC00000u, 0x3F800000u, DType::f32), -1);
  EXPECT_EQ(ulp_distance(0x7FC00000u, 0xFFC00001u, DType::f32), 0);
  EXPECT_EQ(ulp_distance(0x7E01u, 0x7E01u, DType::f16), 0);
}

TEST(ConvertQuant, quantizesByIeeeDivisionByTheScale) {
  EXPECT_EQ(quantize_bits(3.0f, 2.0f, DType::fp8_e4m3), 0x3Cu);    // 1.5 = 0.0111.100
  EXPECT_EQ(quantize_bits(3.0f, 2.0f, DType::fp8_e5m2), 0x3Eu);    // 1.5 = 0.01111.10
  EXPECT_EQ(quantize_bits(3.0f, 2.0f, DType::int8), 2u);            // 1.5 -> 2 (tie, even)
  EXPECT_EQ(quantize_bits(2.125f, 2.0f, DType::fp8_e4m3), 0x38u);  // 1.0625: tie 1.0 | 1.125 -> 1.0
  EXPECT_EQ(quantize_bits(2.375f, 2.0f, DType::fp8_e4m3), 0x3Au);  // 1.1875: tie 1.125 | 1.25 -> 1.25
  EXPECT_EQ(quantize_bits(5.0f, 2.0f, DType::int8), 2u);            // 2.5 -> 2
  EXPECT_EQ(quantize_bits(7.0f, 2.0f, DType::int8), 4u);            // 3.5 -> 4
  EXPECT_EQ(quantize_bits(-7.0f, 2.0f, DType::int8), 0xFCu);        // -4, stored as its byte
  EXPECT_EQ(quantize_bits(1000.0f, 2.0f, DType::fp8_e4m3), 0x7Eu);  // 500 saturates to 448
  EXPECT_EQ(quantize_bits(-1e6f, 10.0f, DType::fp8_e5m2), 0xFBu);    // -1e5 saturates to -57344
  EXPECT_EQ(quantize_bits(300.0f, 1.0f, DType::int8), 127u);
  EXPECT_EQ(quantize_bits(-1e30f, 1e-30f, DType::fp8_e4m3), 0xFEu);  // quotient overflows to -Inf
  EXPECT_EQ(quantize_bits(1.0f, 0.0f, DType::fp8_e4m3), 0x7Eu);      // +Inf saturates
  EXPECT_EQ(quantize_bits(0.0f, 0.0f, DType::fp8_e5m2), 0x7Fu);      // 0/0 = NaN
  EXPECT_EQ(quantize_bits(0.0f, 0.0f, DType::int8), 0u);
  EXPECT_EQ(quantize_bits(-0.0f, 3.0f, DType::fp8_e4m3), 0x80u);
  EXPECT_EQ(quantize_bits(0x1p-20f, 0x1p+20f, DType::f32), bits_of(0x1p-40f));

  // Division, not multiplication by the reciprocal: 10.9375 / 7 = 1.5625 exactly, the tie between
  // e4m3 1.5 (0x3C) and 1.625 (0x3D), rounds to even 0x3C; 10.9375 * (1/7f) = 1.5625002 rounds up.
  volatile float x = 10.9375f, scale = 7.0f;
  ASSERT_NE(bits_of(x / scale), bits_of(x * (1.0f / scale)));
  ASSERT_EQ(x / scale, 1.5625f);
  EXPECT_EQ(f32_to_fp8_e4m3(x * (1.0f / scale)), 0x3D);
  EXPECT_EQ(quantize_bits(x, scale, DType::fp8_e4m3), 0x3Cu);

  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    EXPECT_EQ(quant_max(t), t == DType::fp8_e4m3 ? 448.0f : (t == DType::fp8_e5m2 ? 57344.0f : 127.0f));
    EXPECT_EQ(bits_to_f32(quantize_bits(1e30f, 1.0f, t), t), quant_max(t));  // saturates at quant_max
  }
  EXPECT_EQ(bits_to_f32(0x80u, DType::int8), -128.0f);
  EXPECT_EQ(bits_to_f32(0xFFu, DType::int8), -1.0f);
  EXPECT_EQ(bits_to_f32(0x7Fu, DType::int8), 127.0f);
}

TEST(ConvertQuant, convertsBetweenQuantisedAndFloatDtypesWithAUnitScale) {
  // Quantised sources widen to their value (int8 as its integer); quantised targets take scale 1.
  EXPECT_EQ(convert_bits(0xFFu, DType::int8, DType::f32), bits_of(-1.0f));
  EXPECT_EQ(convert_bits(0x80u, DType::int8, DType::f16), 0xD800u);       // -128
  EXPECT_EQ(convert_bits(0x7Fu, DType::int8, DType::fp8_e4m3), 0x70u);    // 127 -> 128 (RNE, 3 bits)
  EXPECT_EQ(convert_bits(0x7Eu, DType::fp8_e4m3, DType::int8), 127u);     // 448 saturates
  EXPECT_EQ(convert_bits(0x7Eu, DType::fp8_e4m3, DType::fp8_e5m2), 0x5Fu);  // 448 = 1.75 * 2^8
  EXPECT_EQ(convert_bits(0x7Bu, DType::fp8_e5m2, DType::fp8_e4m3), 0x7Eu);  // 57344 saturates
  EXPECT_EQ(convert_bits(0x7Cu, DType::fp8_e5m2, DType::f16), 0x7C00u);     // Inf
  EXPECT_EQ(convert_bits(0x7Cu, DType::fp8_e5m2, DType::fp8_e4m3), 0x7Eu);  // Inf saturates
  EXPECT_EQ(convert_bits(0x3C00u, DType::f16, DType::fp8_e5m2), 0x3Cu);     // 1.0
  EXPECT_EQ(convert_bits(0x12345678u, DType::int8, DType::int8), 0x78u);    // element byte only
  // NaN: the target's canonical NaN (int8: 0); equal dtypes keep the bits.
  EXPECT_EQ(convert_bits(0xFFu, DType::fp8_e4m3, DType::fp8_e5m2), 0x7Fu);
  EXPECT_EQ(convert_bits(0xFDu, DType::fp8_e5m2, DType::fp8_e4m3), 0x7Fu);
  EXPECT_EQ(convert_bits(0xFDu, DType::fp8_e5m2, DType::fp8_e5m2), 0xFDu);
  EXPECT_EQ(convert_bits(0x7FFFu, DType::f16, DType::int8), 0u);
  EXPECT_EQ(convert_bits(0xFFu, DType::fp8_e4m3, DType::bf16), 0x7FFFu);
  EXPECT_EQ(convert_bits(0xFFu, DType::fp8_e4m3, DType::f32), 0x7FFFFFFFu);
  // Every (from, to) pair agrees with decode-then-encode.
  const DType all[] = {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
  for (DType from : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    for (DType to : all) {
      for (uint32_t b = 0; b <= 0xFFu; ++b) {
        if (from == to || is_nan_bits(b, from)) continue;
        ASSERT_EQ(convert_bits(b, from, to), quantize_bits(bits_to_f32(b, from), 1.0f, to))
            << std::hex << b << " " << int(from) << "->" << int(to);
      }
    }
  }
}

// The kernel's quantisation (kv_append.cuh, host side: what cuda-emu runs) must agree with the
// golden model bit for bit, or cuda-emu would report the golden model's own differences.
TEST(ConvertQuant, agreesWithTheKernelsHostQuantize) {
  int bad = 0;
  const float scales[] = {1.0f, 2.0f, 7.0f, 0.1f, 1.0f / 448.0f, 3.0e-5f};
  for (uint64_t i = 0; i < (uint64_t{1} << 32) && bad <= 20; i += 4099) {
    const float x = float_of(static_cast<uint32_t>(i));
    for (float s : scales) {
      const uint32_t e4 = kvf::quantize<kvf::Fp8E4M3>(x, s).bits;
      const uint32_t e5 = kvf::quantize<kvf::Fp8E5M2>(x, s).bits;
      const uint32_t i8 = static_cast<uint8_t>(kvf::quantize<kvf::Int8>(x, s).value);
      const bool ok = e4 == quantize_bits(x, s, DType::fp8_e4m3) && e5 == quantize_bits(x, s, DType::fp8_e5m2) &&
                      i8 == quantize_bits(x, s, DType::int8);
      if (!ok) {
        ++bad;
        ADD_FAILURE() << std::hex << "kernel quantize differs from golden for x 0x" << i << " scale " << s;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace kvf::golden
