// convert_test.cpp — the golden model's software conversions against the CUDA toolkit's host-side
// conversions, and the kernel's own to_float/from_float against the golden model.
//
//   ctest --test-dir build -R 'Convert\.' --output-on-failure
//
// 16-bit inputs are checked exhaustively (all 65536 patterns); f32 inputs at every rounding
// boundary of both target formats (each representable value, each tie, tie +- 1 ulp, for every
// exponent including the subnormal range and the overflow threshold) plus millions of random
// patterns. Non-NaN results must match __half2float / __bfloat162float / __float2half_rn /
// __float2bfloat16_rn bit for bit; NaNs follow the contract (canonical NaN across dtypes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/rng.h"
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

// CUDA toolkit host-side references.
uint32_t cuda_f16_to_f32(uint16_t h) { return bits_of(__half2float(__ushort_as_half(h))); }
uint32_t cuda_bf16_to_f32(uint16_t b) { return bits_of(__bfloat162float(__ushort_as_bfloat16(b))); }
uint16_t cuda_f32_to_f16(uint32_t f) { return __half_as_ushort(__float2half_rn(float_of(f))); }
uint16_t cuda_f32_to_bf16(uint32_t f) { return __bfloat16_as_ushort(__float2bfloat16_rn(float_of(f))); }

bool f32_is_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// f32 inputs around every rounding boundary of a target format with `drop` discarded mantissa bits
// for normal results (13 for f16, 16 for bf16): for every f32 exponent and every discard width
// 1..23 (so the subnormal targets, where more bits are discarded, are covered too), the discarded
// bits take the patterns tie-1, tie, tie+1, 0, 1 and all-ones under several kept-bit patterns.
std::vector<uint32_t> boundary_inputs() {
  std::vector<uint32_t> out;
  const uint32_t kept_patterns[] = {0x0u, 0x1u, 0x2u, 0x3u, 0x555555u, 0x2AAAAAu, 0x7FFFFEu, 0x7FFFFFu};
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t exp = 0; exp <= 0xFF; ++exp) {
      for (int width = 1; width <= 23; ++width) {
        const uint32_t low_mask = (1u << width) - 1u;
        const uint32_t tie = 1u << (width - 1);
        for (uint32_t kept : kept_patterns) {
          const uint32_t high = (kept << width) & 0x7FFFFFu;
          for (uint32_t low : {tie - 1u, tie, tie + 1u, 0u, 1u, low_mask}) {
            out.push_back(sign | (exp << 23) | high | (low & low_mask));
          }
        }
      }
    }
  }
  return out;
}

// For every finite f16 value: the value itself, the midpoint to its upper neighbour (an exact
// tie; 65520 for the largest finite value, the overflow threshold) and the f32s one ulp around
// both. Covers every f16 rounding decision, normal and subnormal.
std::vector<uint32_t> f16_midpoints() {
  std::vector<uint32_t> out;
  for (uint32_t h = 0; h < 0x7C00u; ++h) {
    const double lo = f16_to_f32(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7C00u ? 65536.0 : f16_to_f32(static_cast<uint16_t>(h + 1));
    const uint32_t v = bits_of(static_cast<float>(lo));
    const uint32_t mid = bits_of(static_cast<float>((lo + hi) / 2));  // exact: 12 significant bits
    for (uint32_t sign : {0u, 0x80000000u}) {
      for (uint32_t u : {v, v + 1, mid - 1, mid, mid + 1}) out.push_back(sign | u);
      if (v != 0) out.push_back(sign | (v - 1));
    }
  }
  return out;
}

std::vector<uint32_t> specials() {
  return {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x00000001u, 0x80000001u, 0x007FFFFFu,
          0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u,
          0x33000000u, 0x33000001u, 0xB3000000u, 0x7F7F8000u, 0x7F7F7FFFu};
}

// Checks our f32 -> f16 and f32 -> bf16 against CUDA on one input; returns the number of mismatches.
int check_narrowing(uint32_t f) {
  int bad = 0;
  const uint16_t h = f32_to_f16_rne(float_of(f));
  const uint16_t b = f32_to_bf16_rne(float_of(f));
  if (f32_is_nan(f)) {
    bad += h != 0x7FFF;
    bad += b != 0x7FFF;
    bad += convert_bits(f, DType::f32, DType::f16) != 0x7FFFu;
    bad += convert_bits(f, DType::f32, DType::bf16) != 0x7FFFu;
  } else {
    bad += h != cuda_f32_to_f16(f);
    bad += b != cuda_f32_to_bf16(f);
    bad += convert_bits(f, DType::f32, DType::f16) != h;
    bad += convert_bits(f, DType::f32, DType::bf16) != b;
  }
  if (bad != 0) {
    ADD_FAILURE() << std::hex << "f32 0x" << f << ": ours f16 0x" << h << " bf16 0x" << b << ", cuda f16 0x"
                  << cuda_f32_to_f16(f) << " bf16 0x" << cuda_f32_to_bf16(f);
  }
  return bad;
}

TEST(Convert, widensEveryF16ExactlyLikeCuda) {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint32_t ours = bits_of(f16_to_f32(static_cast<uint16_t>(h)));
    if (is_nan_bits(h, DType::f16)) {
      ASSERT_TRUE(f32_is_nan(ours)) << std::hex << h;
      ASSERT_EQ(convert_bits(h, DType::f16, DType::f32), 0x7FFFFFFFu) << std::hex << h;
    } else {
      ASSERT_EQ(ours, cuda_f16_to_f32(static_cast<uint16_t>(h))) << std::hex << h;
      ASSERT_EQ(convert_bits(h, DType::f16, DType::f32), ours) << std::hex << h;
    }
  }
}

