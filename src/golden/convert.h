// convert.h — software float conversions of the golden model (no CUDA headers, no intrinsics).
//
// Bit-level implementations, written independently of the kernel's CUDA intrinsics and validated
// against the CUDA toolkit's host-side conversions in tests/unit/golden/convert_test.cpp:
//   widening f16/bf16 -> f32 is exact; narrowing f32 -> f16/bf16 rounds to nearest, ties to even,
//   overflows to +-Inf, and produces subnormals where the format has them.
// NaN rule of the contract: every NaN converted across dtypes becomes the target's canonical NaN
// (f16 0x7FFF, bf16 0x7FFF, f32 0x7FFFFFFF). Equal-dtype copies are bit copies and keep payloads.
#pragma once

#include <cstdint>

#include "../case/types.h"

namespace kvf::golden {

float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_f16_rne(float f);
uint16_t f32_to_bf16_rne(float f);

// Converts one element stored as `bits` in dtype `from` to dtype `to` under the contract above.
// Bits of 16-bit types live in the low half of the result.
uint32_t convert_bits(uint32_t bits, DType from, DType to);

// Helpers on raw bits.
bool is_nan_bits(uint32_t bits, DType t);
uint32_t canonical_nan_bits(DType t);

}  // namespace kvf::golden
