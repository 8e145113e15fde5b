// minifloat_test.cpp — the golden model's fp4 e2m1 and e8m0 codecs and power-of-two rounding
// (values/minifloat.h) against the CUDA toolkit's host conversions and the host libm.
//
//   ctest --test-dir build -R 'Minifloat\.' --output-on-failure
//   KVFUZZ_FULL_SWEEP=1 build/tests/kvfuzz_verify_tests --gtest_filter='Minifloat.*AllF32*'
//
// e2m1 encoding must equal __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) bit for bit (NaN
// policy max_positive) and a literal transcription of FlashInfer's threshold encoder (NaN policy
// signed_zero); e8m0 encoding must equal __nv_cvt_float_to_e8m0(x, SATFINITE | NOSAT,
// cudaRoundZero | cudaRoundPosInf); pow2_ceil_log2f must equal exp2f(ceilf(log2f(s))) of the host
// libm. Checked on every code, every tie between neighbouring codes and the f32s one ulp around
// it, the specials, every power of two and its neighbours, and a stride-41 sweep of all 2^32 f32
// patterns (every one of them with KVFUZZ_FULL_SWEEP=1: about two minutes on two cores).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "values/minifloat.h"

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
bool is_nan_f32(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// CUDA toolkit host-side references.
uint8_t cuda_fp4(float x) { return static_cast<uint8_t>(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)); }
float cuda_fp4_to_f32(uint8_t c) {
  __half_raw h = __nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(c), __NV_E2M1);
  return __half2float(__half(h));
}
uint8_t cuda_e8m0(float x, E8m0Rounding r, E8m0Overflow o) {
  return static_cast<uint8_t>(__nv_cvt_float_to_e8m0(x, o == E8m0Overflow::saturate ? __NV_SATFINITE : __NV_NOSAT,
                                                     r == E8m0Rounding::floor ? cudaRoundZero : cudaRoundPosInf));
}
uint32_t cuda_e8m0_to_f32_bits(uint8_t c) {
  __nv_bfloat16_raw b = __nv_cvt_e8m0_to_bf16raw(static_cast<__nv_fp8_storage_t>(c));
  return static_cast<uint32_t>(b.x) << 16;
}

// FlashInfer's NVFP4 append encoder (nvfp4_append_quantize_e2m1), transcribed: thresholds on |v|,
// sign from signbit. An independent formulation of RNE with saturation and its NaN policy.
uint8_t flashinfer_e2m1(float v) {
  const uint8_t sign = std::signbit(v) ? 0x8 : 0x0;
  const float m = std::fabs(v);
  uint8_t code;
  if (!(m > 0.25f)) code = 0;
  else if (m < 0.75f) code = 1;
  else if (m <= 1.25f) code = 2;
  else if (m < 1.75f) code = 3;
  else if (m <= 2.5f) code = 4;
  else if (m < 3.5f) code = 5;
  else if (m <= 5.0f) code = 6;
  else code = 7;
  return sign | code;
}

// The host libm's ue8m0 rounding (vLLM's indexer writer, on the CPU).
uint32_t libm_pow2_ceil_bits(float s) { return bits_of(std::exp2f(std::ceil(std::log2f(s)))); }

constexpr E8m0Rounding kRoundings[] = {E8m0Rounding::floor, E8m0Rounding::ceil};
constexpr E8m0Overflow kOverflows[] = {E8m0Overflow::saturate, E8m0Overflow::nan};

