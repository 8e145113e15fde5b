// convert.h — software float conversions of the golden model (no CUDA headers, no intrinsics).
//
// Bit-level implementations, written independently of the kernel's CUDA intrinsics and validated
// against the CUDA toolkit's host-side conversions in tests/unit/golden/convert_test.cpp (float
// formats) and convert_quant_test.cpp (fp8 and int8):
//   widening f16/bf16 -> f32 is exact; narrowing f32 -> f16/bf16 rounds to nearest, ties to even,
//   overflows to +-Inf, and produces subnormals where the format has them.
// NaN rule of the contract: every NaN converted across dtypes becomes the target's canonical NaN
// (f16 0x7FFF, bf16 0x7FFF, f32 0x7FFFFFFF). Equal-dtype copies are bit copies and keep payloads.
#pragma once

#include <cstdint>

#include "case/types.h"

namespace kvf::golden {

float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_f16_rne(float f);
uint16_t f32_to_bf16_rne(float f);

// Converts one element stored as `bits` in dtype `from` to dtype `to` under the contract above.
// Bits of 16-bit types live in the low half of the result.
uint32_t convert_bits(uint32_t bits, DType from, DType to);

// Quantised formats (docs/contract.md). fp8: round to nearest even, saturate to ±max finite (±Inf too),
// every NaN -> 0x7F (what CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE returns). int8: round
// half to even, saturate to [-128, 127], NaN -> 0 (cvt.rni.sat.s8.f32).
uint8_t f32_to_fp8_e4m3(float f);
uint8_t f32_to_fp8_e5m2(float f);
int8_t f32_to_int8(float f);
float fp8_e4m3_to_f32(uint8_t b);
float fp8_e5m2_to_f32(uint8_t b);

// Largest finite magnitude of a quantised format: 448 (e4m3), 57344 (e5m2), 127 (int8).
float quant_max(DType t);

// Stored bits of x quantised with `scale` into dtype `to`: convert(x / scale), IEEE fp32 division.
uint32_t quantize_bits(float x, float scale, DType to);

// The value of one stored element as float (any dtype; int8 as its integer value).
float bits_to_f32(uint32_t bits, DType t);

// Distance between two stored values in units in the last place of format t (adjacent
// representable values are 1 apart; +0 and -0 are 0 apart; int8 counts integers). -1 when exactly
// one of them is NaN; 0 when both are NaN.
int64_t ulp_distance(uint32_t a, uint32_t b, DType t);

// Helpers on raw bits.
bool is_nan_bits(uint32_t bits, DType t);
uint32_t canonical_nan_bits(DType t);

}  // namespace kvf::golden
