// cuda_host_standins.h — the CUDA names kernels/cuda uses (__half, __nv_bfloat16, their conversions,
// __nv_cvt_float_to_fp8, uint2), on top of cuda_host_convert.h, for the build without the CUDA
// toolkit (scripts/build-libfuzzer.sh). Only the kernel's host path is covered: no device code.
#pragma once

#include "cuda_host_convert.h"

struct __half {
  unsigned short __x;
};
struct __nv_bfloat16 {
  unsigned short __x;
};
inline __half __ushort_as_half(unsigned short x) { return __half{x}; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { return __nv_bfloat16{x}; }
inline float __half2float(__half h) { return kvf::cuda_host::from_16(h.__x, kvf::cuda_host::f16_format(), 0x7c00, 13); }
inline float __bfloat162float(__nv_bfloat16 b) { return kvf::cuda_host::bits_f32(static_cast<uint32_t>(b.__x) << 16); }
inline __half __float2half_rn(float x) { return __half{kvf::cuda_host::to_16(x, kvf::cuda_host::f16_format(), 0x7c00)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  return __nv_bfloat16{kvf::cuda_host::to_16(x, kvf::cuda_host::bf16_format(), 0x7f80)};
}

typedef unsigned char __nv_fp8_storage_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat, __nv_fp8_interpretation_t kind) {
  return kvf::cuda_host::to_fp8(x, sat == __NV_SATFINITE ? kvf::cuda_host::satfinite : kvf::cuda_host::nosat,
                                kind == __NV_E4M3 ? kvf::cuda_host::e4m3 : kvf::cuda_host::e5m2);
}

struct uint2 {
  unsigned int x, y;
};
inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