bool full_sweep_requested() {
  const char* v = std::getenv("KVFUZZ_FULL_SWEEP");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// Runs check(u) for u = first, first + stride, ... < end on two threads; returns the number of
// patterns for which it returned false and reports the first few.
template <typename Check>
uint64_t sweep(uint64_t first, uint64_t end, uint64_t stride, Check check) {
  constexpr int kThreads = 2;
  uint64_t bad[kThreads] = {};
  std::vector<uint32_t> first_bad[kThreads];
  const uint64_t count = (end - first + stride - 1) / stride;
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (uint64_t i = count * k / kThreads; i < count * (k + 1) / kThreads; ++i) {
        const uint32_t u = static_cast<uint32_t>(first + i * stride);
        if (!check(u)) {
          if (first_bad[k].size() < 5) first_bad[k].push_back(u);
          ++bad[k];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) {
    for (uint32_t u : first_bad[k]) ADD_FAILURE() << std::hex << "mismatch at f32 0x" << u;
  }
  return bad[0] + bad[1];
}

bool e2m1_matches(uint32_t u) {
  const float x = float_of(u);
  return f32_to_fp4_e2m1(x, E2m1Nan::max_positive) == cuda_fp4(x) &&
         f32_to_fp4_e2m1(x, E2m1Nan::signed_zero) == flashinfer_e2m1(x);
}

bool e8m0_matches(uint32_t u) {
  const float x = float_of(u);
  for (E8m0Rounding r : kRoundings) {
    for (E8m0Overflow o : kOverflows) {
      if (f32_to_e8m0(x, r, o) != cuda_e8m0(x, r, o)) return false;
    }
  }
  return true;
}

bool pow2_matches(uint32_t u) {
  const float s = float_of(u);
  const uint32_t libm = libm_pow2_ceil_bits(s);
  const uint32_t ours = bits_of(pow2_ceil_log2f(s));
  return ours == libm || (is_nan_f32(ours) && is_nan_f32(libm));
}

// ---------------------------------------------------------------------------------------------
// e2m1

TEST(Minifloat, decodesEveryE2m1CodeLikeCuda) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint32_t c = 0; c < 16; ++c) {
    const float ours = fp4_e2m1_to_f32(static_cast<uint8_t>(c));
    const float expected = (c & 8u) != 0 ? -magnitudes[c & 7u] : magnitudes[c & 7u];
    EXPECT_EQ(bits_of(ours), bits_of(expected)) << c;  // -0 for 0x8
    EXPECT_EQ(bits_of(ours), bits_of(cuda_fp4_to_f32(static_cast<uint8_t>(c)))) << c;
    EXPECT_EQ(bits_of(fp4_e2m1_to_f32(static_cast<uint8_t>(c | 0xA0u))), bits_of(ours)) << "high nibble ignored";
    // Every code encodes back to itself under both NaN policies.
    EXPECT_EQ(f32_to_fp4_e2m1(ours, E2m1Nan::max_positive), c);
    EXPECT_EQ(f32_to_fp4_e2m1(ours, E2m1Nan::signed_zero), c);
  }
}

// For each pair of neighbouring magnitudes lo < hi (for 6, the next value the format would have,
// 8, so the tie 7 is the saturation boundary): lo, hi, the tie and the f32s one ulp on either side,
// both signs. The tie goes to the even code (the one with mantissa bit 0), above it up, below it
// down; past 6 everything saturates. (0, 0.5) is the underflow boundary: 0.25 rounds to 0.
TEST(Minifloat, roundsEveryE2m1TieAndItsNeighboursLikeCuda) {
  int checked = 0;
  for (uint32_t c = 0; c <= 7; ++c) {
    const float lo = fp4_e2m1_to_f32(static_cast<uint8_t>(c));
    const float hi = c < 7 ? fp4_e2m1_to_f32(static_cast<uint8_t>(c + 1)) : 8.0f;
    const float mid = (lo + hi) / 2;  // exact
    const uint32_t up = c < 7 ? c + 1 : 7;
    const uint32_t even = c < 7 ? ((c & 1u) == 0 ? c : c + 1) : 7;
    const std::pair<uint32_t, uint32_t> cases[] = {
        {bits_of(lo), c},      {bits_of(lo) + 1, c}, {bits_of(mid) - 1, c},  {bits_of(mid), even},
        {bits_of(mid) + 1, up}, {bits_of(hi) - 1, up}, {bits_of(hi), up},     {bits_of(hi) + 1, up},
    };
    for (auto [u, expected] : cases) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        const float x = float_of(sign | u);
        const uint32_t want = (sign >> 28) | expected;
        ASSERT_EQ(f32_to_fp4_e2m1(x), want) << std::hex << "f32 0x" << (sign | u);
        ASSERT_EQ(cuda_fp4(x), want) << std::hex << "CUDA, f32 0x" << (sign | u);
        ASSERT_EQ(f32_to_fp4_e2m1(x, E2m1Nan::signed_zero), flashinfer_e2m1(x)) << std::hex << (sign | u);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 8 * 8 * 2);
  // The ties by name (CUDA's header and FlashInfer's thresholds agree on all of them).
  const std::pair<float, uint8_t> ties[] = {{0.25f, 0x0}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4},
                                            {2.5f, 0x4},  {3.5f, 0x6},  {5.0f, 0x6},  {7.0f, 0x7}};
  for (auto [x, code] : ties) {
    EXPECT_EQ(f32_to_fp4_e2m1(x), code) << x;
    EXPECT_EQ(f32_to_fp4_e2m1(-x), code | 0x8) << x;
  }
}

