// cuda_host_convert.h — the conversions behind the host stand-ins for the CUDA types kernels/cuda uses,
// so that the emulated kernel builds without the CUDA toolkit (kvfuzz-libfuzzer under OSS-Fuzz and
// ClusterFuzzLite, whose images have no toolkit; scripts/build-libfuzzer.sh). Only that build puts
// this folder on the include path, where its cuda_fp16.h, cuda_bf16.h, cuda_fp8.h and cuda_runtime.h
// stand in for the toolkit's (cuda_host_standins.h gives the CUDA names). Every other build uses
// the real headers.
//
// The conversions follow what the toolkit's host code computes (round to nearest, ties to even;
// fp8 with __NV_SATFINITE saturating to ±max finite, __NV_NOSAT overflowing to NaN (e4m3) or ±Inf
// (e5m2), every NaN to 0x7F), written independently of it: the nearest representable value is
// looked up in a table of the format's values. tests/unit/libfuzzer/cuda_host_convert_test.cpp
// checks them against the toolkit over every 16-bit input and millions of floats.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kvf::cuda_host {

// The value of a binary float code with `m` mantissa bits and exponent `bias` (IEEE-style
// subnormals), sign ignored.
inline double code_value(uint32_t code, int m, int bias) {
  const uint32_t e = code >> m, frac = code & ((1u << m) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(frac), 1 - bias - m);
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(frac), -m), static_cast<int>(e) - bias);
}

// A format's non-negative finite codes 0..max_code in value order, and the value one step above
// max_code (where rounding overflows).
struct Format {
  int m = 0, bias = 0;
  uint32_t max_code = 0;
  std::vector<double> values;  // values[c] of code c, c = 0..max_code+1
  Format(int m_, int bias_, uint32_t max_code_) : m(m_), bias(bias_), max_code(max_code_) {
    for (uint32_t c = 0; c <= max_code + 1; ++c) values.push_back(code_value(c, m, bias));
  }
  // The code nearest |x| (ties to the even code); max_code + 1 means it overflows.
  uint32_t nearest(double ax) const {
    const auto it = std::upper_bound(values.begin(), values.end(), ax);
    if (it == values.end()) return max_code + 1;
    const auto hi = static_cast<uint32_t>(it - values.begin());
    if (hi == 0) return 0;
    const uint32_t lo = hi - 1;
    const double below = ax - values[lo], above = values[hi] - ax;
    if (below < above) return lo;
    if (above < below) return hi;
    return (lo & 1u) == 0 ? lo : hi;
  }
};

inline const Format& f16_format() { static const Format f(10, 15, 0x7bff); return f; }
inline const Format& bf16_format() { static const Format f(7, 127, 0x7f7f); return f; }
inline const Format& e4m3_format() { static const Format f(3, 7, 0x7e); return f; }
inline const Format& e5m2_format() { static const Format f(2, 15, 0x7b); return f; }

inline uint32_t f32_bits(float x) { uint32_t b; std::memcpy(&b, &x, sizeof b); return b; }
inline float bits_f32(uint32_t b) { float x; std::memcpy(&x, &b, sizeof x); return x; }

// float -> 16-bit float code, round to nearest even, overflow to ±Inf, NaN -> 0x7fff.
inline uint16_t to_16(float x, const Format& f, uint16_t inf) {
  if (x != x) return 0x7fff;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const uint32_t c = std::isinf(x) ? f.max_code + 1u : f.nearest(std::fabs(static_cast<double>(x)));
  return static_cast<uint16_t>(sign | (c > f.max_code ? inf : c));
}

inline float from_16(uint16_t h, const Format& f, uint16_t inf, int shift) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint16_t mag = h & 0x7fff;
  if (mag >= inf)  // Inf or NaN: the payload moved into the float's mantissa
    return bits_f32(sign | 0x7f800000u | (static_cast<uint32_t>(mag & ~inf) << shift));
  const float v = static_cast<float>(code_value(mag, f.m, f.bias));
  return sign ? -v : v;
}

enum Saturation { nosat, satfinite };
enum Fp8Kind { e4m3, e5m2 };

inline uint8_t to_fp8(float x, Saturation sat, Fp8Kind kind) {
  if (x != x) return 0x7f;
  const Format& f = kind == e4m3 ? e4m3_format() : e5m2_format();
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const uint32_t c = std::isinf(x) ? f.max_code + 1u : f.nearest(std::fabs(static_cast<double>(x)));
  if (c <= f.max_code) return static_cast<uint8_t>(sign | c);
  if (sat == satfinite) return static_cast<uint8_t>(sign | f.max_code);
  return static_cast<uint8_t>(sign | (kind == e4m3 ? 0x7f : 0x7c));
}

}  // namespace kvf::cuda_host

