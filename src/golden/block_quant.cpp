// block_quant.cpp — block quantisers of the golden model (see block_quant.h).
//
// Plain loops over one group, fp32 IEEE arithmetic in the order the sources write it; the element
// and scale codecs come from convert.h (e4m3, e5m2) and minifloat.h (e2m1, e8m0, powers of two).
#if defined(__FAST_MATH__)
#error "block_quant.cpp needs IEEE fp32 arithmetic: build without -ffast-math"
#endif
#include "block_quant.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

#include "values/convert.h"

namespace kvf::golden {

namespace {

// max |x| over the group, fp32, every NaN ignored (CUDA's fmaxf and Triton's max keep the non-NaN
// operand), starting from 0. Not std::fmax: glibc's returns a NaN for a signalling NaN operand
// (IEEE 754-2008 maxNum), which would reset the running maximum at every signalling NaN input.
float amax_of(std::span<const float> x) {
  float amax = 0.0f;
  for (float v : x)
    if (!std::isnan(v) && std::fabs(v) > amax) amax = std::fabs(v);
  return amax;
}

uint8_t pack_nibbles(uint8_t lo, uint8_t hi) { return static_cast<uint8_t>((lo & 0xFu) | (hi & 0xFu) << 4); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// NVFP4

Nvfp4Block quantize_nvfp4(std::span<const float, kNvfp4Group> x, float g, Nvfp4Rule rule) {
  const float amax = amax_of(x);
  float sf = 0.0f;
  if (amax > 0.0f && g > 0.0f) {
    const float six_g = 6.0f * g;
    sf = rule == Nvfp4Rule::flashinfer_precise ? amax * (1.0f / six_g) : amax / six_g;
  }
  Nvfp4Block out;
  out.scale = f32_to_fp8_e4m3(sf);
  const float sf_value = fp8_e4m3_to_f32(out.scale);
  const float os = (amax > 0.0f && sf_value > 0.0f && g > 0.0f) ? 1.0f / (sf_value * g) : 0.0f;
  // The product on the GPU: a NaN result is the canonical NaN 0x7FFFFFFF, positive whatever the
  // operands (x86 would give its negative default NaN for Inf * 0), so the encoder sees +NaN.
  const auto code = [os](float v) {
    const float product = v * os;
    return f32_to_fp4_e2m1(std::isnan(product) ? std::numeric_limits<float>::quiet_NaN() : product,
                           E2m1Nan::signed_zero);
  };
  for (int j = 0; j < kNvfp4Group / 2; ++j) out.packed[j] = pack_nibbles(code(x[2 * j]), code(x[2 * j + 1]));
  return out;
}

// ---------------------------------------------------------------------------------------------
// MX

namespace {

struct MxElementFormat {
  int emax;    // exponent of the largest binade
  float qmax;  // largest finite value
};

MxElementFormat mx_format(MxElement e) {
  switch (e) {
    case MxElement::fp8_e4m3: return {8, 448.0f};
    case MxElement::fp8_e5m2: return {15, 57344.0f};
    case MxElement::fp4_e2m1: return {2, 6.0f};
  }
  return {0, 0.0f};
}

uint8_t mx_encode(float v, MxElement e) {
  switch (e) {
    case MxElement::fp8_e4m3: return f32_to_fp8_e4m3(v);
    case MxElement::fp8_e5m2: return f32_to_fp8_e5m2(v);
    case MxElement::fp4_e2m1: return f32_to_fp4_e2m1(v, E2m1Nan::max_positive);
  }
  return 0;
}

// The shared exponent E in [-127, 127] of a group with this amax.
int mx_exponent(float amax, MxElementFormat fmt, MxScaleRule rule) {
  if (amax == 0.0f) return -127;
  if (std::isinf(amax)) return 127;
  int e;
  if (rule == MxScaleRule::ocp_floor) {
    // floor(log2 amax) from the bits; amax below 2^-127 reads as -127, which the clamp below
    // would give anyway (emax >= 2).
    e = static_cast<int>(f32_to_e8m0(amax, E8m0Rounding::floor)) - 127 - fmt.emax;
  } else {
    const float ratio = amax / fmt.qmax;
    e = static_cast<int>(f32_to_e8m0(ratio, E8m0Rounding::ceil)) - 127;  // clipped to [-127, 127]
  }
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

}  // namespace

MxBlock quantize_mx(std::span<const float, kMxGroup> x, MxElement element, MxScaleRule rule) {
  const MxElementFormat fmt = mx_format(element);
  const int e = mx_exponent(amax_of(x), fmt, rule);
  MxBlock out;
  out.scale = static_cast<uint8_t>(e + 127);
  const float scale = e8m0_to_f32(out.scale);              // 2^E
  const float inverse = e8m0_to_f32(static_cast<uint8_t>(127 - e));  // 2^-E
  std::array<uint8_t, kMxGroup> codes{};
  for (int i = 0; i < kMxGroup; ++i) {
    const float scaled = rule == MxScaleRule::ocp_floor ? x[i] / scale : x[i] * inverse;
    codes[i] = mx_encode(scaled, element);
  }
  if (element == MxElement::fp4_e2m1) {
    for (int j = 0; j < kMxGroup / 2; ++j) out.codes.push_back(pack_nibbles(codes[2 * j], codes[2 * j + 1]));
  } else {
    out.codes.assign(codes.begin(), codes.end());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// fp8 tiles: ds_mla and indexer_k

namespace {

Fp8Tile fp8_tile(std::span<const float> x, float scale) {
  Fp8Tile out;
  out.scale = scale;
  out.codes.reserve(x.size());
  for (float v : x) out.codes.push_back(f32_to_fp8_e4m3(v / scale));
  return out;
}

}  // namespace

Fp8Tile quantize_ds_mla_tile(std::span<const float> x, DsMlaScale rule) {
  const float ratio = amax_of(x) / 448.0f;
  const float scale = rule == DsMlaScale::flt_min ? std::fmax(ratio, FLT_MIN) : pow2_ceil(std::fmax(ratio, 1e-4f));
  return fp8_tile(x, scale);
}

Fp8Tile quantize_indexer_tile(std::span<const float> x, IndexerScale rule) {
  float scale = std::fmax(amax_of(x), 1e-4f) / 448.0f;
  if (rule == IndexerScale::ue8m0_log2f) scale = pow2_ceil_log2f(scale);
  if (rule == IndexerScale::ue8m0_exact) scale = pow2_ceil(scale);
  return fp8_tile(x, scale);
}

// ---------------------------------------------------------------------------------------------
// Asymmetric int8 / int4 (LMDeploy)

namespace {

// One arithmetic result rounded to the AsymArith precision. An fp32 operation rounded again to
// f16 or bf16 is the correctly rounded f16 / bf16 operation: fp32 has more than 2p + 1 bits for
// p = 11 and p = 8, so the double rounding is innocuous for + - * /.
float in_precision(float v, AsymArith arith) {
  switch (arith) {
    case AsymArith::f32: return v;
    case AsymArith::f16: return f16_to_f32(f32_to_f16_rne(v));
    case AsymArith::bf16: return bf16_to_f32(f32_to_bf16_rne(v));
  }
  return v;
}

// Min and max of the group under the lane policy; `width` is the loaded row width W.
void min_max(std::span<const float> x, std::size_t width, AsymLanes lanes, float& mn, float& mx) {
  // fminf / fmaxf over the row: NaN ignored (a row of NaN keeps x[0]), the first of equal operands
  // kept (+0 and -0), written out: glibc's fmin and fmax return a NaN for a signalling NaN operand.
  mn = x[0];
  mx = x[0];
  for (float v : x) {
    if (std::isnan(v)) continue;
    if (std::isnan(mn) || v < mn) mn = v;
    if (std::isnan(mx) || v > mx) mx = v;
  }
  if (lanes == AsymLanes::zero_padded_pow2 && !std::has_single_bit(width)) {
    if (std::isnan(mn) || mn > 0.0f) mn = 0.0f;  // fminf(mn, 0): a zero mn keeps its sign
    if (std::isnan(mx) || mx < 0.0f) mx = 0.0f;
  }
}

struct AsymParams {
  float scale, zero;
  bool defined;
};

AsymParams asym_params(std::span<const float> x, std::size_t width, float qmax, AsymArith arith, AsymLanes lanes) {
  float mn, mx;
  min_max(x, width, lanes, mn, mx);
  const float scale = in_precision(in_precision(mx - mn, arith) / qmax, arith);
  const float zero = in_precision(-mn / scale, arith);
  bool defined = std::isfinite(scale) && scale > 0.0f && std::isfinite(zero);
  for (float v : x) defined = defined && std::isfinite(v);
  return {scale, zero, defined};
}

// trunc(x / scale + zero + 0.5), left to right, each step in the precision; out of [0, qmax + 1)
// the source's conversion to an unsigned code is undefined.
uint8_t asym_code(float v, const AsymParams& p, float qmax, AsymArith arith, bool& defined) {
  const float q = in_precision(in_precision(in_precision(v / p.scale, arith) + p.zero, arith) + 0.5f, arith);
  if (!(q >= 0.0f && q < qmax + 1.0f)) {
    defined = false;
    return 0;
  }
  return static_cast<uint8_t>(std::trunc(q));
}

}  // namespace

AsymGroup quantize_asym_int8(std::span<const float> x, AsymArith arith, AsymLanes lanes) {
  AsymGroup out;
  if (x.empty()) return out;
  const AsymParams p = asym_params(x, x.size(), 255.0f, arith, lanes);
  out.scale = p.scale;
  out.zero = p.zero;
  out.defined = p.defined;
  for (float v : x) out.codes.push_back(asym_code(v, p, 255.0f, arith, out.defined));
  return out;
}

AsymGroup quantize_asym_int4(std::span<const float> x, Int4Pairing pairing, AsymLanes lanes) {
  AsymGroup out;
  if (x.empty()) return out;
  const std::size_t half = x.size() / 2;
  const std::size_t width = pairing == Int4Pairing::split_half ? half : x.size();
  const AsymParams p = asym_params(x, width, 15.0f, AsymArith::f32, lanes);
  out.scale = p.scale;
  out.zero = p.zero;
  out.defined = p.defined;
  for (std::size_t j = 0; j < half; ++j) {
    const std::size_t lo = pairing == Int4Pairing::split_half ? j : 2 * j;
    const std::size_t hi = pairing == Int4Pairing::split_half ? j + half : 2 * j + 1;
    const uint8_t q_lo = asym_code(x[lo], p, 15.0f, AsymArith::f32, out.defined);
    const uint8_t q_hi = asym_code(x[hi], p, 15.0f, AsymArith::f32, out.defined);
    out.codes.push_back(pack_nibbles(q_lo, q_hi));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Names

std::string_view to_string(MxElement v) {
  switch (v) {
    case MxElement::fp8_e4m3: return "fp8_e4m3";
    case MxElement::fp8_e5m2: return "fp8_e5m2";
    case MxElement::fp4_e2m1: return "fp4_e2m1";
  }
  return "?";
}

}  // namespace kvf::golden
