// block_quant.h — the golden model's block quantisers for issue 15's formats: NVFP4, MX (MXFP8,
// MXFP4), DeepSeek's ds_mla tiles and indexer_k tiles, and LMDeploy's asymmetric int8 / int4.
//
// Each quantiser takes one group of input values (as f32: every f16 and bf16 value widens exactly)
// and returns the codes and the scale exactly as the format stores them. Where implementations
// disagree, every variant is a named value of an enum: a case selects one, and a kernel that
// follows it is checked against exactly it. The arithmetic is fp32 and IEEE, step for step as the
// source writes it (division stays division, a reciprocal multiply stays one, the order of the
// operations is kept), so compile without -ffast-math. Sources whose exact results depend on an
// approximate GPU instruction are not modelled; the comments below say which.
//
// Amax everywhere is max |x| over the group in fp32 that ignores NaN (CUDA fmaxf, Triton tl.max),
// starting from 0: an all-NaN group has amax 0.
//
// Tests: tests/unit/golden/block_quant_test.cpp (hand-computed cases from the formulas, properties).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "case/quant_format.h"
#include "values/minifloat.h"

namespace kvf::golden {

// ---------------------------------------------------------------------------------------------
// NVFP4: 16 values -> 8 bytes of e2m1 codes (element 2j in the low nibble of byte j, 2j+1 in the
// high nibble) + 1 e4m3 block scale, under an fp32 global scale g. Decoding gives
// e2m1 * e4m3_scale * g: g is the *decode* global scale (FlashInfer's k_scale / v_scale).
inline constexpr int kNvfp4Group = 16;

// The values of Nvfp4Rule (case/quant_format.h, where a case names them):
//   `flashinfer`:
//     FlashInfer's NVFP4 paged append (nvfp4_append_quantize_block in include/flashinfer/page.cuh):
//     sf   = amax > 0 && g > 0 ? amax / (6 * g) : 0       (6 * g rounded first, then divided)
//     byte = e4m3(sf), round to nearest even, satfinite    (__nv_fp8_e4m3's constructor)
//     os   = amax > 0 && e4m3_value(byte) > 0 && g > 0 ? 1 / (e4m3_value(byte) * g) : 0
//     code = e2m1(x * os), NaN -> signed zero               (its own threshold encoder)
//     The product x * os is a GPU multiplication, whose NaN results (x NaN, or ±Inf * 0) are the
//     canonical NaN 0x7FFFFFFF, positive: they give code 0x0, never 0x8.
//   `flashinfer_precise`:
//     The same with sf = amax * RN(1 / (6 * g)), a correctly rounded reciprocal multiplied (the
//     kernel's precise-rounding flag, __frcp_rn, for fast-math builds). os is unchanged: 1 / y
//     correctly rounded is __frcp_rn(y).
using kvf::Nvfp4Rule;
// Not modelled: vLLM's CUDA NVFP4 writer (reshape_and_cache_nvfp4, TRT-LLM's cvt_warp_fp16_to_fp4)
// computes both scales with rcp.approx.ftz.f32, which is not correctly rounded.

struct Nvfp4Block {
  std::array<uint8_t, kNvfp4Group / 2> packed{};  // [8] byte j = code(2j) | code(2j+1) << 4
  uint8_t scale = 0;                              // e4m3 block scale
};

Nvfp4Block quantize_nvfp4(std::span<const float, kNvfp4Group> x, float global_scale, Nvfp4Rule rule);

// ---------------------------------------------------------------------------------------------
// MX (OCP Microscaling v1.0): 32 values share one e8m0 scale X = 2^E; element i stores
// convert(x_i / X) in the element format, round to nearest even, saturating to the largest
// finite element value (Inf elements too); E is clamped to e8m0's range [-127, 127].
inline constexpr int kMxGroup = 32;

enum class MxElement : uint8_t {
  fp8_e4m3,  // emax 8, largest value 448; NaN -> 0x7F
  fp8_e5m2,  // emax 15, largest value 57344 (never Inf); NaN -> 0x7F
  fp4_e2m1,  // emax 2, largest value 6; NaN -> +6 (0x7); two codes per byte, 2j low nibble
};

// The values of MxScaleRule (case/quant_format.h, where a case names them):
//   `ocp_floor`:
//     The spec's conversion: E = floor(log2 amax) - emax (exact, from the exponent bits), so
//     amax / X lies in [2^emax, 2^(emax+1)) and values above the element's largest finite value
//     saturate (e4m3: 448..511, e2m1: 6..8). x / X is an fp32 division (a power of two: exact unless
//     the quotient is an f32 subnormal). The spec leaves zero and non-finite blocks to the
//     implementation; kvfuzz's choice: amax 0 -> E = -127 (0x00), amax Inf -> E = 127 (0xFE).
//   `nv_ceil`:
//     The "round the scale up" convention of FlashInfer's mxfp8 quantiser and SGLang's MXFP8 KV
//     cache: E = ceil(log2(amax / qmax)) (amax / qmax an fp32 division, qmax the element's largest
//     value, the ceiling exact from the bits), clamped to [-127, 127]; amax 0 -> E = -127;
//     element = convert(x * 2^-E), a multiplication by an exact power of two. amax * 2^-E exceeds
//     qmax by at most the division's rounding error, so it converts to qmax: no element saturates
//     except ±Inf.
using kvf::MxScaleRule;
// Not modelled bit for bit: SGLang's Triton writer takes ceil(log2(...)) with tl.log2, whose
// results just above a power of two were not measured.

struct MxBlock {
  std::vector<uint8_t> codes;  // fp8: [32] one code per element; fp4: [16] byte j = code(2j) | code(2j+1) << 4
  uint8_t scale = 0;           // e8m0: X = 2^(scale - 127)
};

MxBlock quantize_mx(std::span<const float, kMxGroup> x, MxElement element, MxScaleRule rule);

// ---------------------------------------------------------------------------------------------
// Tiles of fp8 e4m3 codes with one fp32 scale s: code_i = e4m3(x_i / s), an fp32 division, round
// to nearest even, satfinite (vLLM's scaled_convert). Decoding gives e4m3_value * s.
struct Fp8Tile {
  std::vector<uint8_t> codes;  // [n] e4m3 codes, in input order
  float scale = 0.0f;          // fp32 scale as stored
};

// fp8_ds_mla: each 656-byte record holds 512 latent values as four tiles of 128.
inline constexpr int kDsMlaTile = 128;

// The values of DsMlaScale (case/quant_format.h, where a case names them):
//   `flt_min`:
//     vLLM's concat_and_cache_ds_mla before its ue8m0 change: s = fmaxf(amax / 448, FLT_MIN)
//     (a zero tile stores FLT_MIN = 2^-126 and codes 0).
//   `pow2`:
//     DeepSeek's reference (FlashMLA's tests/quant.py) and vLLM's writers since: s =
//     pow2_ceil(fmaxf(amax / 448, 1e-4f)), the floor applied to the scale; a zero tile stores 2^-13,
//     amax / 448 = 0.75 stores 1. The power of two is rounded exactly from the bits (pow2_ceil).
using kvf::DsMlaScale;

Fp8Tile quantize_ds_mla_tile(std::span<const float> x, DsMlaScale rule);

// indexer_k (DeepSeek V3.2's lightning indexer): one scale per 128 values of a token's key.
inline constexpr int kIndexerTile = 128;

// The values of IndexerScale (case/quant_format.h, where a case names them):
//   `fp32`:        vLLM indexer_k_quant_and_cache: s = fmaxf(amax, 1e-4f) / 448 (floor on amax)
//   `ue8m0_log2f`: the same, then s = exp2f(ceilf(log2f(s))) as vLLM writes it with scale_fmt
//                  "ue8m0": pow2_ceil_log2f (rounds down just above a power of two)
//   `ue8m0_exact`: the same, then s = pow2_ceil(s): the exact power of two a kernel should write
using kvf::IndexerScale;

Fp8Tile quantize_indexer_tile(std::span<const float> x, IndexerScale rule);

// ---------------------------------------------------------------------------------------------
// Asymmetric int8 / int4 with a zero point, as LMDeploy's PyTorch engine fills its KV cache
// (_quant_int8 / _quant_int4 in lmdeploy/pytorch/kernels/cuda/fill_kv_cache.py), per token and
// head over the group's values:
//   scale = (max - min) / qmax          qmax 255 (int8) or 15 (int4)
//   zero  = -min / scale                a float, not rounded to the integer grid
//   q     = trunc(x / scale + zero + 0.5) as an unsigned code, i.e. (x - min) / scale rounded
//           half up; decoding gives (q - zero) * scale.
// Each operation is one IEEE operation in the precision AsymArith names, evaluated left to right.
// LMDeploy runs these in Triton, whose `/` compiles to the approximate div.full.f32 on NVIDIA GPUs:
// its real bytes can differ in the last place; the golden model is the formula with IEEE division.
// The values of AsymArith (case/quant_format.h, where a case names them):
//   `f32`:  every operation in fp32 (LMDeploy's int4 path upcasts its inputs to fp32)
//   `f16`:  every operation rounded to f16 (LMDeploy's int8 path computes on the loaded f16 tile)
//   `bf16`: every operation rounded to bf16 (the same on a bf16 tile)
using kvf::AsymArith;

// Which lanes enter the min and max; the values of AsymLanes (case/quant_format.h):
//   `exact`: only the group's real values (correct)
//   `zero_padded_pow2`:
//     The kernel loads a row of width W as next_pow2(W) lanes and masked lanes read 0, which then
//     enter the min and max: when W is not a power of two, min <= 0 <= max is forced (LMDeploy bug
//     #4849, int4 with D / 2 not a power of two; LMDeploy versions without the `d % head_dim` load
//     have it in int8 too). W = the group's length for int8 and adjacent int4, D / 2 for split int4.
using kvf::AsymLanes;

// The values of Int4Pairing (case/quant_format.h, where a case names them):
//   `split_half`: byte d = q(x[d]) | q(x[d + D/2]) << 4, d < D/2: LMDeploy (element d and its
//                 partner half a head away)
//   `adjacent`:   byte j = q(x[2j]) | q(x[2j + 1]) << 4: neighbouring elements, like NVFP4's nibbles
using kvf::Int4Pairing;

struct AsymGroup {
  std::vector<uint8_t> codes;  // int8: [n] one code per value; int4: [n/2] two codes per byte
  float scale = 0.0f;          // as computed (in the AsymArith precision); stored by the caller
  float zero = 0.0f;           // zero point, a float
  // False when the source's float -> unsigned conversion is undefined for the group: a constant
  // group (scale 0, zero ±Inf or NaN), a NaN or ±Inf input, a non-finite scale or zero, or a value
  // of x / scale + zero + 0.5 outside [0, qmax + 1). Codes, scale and zero are then unspecified
  // (a kernel may write anything there; the golden model's values are the formula's, for reports).
  bool defined = true;
};

AsymGroup quantize_asym_int8(std::span<const float> x, AsymArith arith, AsymLanes lanes);
// x.size() must be even.
AsymGroup quantize_asym_int4(std::span<const float> x, Int4Pairing pairing, AsymLanes lanes);

// ---------------------------------------------------------------------------------------------
// Stable names of the conventions (case files, reports): "flashinfer", "ocp_floor", ...
std::string_view to_string(MxElement v);

}  // namespace kvf::golden