TEST(Convert, widensEveryBf16ExactlyLikeCuda) {
  for (uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const uint32_t ours = bits_of(bf16_to_f32(static_cast<uint16_t>(b)));
    if (is_nan_bits(b, DType::bf16)) {
      ASSERT_TRUE(f32_is_nan(ours)) << std::hex << b;
      ASSERT_EQ(convert_bits(b, DType::bf16, DType::f32), 0x7FFFFFFFu) << std::hex << b;
    } else {
      ASSERT_EQ(ours, cuda_bf16_to_f32(static_cast<uint16_t>(b))) << std::hex << b;
      ASSERT_EQ(convert_bits(b, DType::bf16, DType::f32), ours) << std::hex << b;
    }
  }
}

TEST(Convert, converts16BitTypesIntoEachOtherLikeCuda) {
  for (uint32_t x = 0; x <= 0xFFFFu; ++x) {
    const uint32_t h2b = convert_bits(x, DType::f16, DType::bf16);
    const uint32_t b2h = convert_bits(x, DType::bf16, DType::f16);
    if (is_nan_bits(x, DType::f16)) {
      ASSERT_EQ(h2b, 0x7FFFu) << std::hex << x;
    } else {
      ASSERT_EQ(h2b, __bfloat16_as_ushort(__float2bfloat16_rn(__half2float(__ushort_as_half(x))))) << std::hex << x;
    }
    if (is_nan_bits(x, DType::bf16)) {
      ASSERT_EQ(b2h, 0x7FFFu) << std::hex << x;
    } else {
      ASSERT_EQ(b2h, __half_as_ushort(__float2half_rn(__bfloat162float(__ushort_as_bfloat16(x))))) << std::hex << x;
    }
  }
}

TEST(Convert, narrowsAtEveryRoundingBoundaryLikeCuda) {
  int bad = 0;
  for (uint32_t f : boundary_inputs()) bad += check_narrowing(f);
  for (uint32_t f : f16_midpoints()) bad += check_narrowing(f);
  for (uint32_t f : specials()) bad += check_narrowing(f);
  // Every bf16 boundary: all upper halves with the discarded half below, at and above the tie.
  for (uint32_t hi = 0; hi <= 0xFFFFu; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) bad += check_narrowing(hi << 16 | lo);
    if (bad > 20) break;
  }
  EXPECT_EQ(bad, 0);
}

TEST(Convert, narrowsMillionsOfRandomF32LikeCuda) {
  SplitMix64 rng(0x600d5eedull);
  int bad = 0;
  for (int i = 0; i < 4'000'000 && bad <= 20; ++i) {
    const uint64_t r = rng.next();
    bad += check_narrowing(static_cast<uint32_t>(r));
    // Same mantissa, exponent within the f16 range (2^-26 .. 2^16), where f16 rounding happens.
    const uint32_t exp = 101u + static_cast<uint32_t>((r >> 32) % 43u);
    bad += check_narrowing((static_cast<uint32_t>(r) & 0x807FFFFFu) | (exp << 23));
  }
  EXPECT_EQ(bad, 0);
}

TEST(Convert, keepsSignedZerosAndSaturatesToInfinity) {
  EXPECT_EQ(f32_to_f16_rne(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_rne(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16_rne(1.5f), 0x3E00);
  EXPECT_EQ(f32_to_f16_rne(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_rne(65519.996f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_rne(65520.0f), 0x7C00);   // tie at the overflow threshold: rounds to even = Inf
  EXPECT_EQ(f32_to_f16_rne(-1e30f), 0xFC00);
  EXPECT_EQ(f32_to_f16_rne(0x1p-25f), 0x0000);    // tie between 0 and the smallest subnormal: even = 0
  EXPECT_EQ(f32_to_f16_rne(0x1.8p-25f), 0x0001);  // above the tie
  EXPECT_EQ(f32_to_f16_rne(0x3p-25f), 0x0002);    // tie between 1 and 2 subnormal units: even = 2
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F808000u)), 0x3F80);  // tie, kept mantissa even
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F818000u)), 0x3F82);  // tie, kept mantissa odd: up
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7FFFFFu)), 0x7F80);  // max finite f32 -> Inf
}

