// cuda_host_convert_test.cpp — the host stand-ins of kvfuzz-libfuzzer's toolkit-free build
// (src/libfuzzer/cuda_host/) against the CUDA toolkit's own host conversions: every 16-bit input,
// every float whose low 13 bits are fixed patterns (all exponents and high mantissas), the fp8
// rounding ties and overflow boundaries, and NaN, ±Inf, ±0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "libfuzzer/cuda_host/cuda_host_convert.h"

namespace {

namespace ch = kvf::cuda_host;

uint16_t bits(__half h) { uint16_t b; std::memcpy(&b, &h, 2); return b; }
uint16_t bits(__nv_bfloat16 h) { uint16_t b; std::memcpy(&b, &h, 2); return b; }

// Floats to check: the 2^19 patterns with sign, exponent and the top 10 mantissa bits free and the
// low 13 bits one of four patterns (ties and near-ties of every narrower format), plus specials.
template <typename F>
void for_floats(F f) {
  const uint32_t lows[] = {0x0000, 0x1000, 0x0fff, 0x1fff, 0x0001};
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t low : lows) f(ch::bits_f32((high << 13) | low));
}

TEST(CudaHostConvert, halfAndBfloat16WideningMatchesTheToolkitForEveryCode) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float got = ch::from_16(static_cast<uint16_t>(c), ch::f16_format(), 0x7c00, 13);
    const float want = __half2float(__ushort_as_half(static_cast<unsigned short>(c)));
    if (want != want) {
      EXPECT_NE(got, got) << std::hex << c;
    } else {
      EXPECT_EQ(ch::f32_bits(got), ch::f32_bits(want)) << std::hex << c;
    }
    const __nv_bfloat16 b = __ushort_as_bfloat16(static_cast<unsigned short>(c));
    EXPECT_EQ(ch::f32_bits(__bfloat162float(b)), static_cast<uint32_t>(c) << 16) << std::hex << c;  // the stand-in's rule
  }
}

TEST(CudaHostConvert, narrowingToHalfAndBfloat16MatchesTheToolkit) {
  int64_t checked = 0;
  for_floats([&](float x) {
    ++checked;
    if (x != x) {  // the kernel maps NaN itself (canonical 0x7fff) before converting
      EXPECT_EQ(ch::to_16(x, ch::f16_format(), 0x7c00), 0x7fff);
      return;
    }
    ASSERT_EQ(ch::to_16(x, ch::f16_format(), 0x7c00), bits(__float2half_rn(x))) << std::hexfloat << x;
    ASSERT_EQ(ch::to_16(x, ch::bf16_format(), 0x7f80), bits(__float2bfloat16_rn(x))) << std::hexfloat << x;
  });
  EXPECT_GT(checked, 2'000'000);
}

TEST(CudaHostConvert, fp8MatchesTheToolkitWithAndWithoutSaturation) {
  for_floats([&](float x) {
    for (auto sat : {__NV_SATFINITE, __NV_NOSAT})
      for (auto kind : {__NV_E4M3, __NV_E5M2}) {
        const uint8_t want = __nv_cvt_float_to_fp8(x, sat, kind);
        const uint8_t got = ch::to_fp8(x, sat == __NV_SATFINITE ? ch::satfinite : ch::nosat, kind == __NV_E4M3 ? ch::e4m3 : ch::e5m2);
        ASSERT_EQ(got, want) << std::hexfloat << x << " sat " << sat << " kind " << kind;
      }
  });
}

}  // namespace
