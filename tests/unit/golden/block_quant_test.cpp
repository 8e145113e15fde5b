// block_quant_test.cpp — the golden model's block quantisers (golden/block_quant.h): cases worked
// out by hand from each convention's formula, and properties over random groups.
//
//   ctest --test-dir build -R 'BlockQuant\.' --output-on-failure
#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "golden/block_quant.h"
#include "values/convert.h"

namespace kvf::golden {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

template <std::size_t N>
std::array<float, N> filled(float v) {
  std::array<float, N> a;
  a.fill(v);
  return a;
}

// ---------------------------------------------------------------------------------------------
// NVFP4

TEST(BlockQuant, nvfp4StoresAZeroBlockAsZeros) {
  auto x = filled<16>(0.0f);
  x[3] = -0.0f;
  for (Nvfp4Rule rule : {Nvfp4Rule::flashinfer, Nvfp4Rule::flashinfer_precise}) {
    const Nvfp4Block b = quantize_nvfp4(x, 1.0f, rule);
    EXPECT_EQ(b.scale, 0x00);  // sf = 0
    // -0 * 0 = -0: code 0x8, element 3 is the high nibble of byte 1.
    for (int j = 0; j < 8; ++j) EXPECT_EQ(b.packed[j], j == 1 ? 0x80 : 0x00) << j;
  }
}

TEST(BlockQuant, nvfp4QuantisesAnAllEqualBlockByHand) {
  // amax 1, g 1: sf = 1/6 = 0.1666667 -> e4m3 1.375 * 2^-3 = 0.171875 (0x23; 1.333 is nearer 1.375
  // than 1.25); os = 1 / 0.171875 = 5.818182; 1 * os = 5.82 -> e2m1 6 (past the tie 5): code 0x7.
  const Nvfp4Block b = quantize_nvfp4(filled<16>(1.0f), 1.0f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(b.scale, 0x23);
  for (uint8_t byte : b.packed) EXPECT_EQ(byte, 0x77);
  const Nvfp4Block n = quantize_nvfp4(filled<16>(-1.0f), 1.0f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(n.scale, 0x23);  // the scale is positive
  for (uint8_t byte : n.packed) EXPECT_EQ(byte, 0xFF);
}

TEST(BlockQuant, nvfp4RoundsEveryE2m1TieAfterScalingToEvenInNibbleOrder) {
  // amax 6, g 1: sf = 1 exactly (e4m3 0x38), os = 1: the elements are encoded as they are. Element
  // 2j goes to the low nibble of byte j, 2j+1 to the high nibble.
  const std::array<float, 16> x = {6.0f,  0.25f,  0.75f,  1.25f,  1.75f,  2.5f,  3.5f,  5.0f,
                                   -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5.0f, -6.0f};
  // codes: 7 0 | 2 2 | 4 4 | 6 6 | 8 A | A C | C E | E F
  const std::array<uint8_t, 8> expected = {0x07, 0x22, 0x44, 0x66, 0xA8, 0xCA, 0xEC, 0xFE};
  for (Nvfp4Rule rule : {Nvfp4Rule::flashinfer, Nvfp4Rule::flashinfer_precise}) {
    const Nvfp4Block b = quantize_nvfp4(x, 1.0f, rule);
    EXPECT_EQ(b.scale, 0x38);
    EXPECT_EQ(b.packed, expected);
  }
}

TEST(BlockQuant, nvfp4IgnoresNanInAmaxAndStoresNanAsPositiveZero) {
  // NaN does not enter amax (1, as the all-equal block); a NaN element's product is the GPU's
  // canonical +NaN, which FlashInfer's encoder stores as magnitude 0 with sign 0, for either
  // input sign.
  auto x = filled<16>(1.0f);
  x[0] = kNan;
  x[1] = -kNan;
  const Nvfp4Block b = quantize_nvfp4(x, 1.0f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(b.scale, 0x23);
  EXPECT_EQ(b.packed[0], 0x00);
  for (int j = 1; j < 8; ++j) EXPECT_EQ(b.packed[j], 0x77);
  // All NaN: amax 0 -> scale 0, os 0, NaN * 0 = NaN -> 0x0.
  const Nvfp4Block all = quantize_nvfp4(filled<16>(-kNan), 1.0f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(all.scale, 0x00);
  for (uint8_t byte : all.packed) EXPECT_EQ(byte, 0x00);
}

// A signalling NaN is ignored like a quiet one (CUDA's fmaxf, Triton's max): glibc's std::fmax
// would return a NaN for it and restart the maximum at the next element.
TEST(BlockQuant, amaxIgnoresSignallingNans) {
  uint32_t snan_bits = 0x7FA00001u;
  float snan;
  std::memcpy(&snan, &snan_bits, sizeof snan);
  auto x = filled<32>(0.5f);
  x[3] = 6.0e6f;  // the amax, before the signalling NaN
  x[7] = snan;
  const MxBlock b = quantize_mx(x, MxElement::fp8_e4m3, MxScaleRule::ocp_floor);
  EXPECT_EQ(b.scale, 127 + 22 - 8);  // floor(log2 6e6) = 22, emax 8
  auto n = filled<16>(1.0f);
  n[0] = 3.0f;
  n[1] = snan;
  EXPECT_EQ(quantize_nvfp4(n, 1.0f, Nvfp4Rule::flashinfer).scale, quantize_nvfp4(n, 1.0f, Nvfp4Rule::flashinfer).scale);
  n[1] = 1.0f;
  const uint8_t without = quantize_nvfp4(n, 1.0f, Nvfp4Rule::flashinfer).scale;
  n[1] = snan;
  EXPECT_EQ(quantize_nvfp4(n, 1.0f, Nvfp4Rule::flashinfer).scale, without);
  // LMDeploy's min and max skip it too, and keep the first of +0 and -0 (fminf's choice).
  const std::vector<float> r = {snan, 2.0f, -0.0f, 0.0f, snan, 7.0f};
  const AsymGroup g = quantize_asym_int8(r, AsymArith::f32, AsymLanes::exact);
  EXPECT_EQ(bits_of(g.zero), 0x00000000u);  // min -0 (the first zero): zero = -(-0) / scale = +0
  EXPECT_EQ(g.scale, 7.0f / 255.0f);
}

TEST(BlockQuant, nvfp4SaturatesTheScaleOnInfinity) {
  // amax Inf: sf = Inf -> e4m3 saturates to 448 (0x7E); os = 1/448; ±Inf * os = ±Inf -> ±6;
  // 1/448 -> 0.
  auto x = filled<16>(0.0f);
  x[0] = kInf;
  x[1] = -kInf;
  x[2] = 1.0f;
  const Nvfp4Block b = quantize_nvfp4(x, 1.0f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(b.scale, 0x7E);
  EXPECT_EQ(b.packed[0], 0xF7);
  EXPECT_EQ(b.packed[1], 0x00);
}

TEST(BlockQuant, nvfp4FlushesABlockWhoseScaleUnderflowsAndOverflowsOsWithATinyGlobalScale) {
  // Subnormal inputs, g 2^-120: sf = 2^-130 / (6 * 2^-120) = 1.6e-4 < 2^-10 (half e4m3's smallest
  // subnormal) -> 0x00, os 0: every code 0.
  const Nvfp4Block flushed = quantize_nvfp4(filled<16>(0x1p-130f), 0x1p-120f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(flushed.scale, 0x00);
  for (uint8_t byte : flushed.packed) EXPECT_EQ(byte, 0x00);
  // g 2^-127 (subnormal): sf = 2^-130 / (1.5 * 2^-125) = 0.0208 -> e4m3 0.021484375 (0x0B);
  // e4m3 * g is 1.26e-40 and os = 1 / 1.26e-40 overflows to +Inf: 2^-130 * Inf = Inf -> 6, and
  // 0 * Inf = NaN -> 0 (canonical NaN, positive).
  auto x = filled<16>(0.0f);
  x[0] = 0x1p-130f;
  x[1] = -0x1p-130f;
  const Nvfp4Block b = quantize_nvfp4(x, 0x1p-127f, Nvfp4Rule::flashinfer);
  EXPECT_EQ(b.scale, 0x0B);
  EXPECT_EQ(b.packed[0], 0xF7);
  for (int j = 1; j < 8; ++j) EXPECT_EQ(b.packed[j], 0x00);
}

TEST(BlockQuant, nvfp4PreciseRoundingMultipliesByTheRoundedReciprocal) {
  // g 5: 6g = 30; amax 19.6875: the division gives 0.65625 exactly, the tie between e4m3 0.625
  // (0x32) and 0.6875 (0x33), which goes to even 0x32; RN(1/30) * 19.6875 = 0.65625006 -> 0x33.
  auto x = filled<16>(1.0f);
  x[5] = 19.6875f;
  const Nvfp4Block div = quantize_nvfp4(x, 5.0f, Nvfp4Rule::flashinfer);
  const Nvfp4Block rcp = quantize_nvfp4(x, 5.0f, Nvfp4Rule::flashinfer_precise);
  EXPECT_EQ(div.scale, 0x32);
  EXPECT_EQ(rcp.scale, 0x33);
  // os = 1 / (0.625 * 5) = 0.32 | 1 / (0.6875 * 5) = 0.2909: 19.6875 -> 6.3 | 5.73, both 6 (0x7);
  // 1 -> 0.32 | 0.29, both 0.5 (0x1).
  EXPECT_EQ(div.packed[2], 0x71);
  EXPECT_EQ(rcp.packed[2], 0x71);
  EXPECT_EQ(div.packed[0], 0x11);
  EXPECT_EQ(to_string(Nvfp4Rule::flashinfer_precise), "flashinfer_precise");
}

TEST(BlockQuant, nvfp4MapsTheAmaxElementToSixWheneverTheScaleIsAnE4m3Normal) {
  std::mt19937 rng(15);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int trial = 0; trial < 20000; ++trial) {
    std::array<float, 16> x;
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    for (float& v : x) v = unit(rng) * magnitude;
    const float g = std::ldexp(1.0f + unit(rng) / 2, exponent(rng) / 3);
    for (Nvfp4Rule rule : {Nvfp4Rule::flashinfer, Nvfp4Rule::flashinfer_precise}) {
      const Nvfp4Block b = quantize_nvfp4(x, g, rule);
      ASSERT_LE(b.scale, 0x7E);  // never NaN, never negative
      int imax = 0;
      for (int i = 1; i < 16; ++i) if (std::fabs(x[i]) > std::fabs(x[imax])) imax = i;
      const uint8_t code = (b.packed[imax / 2] >> (4 * (imax % 2))) & 0xF;
      if (b.scale >= 0x08) {
        ASSERT_EQ(code & 0x7, 0x7) << trial;  // e4m3 normal: relative error <= 1/16
      }
      // Each element: its code is the e2m1 value nearest to x * os (os recomputed from the stored
      // scale as the rule says), checked against all 16 codes.
      const float os = 1.0f / (fp8_e4m3_to_f32(b.scale) * g);
      for (int i = 0; i < 16 && b.scale != 0; ++i) {
        const uint8_t c = (b.packed[i / 2] >> (4 * (i % 2))) & 0xF;
        const double target = static_cast<double>(x[i] * os);
        for (uint8_t other = 0; other < 16; ++other) {
          ASSERT_LE(std::fabs(fp4_e2m1_to_f32(c) - target), std::fabs(fp4_e2m1_to_f32(other) - target) + 1e-12)
              << trial << " element " << i;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MX

TEST(BlockQuant, mxComputesTheSharedExponentByHand) {
  auto x = filled<32>(0.0f);
  x[0] = 448.0f;
  x[1] = 1.0f;
  // e4m3, amax 448: floor(log2 448) - 8 = 0 and ceil(log2(448 / 448)) = 0: X = 1 (0x7F).
  for (MxScaleRule rule : {MxScaleRule::ocp_floor, MxScaleRule::nv_ceil}) {
    const MxBlock b = quantize_mx(x, MxElement::fp8_e4m3, rule);
    EXPECT_EQ(b.scale, 0x7F) << to_string(rule);
    EXPECT_EQ(b.codes.size(), 32u);
    EXPECT_EQ(b.codes[0], 0x7E);
    EXPECT_EQ(b.codes[1], 0x38);
  }
  // amax 500: the spec keeps X = 1 (floor(log2 500) = 8) and saturates 500 to 448; nv_ceil takes
  // ceil(log2(500/448)) = 1, X = 2: 250 -> e4m3 256 (0x78), 1 -> 0.5 (0x30).
  x[0] = 500.0f;
  const MxBlock ocp = quantize_mx(x, MxElement::fp8_e4m3, MxScaleRule::ocp_floor);
  EXPECT_EQ(ocp.scale, 0x7F);
  EXPECT_EQ(ocp.codes[0], 0x7E);
  const MxBlock nv = quantize_mx(x, MxElement::fp8_e4m3, MxScaleRule::nv_ceil);
  EXPECT_EQ(nv.scale, 0x80);
  EXPECT_EQ(nv.codes[0], 0x78);
  EXPECT_EQ(nv.codes[1], 0x30);
  // amax exactly 448 * 2^-20: both give X = 2^-20 (0x6B), amax -> 448.
  x[0] = 448.0f * 0x1p-20f;
  x[1] = -0x1p-20f;
  for (MxScaleRule rule : {MxScaleRule::ocp_floor, MxScaleRule::nv_ceil}) {
    const MxBlock b = quantize_mx(x, MxElement::fp8_e4m3, rule);
    EXPECT_EQ(b.scale, 0x6B);
    EXPECT_EQ(b.codes[0], 0x7E);
    EXPECT_EQ(b.codes[1], 0xB8);  // -1.0
  }
  // e5m2, amax 65535: ocp X = 1, 65535 saturates to 57344 (0x7B), never Inf; nv_ceil X = 2:
  // 32767.5 -> 32768 (0x78).
  x[0] = 65535.0f;
  EXPECT_EQ(quantize_mx(x, MxElement::fp8_e5m2, MxScaleRule::ocp_floor).codes[0], 0x7B);
  const MxBlock e5 = quantize_mx(x, MxElement::fp8_e5m2, MxScaleRule::nv_ceil);
  EXPECT_EQ(e5.scale, 0x80);
  EXPECT_EQ(e5.codes[0], 0x78);
}

TEST(BlockQuant, mxfp4PacksTwoCodesPerByteAndSaturatesUnderTheSpecRule) {
  auto x = filled<32>(0.0f);
  x[0] = 7.0f;
  x[1] = -1.0f;
  x[31] = 3.0f;
  // ocp: floor(log2 7) - 2 = 0, X = 1: 7 saturates to 6 (0x7), -1 -> 0xA; byte 0 = 0xA7.
  const MxBlock ocp = quantize_mx(x, MxElement::fp4_e2m1, MxScaleRule::ocp_floor);
  EXPECT_EQ(ocp.scale, 0x7F);
  ASSERT_EQ(ocp.codes.size(), 16u);
  EXPECT_EQ(ocp.codes[0], 0xA7);
  EXPECT_EQ(ocp.codes[15], 0x50);  // element 31 (3.0, code 5) in the high nibble of byte 15
  // nv_ceil: ceil(log2(7/6)) = 1, X = 2: 3.5 is the tie 3 | 4 -> 4 (0x6); -0.5 -> 0x9.
  const MxBlock nv = quantize_mx(x, MxElement::fp4_e2m1, MxScaleRule::nv_ceil);
  EXPECT_EQ(nv.scale, 0x80);
  EXPECT_EQ(nv.codes[0], 0x96);
  EXPECT_EQ(nv.codes[15], 0x30);  // 1.5: code 3
}

TEST(BlockQuant, mxHandlesZeroNanAndInfinityBlocks) {
  for (MxScaleRule rule : {MxScaleRule::ocp_floor, MxScaleRule::nv_ceil}) {
    auto x = filled<32>(0.0f);
    x[1] = -0.0f;
    const MxBlock zero = quantize_mx(x, MxElement::fp8_e4m3, rule);
    EXPECT_EQ(zero.scale, 0x00);  // E = -127
    EXPECT_EQ(zero.codes[0], 0x00);
    EXPECT_EQ(zero.codes[1], 0x80);
    EXPECT_EQ(quantize_mx(x, MxElement::fp4_e2m1, rule).codes[0], 0x80);
    // NaN: ignored by amax, its own code NaN (e4m3 0x7F; e2m1 +6 under CUDA's policy).
    x[0] = 448.0f;
    x[2] = -kNan;
    const MxBlock nan = quantize_mx(x, MxElement::fp8_e4m3, rule);
    EXPECT_EQ(nan.scale, 0x7F);
    EXPECT_EQ(nan.codes[2], 0x7F);
    EXPECT_EQ(quantize_mx(x, MxElement::fp4_e2m1, rule).codes[1], 0x07);
    // Inf: E clamps to 127 (0xFE); Inf saturates; finite values vanish.
    x[2] = -kInf;
    const MxBlock inf = quantize_mx(x, MxElement::fp8_e5m2, rule);
    EXPECT_EQ(inf.scale, 0xFE);
    EXPECT_EQ(inf.codes[2], 0xFB);
    EXPECT_EQ(inf.codes[0], 0x00);
    // All NaN: amax 0.
    const MxBlock all = quantize_mx(filled<32>(kNan), MxElement::fp8_e4m3, rule);
    EXPECT_EQ(all.scale, 0x00);
    EXPECT_EQ(all.codes[0], 0x7F);
  }
}

double element_value(uint8_t code, MxElement e) {
  switch (e) {
    case MxElement::fp8_e4m3: return fp8_e4m3_to_f32(code);
    case MxElement::fp8_e5m2: return fp8_e5m2_to_f32(code);
    case MxElement::fp4_e2m1: return fp4_e2m1_to_f32(code);
  }
  return 0;
}

// Random groups over 2^-40 .. 2^40 (values, subnormal scaled results included): the scale lands
// in the window each rule promises, no code is NaN or Inf, and every code is the element value
// nearest to x / X among all finite element values (saturation included): decode(encode(x)) is
// within half a step.
TEST(BlockQuant, mxScalesLandInTheirWindowAndCodesAreNearest) {
  std::mt19937 rng(32);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  for (MxElement e : {MxElement::fp8_e4m3, MxElement::fp8_e5m2, MxElement::fp4_e2m1}) {
    const bool fp4 = e == MxElement::fp4_e2m1;
    const int emax = e == MxElement::fp8_e4m3 ? 8 : (e == MxElement::fp8_e5m2 ? 15 : 2);
    const double qmax = e == MxElement::fp8_e4m3 ? 448 : (e == MxElement::fp8_e5m2 ? 57344 : 6);
    std::vector<uint8_t> finite_codes;
    for (int c = 0; c < (fp4 ? 16 : 256); ++c) {
      if (std::isfinite(element_value(static_cast<uint8_t>(c), e))) finite_codes.push_back(static_cast<uint8_t>(c));
    }
    for (MxScaleRule rule : {MxScaleRule::ocp_floor, MxScaleRule::nv_ceil}) {
      for (int trial = 0; trial < 3000; ++trial) {
        std::array<float, 32> x;
        const int base = exponent(rng);
        for (float& v : x) v = unit(rng) * std::ldexp(1.0f, base - static_cast<int>(rng() % 6));
        const MxBlock b = quantize_mx(x, e, rule);
        double amax = 0;
        for (float v : x) amax = std::fmax(amax, std::fabs(static_cast<double>(v)));
        const double scale = std::ldexp(1.0, b.scale - 127);
        ASSERT_NE(b.scale, 0xFF);
        if (rule == MxScaleRule::ocp_floor) {
          ASSERT_GE(amax / scale, std::ldexp(1.0, emax));
          ASSERT_LT(amax / scale, std::ldexp(1.0, emax + 1));
        } else {
          ASSERT_GT(amax / scale, qmax / 2);
          ASSERT_LE(amax / scale, qmax * (1 + 0x1p-23));
        }
        for (int i = 0; i < 32; ++i) {
          const uint8_t c = fp4 ? (b.codes[i / 2] >> (4 * (i % 2))) & 0xF : b.codes[i];
          const double v = element_value(c, e);
          ASSERT_TRUE(std::isfinite(v)) << trial;
          ASSERT_LE(std::fabs(v), qmax);
          const double target = x[i] / scale;  // exact in double
          for (uint8_t other : finite_codes) {
            ASSERT_LE(std::fabs(v - target), std::fabs(element_value(other, e) - target))
                << to_string(e) << " " << to_string(rule) << " trial " << trial << " element " << i;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ds_mla and indexer_k tiles

TEST(BlockQuant, dsMlaTilesByHand) {
  std::vector<float> x(kDsMlaTile, 0.0f);
  // Zero tile: FLT_MIN | 1e-4 rounded up to 2^-13; codes 0.
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::flt_min).scale, FLT_MIN);
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::pow2).scale, 0x1p-13f);
  for (uint8_t c : quantize_ds_mla_tile(x, DsMlaScale::pow2).codes) EXPECT_EQ(c, 0x00);
  // amax 336: amax/448 = 0.75. flt_min: s = 0.75, 336/0.75 = 448 (0x7E); pow2: s = 1, 336 is the
  // e4m3 tie 320 | 352 -> 320 (0x7A, even mantissa).
  x[7] = -336.0f;
  x[8] = 1.0f;
  const Fp8Tile raw = quantize_ds_mla_tile(x, DsMlaScale::flt_min);
  EXPECT_EQ(raw.scale, 0.75f);
  EXPECT_EQ(raw.codes[7], 0xFE);
  const Fp8Tile p2 = quantize_ds_mla_tile(x, DsMlaScale::pow2);
  EXPECT_EQ(p2.scale, 1.0f);
  EXPECT_EQ(p2.codes[7], 0xFA);
  EXPECT_EQ(p2.codes[8], 0x38);
  // amax exactly 448 * 2^-3: both s = 2^-3, amax -> 448.
  x[7] = 56.0f;
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::flt_min).scale, 0.125f);
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::pow2).scale, 0.125f);
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::pow2).codes[7], 0x7E);
  // Small tiles hit the 1e-4 floor of the pow2 rule: amax 448 * 2^-20 -> s = 2^-13, codes x * 2^13.
  x[7] = 448.0f * 0x1p-20f;
  x[8] = 0x1p-13f;
  const Fp8Tile small = quantize_ds_mla_tile(x, DsMlaScale::pow2);
  EXPECT_EQ(small.scale, 0x1p-13f);
  EXPECT_EQ(small.codes[8], 0x38);
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::flt_min).scale, 0x1p-20f);
  // NaN ignored by amax, coded 0x7F; Inf makes s = Inf: finite values -> 0, Inf / Inf = NaN -> 0x7F.
  x[9] = kNan;
  EXPECT_EQ(quantize_ds_mla_tile(x, DsMlaScale::flt_min).codes[9], 0x7F);
  x[10] = kInf;
  const Fp8Tile inf = quantize_ds_mla_tile(x, DsMlaScale::pow2);
  EXPECT_EQ(inf.scale, kInf);
  EXPECT_EQ(inf.codes[10], 0x7F);
  EXPECT_EQ(inf.codes[8], 0x00);
}

TEST(BlockQuant, indexerTilesByHand) {
  std::vector<float> x(kIndexerTile, 0.0f);
  // Zero tile: 1e-4 / 448 = 2.2321e-7 (f32 0x346FACAD); ue8m0 rounds it up to 2^-22.
  EXPECT_EQ(bits_of(quantize_indexer_tile(x, IndexerScale::fp32).scale), 0x346FACADu);
  EXPECT_EQ(quantize_indexer_tile(x, IndexerScale::ue8m0_exact).scale, 0x1p-22f);
  EXPECT_EQ(quantize_indexer_tile(x, IndexerScale::ue8m0_log2f).scale, 0x1p-22f);
  // amax 1.75 * 2^78 + 2^56 (f32 input): s = amax / 448 rounds to 2^70 * (1 + 2^-23) (0x62800001),
  // inside exp2f(ceilf(log2f(s)))'s round-down class: log2f gives 2^70 (amax / 2^70 = 448.0001
  // -> 448, 0x7E), the exact rule 2^71 (amax -> 224, 0x76).
  x[0] = 0x1.c00004p78f;  // 1.75 * 2^78 + 2^56
  EXPECT_EQ(bits_of(quantize_indexer_tile(x, IndexerScale::fp32).scale), 0x62800001u);
  const Fp8Tile log2f = quantize_indexer_tile(x, IndexerScale::ue8m0_log2f);
  const Fp8Tile exact = quantize_indexer_tile(x, IndexerScale::ue8m0_exact);
  EXPECT_EQ(log2f.scale, 0x1p70f);
  EXPECT_EQ(exact.scale, 0x1p71f);
  EXPECT_EQ(log2f.codes[0], 0x7E);
  EXPECT_EQ(exact.codes[0], 0x76);  // 224 = 1.75 * 2^7
  // The floor is on amax, not on the scale: amax 2e-4 > 1e-4 -> s = 2e-4 / 448.
  x[0] = 2e-4f;
  EXPECT_EQ(quantize_indexer_tile(x, IndexerScale::fp32).scale, 2e-4f / 448.0f);
  EXPECT_EQ(quantize_indexer_tile(x, IndexerScale::fp32).codes[0], 0x7E);
  EXPECT_EQ(to_string(IndexerScale::ue8m0_log2f), "ue8m0_log2f");
}

TEST(BlockQuant, fp8TilesMapAmaxToTheTopCodeAndEveryCodeIsNearest) {
  std::mt19937 rng(128);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<float> x(128);
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    for (float& v : x) v = unit(rng) * magnitude;
    const auto check = [&](const Fp8Tile& t, bool power_of_two) {
      if (power_of_two) {
        ASSERT_EQ(bits_of(t.scale) & 0x007FFFFFu, 0u);
      }
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_LE(t.codes[i] & 0x7Fu, 0x7Eu);
        // Nearer to the fp32 quotient than both neighbouring codes (same sign; NaN codes skipped).
        const double target = static_cast<double>(x[i] / t.scale);
        const double v = fp8_e4m3_to_f32(t.codes[i]);
        const uint8_t sign = t.codes[i] & 0x80u, magnitude = t.codes[i] & 0x7Fu;
        for (int d : {-1, 1}) {
          const int neighbour = magnitude + d;
          if (neighbour < 0 || neighbour > 0x7E) continue;
          ASSERT_LE(std::fabs(v - target), std::fabs(fp8_e4m3_to_f32(static_cast<uint8_t>(sign | neighbour)) - target));
        }
      }
    };
    check(quantize_ds_mla_tile(x, DsMlaScale::flt_min), false);
    check(quantize_ds_mla_tile(x, DsMlaScale::pow2), true);
    check(quantize_indexer_tile(x, IndexerScale::fp32), false);
    check(quantize_indexer_tile(x, IndexerScale::ue8m0_exact), true);
    check(quantize_indexer_tile(x, IndexerScale::ue8m0_log2f), true);
    // Without a floor in play, the raw scale sends amax to ±448 exactly.
    const Fp8Tile raw = quantize_ds_mla_tile(x, DsMlaScale::flt_min);
    int imax = 0;
    for (int i = 1; i < 128; ++i) if (std::fabs(x[i]) > std::fabs(x[imax])) imax = i;
    ASSERT_EQ(raw.codes[imax] & 0x7F, 0x7E) << trial;
  }
}

// ---------------------------------------------------------------------------------------------
// Asymmetric int8 / int4

TEST(BlockQuant, asymInt8RoundsHalfUpFromTheMinimumByHand) {
  // min -2, max 508: scale 510 / 255 = 2, zero 2 / 2 = 1; q = trunc(x / 2 + 1.5):
  // -2 -> 0, 508 -> 255, 0 -> 1, 1 -> 2, 3 -> 3 ((3 - min) / 2 = 2.5 rounds up, not to even).
  const std::vector<float> x = {-2.0f, 508.0f, 0.0f, 1.0f, 3.0f};
  for (AsymLanes lanes : {AsymLanes::exact, AsymLanes::zero_padded_pow2}) {  // 0 is inside [min, max]
    const AsymGroup g = quantize_asym_int8(x, AsymArith::f32, lanes);
    EXPECT_TRUE(g.defined);
    EXPECT_EQ(g.scale, 2.0f);
    EXPECT_EQ(g.zero, 1.0f);
    EXPECT_EQ(g.codes, (std::vector<uint8_t>{0, 255, 1, 2, 3}));
  }
}

TEST(BlockQuant, asymInt8ZeroPaddedLanesPullTheMinimumToZero) {
  // {1, 3, 4}: exact: scale 3/255, zero -85: codes 0, 170 (170.5 truncated), 255.
  // Loaded as 4 lanes with a 0 (LMDeploy #4849's pattern): min 0, scale 4/255, zero 0:
  // 1 -> 63.75 + 0.5 -> 64, 3 -> 191.75 -> 191, 4 -> 255.5 -> 255.
  const std::vector<float> x = {1.0f, 3.0f, 4.0f};
  const AsymGroup exact = quantize_asym_int8(x, AsymArith::f32, AsymLanes::exact);
  const AsymGroup padded = quantize_asym_int8(x, AsymArith::f32, AsymLanes::zero_padded_pow2);
  EXPECT_EQ(exact.codes, (std::vector<uint8_t>{0, 170, 255}));
  EXPECT_EQ(padded.codes, (std::vector<uint8_t>{64, 191, 255}));
  EXPECT_EQ(padded.scale, 4.0f / 255.0f);
  EXPECT_EQ(padded.zero, 0.0f);
  // A power-of-two width has no masked lanes.
  const std::vector<float> four = {1.0f, 3.0f, 4.0f, 2.0f};
  EXPECT_EQ(quantize_asym_int8(four, AsymArith::f32, AsymLanes::zero_padded_pow2).codes,
            quantize_asym_int8(four, AsymArith::f32, AsymLanes::exact).codes);
}

TEST(BlockQuant, asymInt8InTheInputPrecisionRoundsEveryStep) {
  // {3.25, 3, 4.75, 4.5}: min 3, max 4.75, max - min = 1.75 exactly.
  // f32:  scale 0.006862745, zero -437.14285; 4.5 -> 655.71 - 437.14 + 0.5 = 219.07 -> 219.
  // f16:  scale 0.00686264, zero -437.25 (f16 step 0.25 there); 4.5 / s = 655.72 -> 655.5 (step 0.5)
  //       -> 218.25 -> 218.75 -> 218.
  // bf16: scale 0.0068665, zero -436; 4.75 -> 256: past the uint8 range, undefined.
  const std::vector<float> x = {3.25f, 3.0f, 4.75f, 4.5f};
  const AsymGroup f32 = quantize_asym_int8(x, AsymArith::f32, AsymLanes::exact);
  const AsymGroup f16 = quantize_asym_int8(x, AsymArith::f16, AsymLanes::exact);
  const AsymGroup bf16 = quantize_asym_int8(x, AsymArith::bf16, AsymLanes::exact);
  EXPECT_EQ(f32.codes, (std::vector<uint8_t>{36, 0, 255, 219}));
  EXPECT_EQ(f16.codes, (std::vector<uint8_t>{36, 0, 255, 218}));
  EXPECT_EQ(f16.zero, -437.25f);
  EXPECT_TRUE(f32.defined && f16.defined);
  EXPECT_FALSE(bf16.defined);
  EXPECT_EQ(bf16.zero, -436.0f);
}

TEST(BlockQuant, asymLeavesConstantAndNonFiniteGroupsUndefined) {
  EXPECT_FALSE(quantize_asym_int8(std::vector<float>{3.0f, 3.0f, 3.0f}, AsymArith::f32, AsymLanes::exact).defined);
  EXPECT_FALSE(quantize_asym_int8(std::vector<float>{0.0f, 0.0f}, AsymArith::f32, AsymLanes::exact).defined);
  EXPECT_FALSE(quantize_asym_int8(std::vector<float>{1.0f, kNan}, AsymArith::f32, AsymLanes::exact).defined);
  EXPECT_FALSE(quantize_asym_int8(std::vector<float>{1.0f, -kInf}, AsymArith::f32, AsymLanes::exact).defined);
  EXPECT_FALSE(quantize_asym_int4(std::vector<float>{2.0f, 2.0f}, Int4Pairing::split_half, AsymLanes::exact).defined);
  // max - min overflows f16.
  EXPECT_FALSE(quantize_asym_int8(std::vector<float>{-60000.0f, 60000.0f}, AsymArith::f16, AsymLanes::exact).defined);
  // A constant group with padded lanes is no longer constant (LMDeploy's bug hides it).
  EXPECT_TRUE(
      quantize_asym_int8(std::vector<float>{3.0f, 3.0f, 3.0f}, AsymArith::f32, AsymLanes::zero_padded_pow2).defined);
}

TEST(BlockQuant, asymInt4PairsNibblesAndPadsHalvesByHand) {
  // D 6: min 1, max 16 -> scale 1, zero -1, q = x - 1: {0, 1, 2, 3, 4, 15}.
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 16.0f};
  const AsymGroup split = quantize_asym_int4(x, Int4Pairing::split_half, AsymLanes::exact);
  EXPECT_EQ(split.scale, 1.0f);
  EXPECT_EQ(split.codes, (std::vector<uint8_t>{0x30, 0x41, 0xF2}));  // byte d = q[d] | q[d + 3] << 4
  const AsymGroup adjacent = quantize_asym_int4(x, Int4Pairing::adjacent, AsymLanes::exact);
  EXPECT_EQ(adjacent.codes, (std::vector<uint8_t>{0x10, 0x32, 0xF4}));  // byte j = q[2j] | q[2j+1] << 4
  // D/2 = 3 is not a power of two: each half is loaded as 4 lanes, the fourth reads 0 (#4849):
  // min 0, scale 16/15, zero 0: {1, 2, 3, 4, 5, 15}.
  const AsymGroup padded = quantize_asym_int4(x, Int4Pairing::split_half, AsymLanes::zero_padded_pow2);
  EXPECT_EQ(padded.zero, 0.0f);
  EXPECT_EQ(padded.codes, (std::vector<uint8_t>{0x41, 0x52, 0xF3}));
  // D 8 (halves of 4): nothing padded.
  const std::vector<float> y = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 16.0f};
  EXPECT_EQ(quantize_asym_int4(y, Int4Pairing::split_half, AsymLanes::zero_padded_pow2).codes,
            quantize_asym_int4(y, Int4Pairing::split_half, AsymLanes::exact).codes);
  EXPECT_EQ(to_string(Int4Pairing::split_half), "split_half");
  EXPECT_EQ(to_string(AsymLanes::zero_padded_pow2), "zero_padded_pow2");
}

// Random f32 groups: defined, codes within [0, qmax], min -> 0, max -> qmax, and dequantising
// (q - zero) * scale lands within half a step (plus rounding slack) of x.
TEST(BlockQuant, asymCodesSpanTheRangeAndDequantiseWithinHalfAStep) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<float> x(2 * (4 + rng() % 64));
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    const float offset = unit(rng) * magnitude * 2;
    for (float& v : x) v = offset + unit(rng) * magnitude;
    std::size_t imin = 0, imax = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] < x[imin]) imin = i;
      if (x[i] > x[imax]) imax = i;
    }
    if (x[imin] == x[imax]) continue;
    const AsymGroup g8 = quantize_asym_int8(x, AsymArith::f32, AsymLanes::exact);
    ASSERT_TRUE(g8.defined) << trial;
    ASSERT_EQ(g8.codes[imin], 0);
    ASSERT_EQ(g8.codes[imax], 255);
    const AsymGroup g4 = quantize_asym_int4(x, Int4Pairing::adjacent, AsymLanes::exact);
    ASSERT_TRUE(g4.defined) << trial;
    ASSERT_EQ((g4.codes[imin / 2] >> (4 * (imin % 2))) & 0xF, 0);
    ASSERT_EQ((g4.codes[imax / 2] >> (4 * (imax % 2))) & 0xF, 15);
    for (std::size_t i = 0; i < x.size(); ++i) {
      // Slack: the fp32 roundings of x / scale and of zero, relative to |zero| + qmax.
      const double d8 = (g8.codes[i] - static_cast<double>(g8.zero)) * g8.scale;
      ASSERT_LE(std::fabs(d8 - x[i]), g8.scale * (0.5 + 0x1p-20 * (std::fabs(g8.zero) + 256))) << trial << " " << i;
      const int q4 = (g4.codes[i / 2] >> (4 * (i % 2))) & 0xF;
      const double d4 = (q4 - static_cast<double>(g4.zero)) * g4.scale;
      ASSERT_LE(std::fabs(d4 - x[i]), g4.scale * (0.5 + 0x1p-20 * (std::fabs(g4.zero) + 16))) << trial << " " << i;
    }
  }
}

}  // namespace
}  // namespace kvf::golden