TEST(Minifloat, handlesE2m1SpecialsUnderBothNanPolicies) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    uint32_t f32;
    uint8_t max_positive, signed_zero;
  };
  const Case cases[] = {
      {0x00000000u, 0x0, 0x0}, {0x80000000u, 0x8, 0x8},        // ±0 keep their sign
      {bits_of(inf), 0x7, 0x7}, {bits_of(-inf), 0xF, 0xF},     // ±Inf saturate to ±6
      {0x7FC00000u, 0x7, 0x0}, {0xFFC00000u, 0x7, 0x8},        // quiet NaN: +6, or zero of its sign
      {0x7F800001u, 0x7, 0x0}, {0xFF800001u, 0x7, 0x8},        // signalling NaN payloads
      {0x00000001u, 0x0, 0x0}, {0x80000001u, 0x8, 0x8},        // f32 subnormals underflow
      {0x7F7FFFFFu, 0x7, 0x7}, {0xFF7FFFFFu, 0xF, 0xF},        // f32 max finite
      {bits_of(6.0f), 0x7, 0x7}, {bits_of(1e6f), 0x7, 0x7},
  };
  for (const Case& c : cases) {
    const float x = float_of(c.f32);
    EXPECT_EQ(cuda_fp4(x), c.max_positive) << std::hex << "CUDA of f32 0x" << c.f32;
    EXPECT_EQ(flashinfer_e2m1(x), c.signed_zero) << std::hex << "FlashInfer of f32 0x" << c.f32;
    EXPECT_EQ(f32_to_fp4_e2m1(x, E2m1Nan::max_positive), c.max_positive) << std::hex << "f32 0x" << c.f32;
    EXPECT_EQ(f32_to_fp4_e2m1(x, E2m1Nan::signed_zero), c.signed_zero) << std::hex << "f32 0x" << c.f32;
  }
  EXPECT_EQ(to_string(E2m1Nan::max_positive), "max_positive");
  EXPECT_EQ(to_string(E2m1Nan::signed_zero), "signed_zero");
}

TEST(Minifloat, encodesE2m1LikeCudaAndFlashInferOnAStridedSweepOfAllF32Patterns) {
  EXPECT_EQ(sweep(0, uint64_t{1} << 32, 41, e2m1_matches), 0u);
}

TEST(Minifloat, encodesE2m1LikeCudaAndFlashInferOnAllF32Patterns) {
  if (!full_sweep_requested()) GTEST_SKIP() << "set KVFUZZ_FULL_SWEEP=1 for all 2^32 patterns";
  EXPECT_EQ(sweep(0, uint64_t{1} << 32, 1, e2m1_matches), 0u);
}

// ---------------------------------------------------------------------------------------------
// e8m0

