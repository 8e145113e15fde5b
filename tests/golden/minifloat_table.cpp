// minifloat_table.cpp — prints the golden model's fp4 e2m1, e8m0 and fp8 codecs on every code and
// on every rounding boundary, for tests/golden/test_block_quant_oracle.py to compare with ml_dtypes.
//
//   build/tests/kvfuzz_minifloat_table > table.txt
//
// One line per conversion: `<kind> <input hex> <output hex>`. Decoders (`*_dec`) map a code to f32
// bits; encoders map f32 bits to a code:
//   e2m1_enc (NaN policy max_positive), e2m1_enc_fi (signed_zero), e8m0_floor / e8m0_ceil
//   (saturating), e4m3_enc / e5m2_enc (satfinite, convert.h).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include "values/convert.h"
#include "values/minifloat.h"

namespace {

using namespace kvf::golden;

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

// Every non-negative finite value of a format (from its decoder over `codes` codes), the midpoint
// of each neighbouring pair, the saturation boundaries (the largest value plus half and one step,
// twice it, 1e30), each with the f32s one and two ulps around it, both signs, and the specials.
std::set<uint32_t> boundary_inputs(float (*decode)(uint8_t), int codes) {
  std::vector<double> values;
  for (int c = 0; c < codes; ++c) {
    const float v = decode(static_cast<uint8_t>(c));
    if (std::isfinite(v) && !std::signbit(v)) values.push_back(v);
  }
  std::set<double> sorted(values.begin(), values.end());
  values.assign(sorted.begin(), sorted.end());
  std::vector<double> centres = values;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) centres.push_back((values[i] + values[i + 1]) / 2);
  const double top = values.back(), step = values.back() - values[values.size() - 2];
  for (double v : {top + step / 2, top + step, 2 * top, 1e30}) centres.push_back(v);
  std::set<uint32_t> out;
  for (double c : centres) {
    const uint32_t u = bits_of(static_cast<float>(c));
    for (int d = -2; d <= 2; ++d) {
      const uint32_t n = static_cast<uint32_t>(static_cast<int64_t>(u) + d);
      if ((n & 0x7FFFFFFFu) >= 0x7F800000u || (u == 0 && d < 0)) continue;
      out.insert(n);
      out.insert(n | 0x80000000u);
    }
  }
  for (uint32_t s : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
                     0x00000001u, 0x80000001u, 0x007FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu}) {
    out.insert(s);
  }
  return out;
}

float e2m1_decode(uint8_t c) { return fp4_e2m1_to_f32(c); }

}  // namespace

int main() {
  for (uint32_t c = 0; c < 16; ++c) {
    std::printf("e2m1_dec %02x %08x\n", c, bits_of(fp4_e2m1_to_f32(static_cast<uint8_t>(c))));
  }
  for (uint32_t u : boundary_inputs(e2m1_decode, 16)) {
    std::printf("e2m1_enc %08x %02x\n", u, f32_to_fp4_e2m1(float_of(u), E2m1Nan::max_positive));
    std::printf("e2m1_enc_fi %08x %02x\n", u, f32_to_fp4_e2m1(float_of(u), E2m1Nan::signed_zero));
  }
  for (uint32_t c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    std::printf("e8m0_dec %02x %08x\n", c, bits_of(e8m0_to_f32(b)));
    std::printf("e4m3_dec %02x %08x\n", c, bits_of(fp8_e4m3_to_f32(b)));
    std::printf("e5m2_dec %02x %08x\n", c, bits_of(fp8_e5m2_to_f32(b)));
  }
  for (uint32_t u : boundary_inputs(fp8_e4m3_to_f32, 256)) {
    std::printf("e4m3_enc %08x %02x\n", u, f32_to_fp8_e4m3(float_of(u)));
  }
  for (uint32_t u : boundary_inputs(fp8_e5m2_to_f32, 256)) {
    std::printf("e5m2_enc %08x %02x\n", u, f32_to_fp8_e5m2(float_of(u)));
  }
  // e8m0: every power of two 2^-149..2^127 and the midpoint 1.5 * 2^k (ml_dtypes' rounding tie),
  // each +-2 ulps, both signs, and the specials.
  std::set<uint32_t> powers;
  for (int e = -149; e <= 127; ++e) {
    for (double m : {1.0, 1.5}) {
      const uint32_t u = bits_of(static_cast<float>(std::ldexp(m, e)));
      for (int d = -2; d <= 2; ++d) {
        const uint32_t n = static_cast<uint32_t>(static_cast<int64_t>(u) + d);
        if ((n & 0x7FFFFFFFu) >= 0x7F800000u || n == 0xFFFFFFFFu) continue;
        powers.insert(n);
        powers.insert(n | 0x80000000u);
      }
    }
  }
  for (uint32_t s : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F7FFFFFu}) {
    powers.insert(s);
  }
  for (uint32_t u : powers) {
    std::printf("e8m0_floor %08x %02x\n", u, f32_to_e8m0(float_of(u), E8m0Rounding::floor));
    std::printf("e8m0_ceil %08x %02x\n", u, f32_to_e8m0(float_of(u), E8m0Rounding::ceil));
  }
  return 0;
}