TEST(Convert, appliesTheContractNanRule) {
  // Equal dtypes: bit copies, NaN payloads (signalling or not) survive.
  EXPECT_EQ(convert_bits(0x7D01u, DType::f16, DType::f16), 0x7D01u);
  EXPECT_EQ(convert_bits(0xFF81u, DType::bf16, DType::bf16), 0xFF81u);
  EXPECT_EQ(convert_bits(0xFFA00001u, DType::f32, DType::f32), 0xFFA00001u);
  // Across dtypes: the target's canonical NaN, whatever sign and payload.
  for (DType from : {DType::f16, DType::bf16, DType::f32}) {
    for (DType to : {DType::f16, DType::bf16, DType::f32}) {
      if (from == to) continue;
      const uint32_t nans[] = {from == DType::f32 ? 0x7FA00001u : (from == DType::f16 ? 0x7D01u : 0x7F81u),
                               from == DType::f32 ? 0xFFC00000u : (from == DType::f16 ? 0xFE00u : 0xFFC0u),
                               from == DType::f32 ? 0xFFFFFFFFu : 0xFFFFu};
      for (uint32_t n : nans) {
        ASSERT_TRUE(is_nan_bits(n, from));
        EXPECT_EQ(convert_bits(n, from, to), canonical_nan_bits(to));
      }
    }
  }
  EXPECT_EQ(canonical_nan_bits(DType::f16), 0x7FFFu);
  EXPECT_EQ(canonical_nan_bits(DType::bf16), 0x7FFFu);
  EXPECT_EQ(canonical_nan_bits(DType::f32), 0x7FFFFFFFu);
  EXPECT_FALSE(is_nan_bits(0x7C00u, DType::f16));
  EXPECT_FALSE(is_nan_bits(0x7F80u, DType::bf16));
  EXPECT_FALSE(is_nan_bits(0x7F800000u, DType::f32));
}

// ---------------------------------------------------------------------------------------------
// The kernel's element conversion (kv_append.cuh, host side: what cuda-emu runs) must agree with
// the golden model bit for bit, or cuda-emu would report the golden model's own differences.

template <typename T>
T from_bits(uint32_t u) {
  if constexpr (std::is_same_v<T, float>) return float_of(u);
  else if constexpr (std::is_same_v<T, __half>) return __ushort_as_half(static_cast<unsigned short>(u));
  else return __ushort_as_bfloat16(static_cast<unsigned short>(u));
}
template <typename T>
uint32_t to_bits(T x) {
  if constexpr (std::is_same_v<T, float>) return bits_of(x);
  else if constexpr (std::is_same_v<T, __half>) return __half_as_ushort(x);
  else return __bfloat16_as_ushort(x);
}

// The body's conversion: equal types copy, others go through to_float / from_float (store_converted).
template <typename InT, typename CacheT>
uint32_t kernel_convert(uint32_t u) {
  const InT x = from_bits<InT>(u);
  if constexpr (std::is_same_v<InT, CacheT>) return to_bits<CacheT>(x);
  else return to_bits<CacheT>(kvf::from_float<CacheT>(kvf::to_float(x)));
}

template <typename InT>
int compare_kernel(uint32_t u, DType from) {
  int bad = 0;
  bad += kernel_convert<InT, __half>(u) != convert_bits(u, from, DType::f16);
  bad += kernel_convert<InT, __nv_bfloat16>(u) != convert_bits(u, from, DType::bf16);
  bad += kernel_convert<InT, float>(u) != convert_bits(u, from, DType::f32);
  if (bad != 0) ADD_FAILURE() << std::hex << "kernel conversion differs from golden for input 0x" << u;
  return bad;
}

TEST(Convert, agreesWithTheKernelsHostConversions) {
  int bad = 0;
  for (uint32_t x = 0; x <= 0xFFFFu && bad <= 20; ++x) {
    bad += compare_kernel<__half>(x, DType::f16);
    bad += compare_kernel<__nv_bfloat16>(x, DType::bf16);
  }
  for (uint32_t f : boundary_inputs()) bad += bad <= 20 ? compare_kernel<float>(f, DType::f32) : 0;
  for (uint32_t f : f16_midpoints()) bad += bad <= 20 ? compare_kernel<float>(f, DType::f32) : 0;
  SplitMix64 rng(0xabcdefull);
  for (int i = 0; i < 500'000 && bad <= 20; ++i) bad += compare_kernel<float>(static_cast<uint32_t>(rng.next()), DType::f32);
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace kvf::golden