TEST(Minifloat, decodesEveryE8m0CodeLikeCuda) {
  for (uint32_t c = 0; c <= 0xFF; ++c) {
    const uint32_t ours = bits_of(e8m0_to_f32(static_cast<uint8_t>(c)));
    if (c == 0xFF) {
      EXPECT_EQ(ours, 0x7FFFFFFFu);                           // the contract's canonical NaN
      EXPECT_TRUE(is_nan_f32(cuda_e8m0_to_f32_bits(0xFF)));  // CUDA: a bf16 NaN
      continue;
    }
    EXPECT_EQ(static_cast<double>(float_of(ours)), std::ldexp(1.0, static_cast<int>(c) - 127)) << c;
    EXPECT_EQ(ours, cuda_e8m0_to_f32_bits(static_cast<uint8_t>(c))) << c;
    // Every power of two encodes back to its code, rounded either way, saturating or not.
    for (E8m0Rounding r : kRoundings) {
      for (E8m0Overflow o : kOverflows) EXPECT_EQ(f32_to_e8m0(float_of(ours), r, o), c) << c;
    }
  }
  EXPECT_EQ(bits_of(e8m0_to_f32(0x00)), 0x00400000u);  // 2^-127 is an f32 subnormal
  EXPECT_EQ(e8m0_to_f32(0x7F), 1.0f);
  EXPECT_EQ(e8m0_to_f32(0xFE), 0x1p127f);
}

// Every power of two 2^-149 .. 2^127 and the f32s one and two ulps around it, both signs, plus the
// specials: floor and ceil, saturating or not, must equal CUDA's host conversion and the exact
// definition (floor/ceil of log2 |x|, clipped to [2^-127, 2^127], overflow as named).
TEST(Minifloat, roundsE8m0ExactlyAtEveryPowerOfTwoLikeCuda) {
  std::vector<uint32_t> inputs = {0x00000000u, 0x7F800000u, 0x7FC00000u, 0x7F800001u, 0x7F7FFFFFu, 0x00400000u,
                                  0x003FFFFFu, 0x00400001u, 0x00000001u, 0x007FFFFFu};
  for (int e = -149; e <= 127; ++e) {
    const uint32_t p = bits_of(std::ldexp(1.0f, e));
    for (int d = -2; d <= 2; ++d) inputs.push_back(static_cast<uint32_t>(static_cast<int64_t>(p) + d));
    inputs.push_back(bits_of(1.5f * std::ldexp(1.0f, e)));
  }
  int checked = 0;
  for (uint32_t u0 : inputs) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t u = sign | u0;
      const float x = float_of(u);
      for (E8m0Rounding r : kRoundings) {
        for (E8m0Overflow o : kOverflows) {
          const uint8_t ours = f32_to_e8m0(x, r, o);
          ASSERT_EQ(ours, cuda_e8m0(x, r, o))
              << std::hex << "f32 0x" << u << " " << to_string(r) << " " << to_string(o);
          // The definition, in double arithmetic (exact for every f32).
          const double a = std::fabs(static_cast<double>(x));
          uint8_t expected;
          if (std::isnan(a)) {
            expected = 0xFF;
          } else if (std::isinf(a)) {
            expected = o == E8m0Overflow::saturate ? 0xFE : 0xFF;
          } else if (a == 0) {
            expected = 0x00;
          } else {
            int k = std::ilogb(a);  // floor(log2 a), exact for doubles
            if (r == E8m0Rounding::ceil && std::ldexp(1.0, k) != a) ++k;
            if (k < -127) k = -127;
            expected = k > 127 ? (o == E8m0Overflow::saturate ? 0xFE : 0xFF) : static_cast<uint8_t>(k + 127);
          }
          ASSERT_EQ(ours, expected) << std::hex << "f32 0x" << u << " " << to_string(r) << " " << to_string(o);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 277 * 6 * 2 * 4);
  // Named boundaries.
  EXPECT_EQ(f32_to_e8m0(-1.0f, E8m0Rounding::floor), 0x7F);                   // sign ignored
  EXPECT_EQ(f32_to_e8m0(-1.5f, E8m0Rounding::ceil), 0x80);
  EXPECT_EQ(f32_to_e8m0(0x1p-127f, E8m0Rounding::ceil), 0x00);                // exactly 2^-127
  EXPECT_EQ(f32_to_e8m0(float_of(0x00400001u), E8m0Rounding::ceil), 0x01);    // just above: 2^-126
  EXPECT_EQ(f32_to_e8m0(0x1p-140f, E8m0Rounding::ceil), 0x00);                // clipped up to 2^-127
  EXPECT_EQ(f32_to_e8m0(0x1.000002p127f, E8m0Rounding::ceil), 0xFE);          // 2^128 saturates
  EXPECT_EQ(f32_to_e8m0(0x1.000002p127f, E8m0Rounding::ceil, E8m0Overflow::nan), 0xFF);
  EXPECT_EQ(f32_to_e8m0(0x1.fffffep127f, E8m0Rounding::floor, E8m0Overflow::nan), 0xFE);  // floor never overflows
}

TEST(Minifloat, encodesE8m0LikeCudaOnAStridedSweepOfAllF32Patterns) {
  EXPECT_EQ(sweep(0, uint64_t{1} << 32, 97, e8m0_matches), 0u);
}

TEST(Minifloat, encodesE8m0LikeCudaOnAllF32Patterns) {
  if (!full_sweep_requested()) GTEST_SKIP() << "set KVFUZZ_FULL_SWEEP=1 for all 2^32 patterns";
  EXPECT_EQ(sweep(0, uint64_t{1} << 32, 1, e8m0_matches), 0u);
}

// ---------------------------------------------------------------------------------------------
// Powers of two

TEST(Minifloat, roundsScalesUpToAPowerOfTwoFromTheBits) {
  EXPECT_EQ(pow2_ceil(1.0f), 1.0f);
  EXPECT_EQ(pow2_ceil(0.75f), 1.0f);            // 336 / 448
  EXPECT_EQ(pow2_ceil(1e-4f), 0x1p-13f);        // DeepSeek's floor on a zero tile
  EXPECT_EQ(pow2_ceil(1e-4f / 448.0f), 0x1p-22f);
  EXPECT_EQ(pow2_ceil(std::nextafter(1.0f, 2.0f)), 2.0f);
  EXPECT_EQ(pow2_ceil(0x1p127f), 0x1p127f);
  EXPECT_EQ(pow2_ceil(0x1.000002p127f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits_of(pow2_ceil(0.0f)), 0u);
  EXPECT_EQ(bits_of(pow2_ceil(-0.0f)), 0u);
  EXPECT_TRUE(std::isnan(pow2_ceil(-1.0f)));
  EXPECT_TRUE(std::isnan(pow2_ceil(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(pow2_ceil(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits_of(pow2_ceil(float_of(0x00000003u))), 0x00000004u);  // subnormals: in their own units
  EXPECT_EQ(bits_of(pow2_ceil(float_of(0x00400001u))), 0x00800000u);  // up to the smallest normal
  // On every positive normal input: equal to the e8m0 ceiling's value, a power of two >= s and
  // less than 2s (sampled: a stride-41 sweep of all normal patterns).
  const uint64_t bad = sweep(0x00800000u, 0x7F000000u, 41, [](uint32_t u) {
    const float s = float_of(u);
    const float p = pow2_ceil(s);
    return p == e8m0_to_f32(f32_to_e8m0(s, E8m0Rounding::ceil)) && p >= s && p < 2 * s &&
           (bits_of(p) & 0x007FFFFFu) == 0;
  });
  EXPECT_EQ(bad, 0u);
}

// The table in pow2_ceil_log2f: floor((2^(2^(p-24)) - 1) * 2^23) in long double, for p = 1..7.
TEST(Minifloat, derivesTheLog2fRoundDownLimitsFromTheUlps) {
  const uint32_t limits[] = {0, 1, 2, 5, 11, 22, 44};
  for (int p = 1; p <= 7; ++p) {
    const long double t = std::expm1l(std::ldexp(1.0L, p - 24) * std::log(2.0L)) * std::ldexp(1.0L, 23);
    EXPECT_EQ(static_cast<uint32_t>(std::floor(t)), limits[p - 1]) << p;
    EXPECT_GT(t - std::floor(t), 0.05L) << p;  // never close to an integer
  }
}

// The class where exp2f(ceilf(log2f(s))) rounds down: for every exponent k of a positive f32 (the
// subnormal ones included), s = 2^k * (1 + j * 2^-23) for j = 0..128 and the 128 f32s below 2^k.
// pow2_ceil_log2f must equal the host libm on each, and differ from pow2_ceil exactly on 3,676
// normal and 24 subnormal inputs (of which 22 with k = 127, whose exact result is +Inf).
TEST(Minifloat, modelsExp2fCeilfLog2fExactlyOnItsRoundDownClass) {
  int normal = 0, subnormal = 0, at_127 = 0, checked = 0;
  std::vector<uint32_t> inputs;
  for (uint32_t e = 0; e <= 0xFE; ++e) {
    const uint32_t base = e << 23;
    for (uint32_t j = 0; j <= 128; ++j) inputs.push_back(base + j);
    for (uint32_t j = 1; j <= 128; ++j) if (base >= j) inputs.push_back(base - j);
  }
  for (int q = 0; q < 23; ++q) {  // subnormals m * 2^-149 with m = 2^q + r
    for (uint32_t r = 0; r <= 64 && r < (1u << q); ++r) inputs.push_back((1u << q) + r);
  }
  for (uint32_t u : inputs) {
    const float s = float_of(u);
    ASSERT_EQ(bits_of(pow2_ceil_log2f(s)), libm_pow2_ceil_bits(s)) << std::hex << "f32 0x" << u;
    ++checked;
  }
  // Count the class over every positive f32 that can be in it (f * 2^23 <= 44 above each power).
  for (uint32_t e = 0; e <= 0xFE; ++e) {
    for (uint32_t j = 1; j <= 64; ++j) {
      const uint32_t u = (e << 23) + j;
      if (e == 0 && j > 0) continue;  // subnormals below
      if (bits_of(pow2_ceil_log2f(float_of(u))) != bits_of(pow2_ceil(float_of(u)))) {
        ++normal;
        at_127 += e == 0xFE;
      }
    }
  }
  for (uint32_t m = 1; m < 0x800000u; ++m) {
    if (bits_of(pow2_ceil_log2f(float_of(m))) != bits_of(pow2_ceil(float_of(m)))) ++subnormal;
  }
  EXPECT_EQ(normal, 3676);
  EXPECT_EQ(at_127, 22);
  EXPECT_EQ(subnormal, 24);
  EXPECT_GT(checked, 255 * 256);
  // One member by hand: s = 2^70 * (1 + 22 * 2^-23); log2 s = 70 + 3.78e-6 rounds to 70 (half an ulp
  // at 70 is 2^-18 = 3.81e-6), so exp2f(ceilf(log2f(s))) = 2^70 < s. One more ulp leaves the class.
  EXPECT_EQ(pow2_ceil_log2f(float_of((197u << 23) + 22)), 0x1p70f);
  EXPECT_EQ(pow2_ceil_log2f(float_of((197u << 23) + 23)), 0x1p71f);
  EXPECT_EQ(pow2_ceil(float_of((197u << 23) + 22)), 0x1p71f);
  // Exact powers and the edges behave like pow2_ceil.
  EXPECT_EQ(pow2_ceil_log2f(0x1p-126f), 0x1p-126f);
  EXPECT_EQ(bits_of(pow2_ceil_log2f(0.0f)), 0u);
  EXPECT_TRUE(std::isnan(pow2_ceil_log2f(-2.0f)));
  EXPECT_EQ(pow2_ceil_log2f(float_of((254u << 23) + 1)), 0x1p127f);  // in the class: not +Inf
}

TEST(Minifloat, modelsExp2fCeilfLog2fOnAStridedSweepOfAllF32Patterns) {
  EXPECT_EQ(sweep(0, uint64_t{1} << 32, 4099, pow2_matches), 0u);
}

TEST(Minifloat, modelsExp2fCeilfLog2fOnAllNonNegativeF32Patterns) {
  if (!full_sweep_requested()) GTEST_SKIP() << "set KVFUZZ_FULL_SWEEP=1 for all 2^31 patterns";
  EXPECT_EQ(sweep(0, uint64_t{1} << 31, 1, pow2_matches), 0u);
}

}  // namespace
}  // namespace kvf::golden
