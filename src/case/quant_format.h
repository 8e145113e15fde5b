// quant_format.h — block-scaled, record and asymmetric quantised cache formats (docs/formats.md,
// "Quantised formats"), and the conventions a case selects where real implementations disagree.
//
// A case whose quant_format is not `none` stores *typed fields* (case.h, CacheField): codes, their
// scales (and zero points), each with its own dtype and layout in the cache buffer or the
// scale-cache buffer, both byte buffers then. The golden model computes each group of codes and its
// scale with golden/block_quant.h, following the case's QuantRules. The classic quantisation
// (cache_dtype fp8/int8 with a ScaleKind) is quant_format `none`, unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../../kernels/cuda/kv_append.cuh"  // DType

namespace kvf {

// QuantFormat (none, nvfp4, mxfp8_e4m3, ...): kernels/cuda/kv_enums.h (kernels/enums.json).

// --- Conventions (golden/block_quant.h states each formula) ---------------------------------

enum class Nvfp4Rule : uint8_t {
  flashinfer,          // sf = amax / (6 g), os = 1 / (e4m3(sf) g), e2m1(x os), NaN -> signed zero
  flashinfer_precise,  // sf = amax * RN(1 / (6 g)) (its precise-rounding build)
};
enum class MxScaleRule : uint8_t {
  ocp_floor,  // OCP MX v1.0: E = floor(log2 amax) - emax, saturating elements
  nv_ceil,    // E = ceil(log2(amax / qmax)) (FlashInfer's mxfp8 quantiser, SGLang's MXFP8 KV cache)
};
enum class DsMlaScale : uint8_t {
  flt_min,  // s = max(amax / 448, FLT_MIN)
  pow2,     // s = 2^ceil(log2(max(amax / 448, 1e-4))), exact
};
enum class IndexerScale : uint8_t {
  fp32,         // s = max(amax, 1e-4) / 448
  ue8m0_log2f,  // then exp2f(ceilf(log2f(s))) (rounds down just above a power of two)
  ue8m0_exact,  // then the least power of two >= s
};
enum class AsymArith : uint8_t { f32, f16, bf16 };          // precision of each step of the formula
enum class AsymLanes : uint8_t { exact, zero_padded_pow2 };  // zero_padded_pow2: LMDeploy bug #4849
enum class Int4Pairing : uint8_t {
  split_half,  // byte d = q(x[d]) | q(x[d + D/2]) << 4 (LMDeploy)
  adjacent,    // byte j = q(x[2j]) | q(x[2j+1]) << 4
};
// Where an NVFP4 cache keeps its e4m3 scales: one row of D/16 per (block, pos, head), or vLLM's
// layout for SM100 readers, where each group of 4 tokens' scales is transposed in 4x4 tiles:
// (t, s) is stored at (4 (t / 4) + s / (S / 4), 4 (s mod S/4) + t mod 4), S = D/16.
enum class ScaleLayout : uint8_t {
  linear,      // K and V linear (FlashInfer; vLLM on other GPUs)
  swizzled_v,  // K linear, V swizzled (vLLM on SM100)
  swizzled,    // both swizzled
};

// The conventions of one case; only the ones its format reads are meaningful (and written).
struct QuantRules {
  Nvfp4Rule nvfp4 = Nvfp4Rule::flashinfer;
  ScaleLayout scale_layout = ScaleLayout::linear;
  MxScaleRule mx = MxScaleRule::ocp_floor;
  DsMlaScale ds_mla = DsMlaScale::pow2;
  IndexerScale indexer = IndexerScale::fp32;
  AsymArith asym_arith = AsymArith::f32;
  AsymLanes asym_lanes = AsymLanes::exact;
  Int4Pairing int4_pairing = Int4Pairing::split_half;
  bool operator==(const QuantRules&) const = default;
};

// Every convention as one bit (capabilities: the conventions a kernel follows). A case of a format
// needs the bits of the conventions its format reads (rule_bits).
enum class RuleBit : uint8_t {
  nvfp4_flashinfer, nvfp4_flashinfer_precise,
  scale_layout_linear, scale_layout_swizzled_v, scale_layout_swizzled,
  mx_ocp_floor, mx_nv_ceil,
  ds_mla_flt_min, ds_mla_pow2,
  indexer_fp32, indexer_ue8m0_log2f, indexer_ue8m0_exact,
  asym_f32, asym_f16, asym_bf16,
  asym_lanes_exact, asym_lanes_zero_padded_pow2,
  int4_split_half, int4_adjacent,
};
constexpr int kRuleBits = 19;
// The conventions format f reads from `rules`, as 1 << RuleBit bits (0 for none and the inline formats).
uint32_t rule_bits(QuantFormat f, const QuantRules& rules);
// The defaults' bits (QuantRules{}): what a kernel that declares no conventions follows.
uint32_t default_rule_bits();
// "nvfp4:flashinfer", "scale_layout:swizzled_v", "mx:nv_ceil", ... (capabilities JSON, reasons).
std::string_view to_string(RuleBit b);
std::optional<RuleBit> rule_bit_from_string(std::string_view s);

// --- Properties of a format ---------------------------------------------------------------

// The dtype of its codes (the case's cache_dtype): fp4_e2m1, fp8_e4m3, fp8_e5m2, int8, uint8, uint4.
DType format_code_dtype(QuantFormat f);
// The dtype of its scales: fp8_e4m3 (nvfp4), fp8_e8m0 (MX), f32 (the rest); f16 for none.
DType format_scale_dtype(QuantFormat f);
// Dims one scale covers, for a head of head_dim dims: 16, 32, 128, or head_dim (per token-head).
int64_t format_group(QuantFormat f, int64_t head_dim);
// True when its scales live in the cache buffer beside the codes (records, inline scales).
bool format_scales_in_cache(QuantFormat f);
bool format_has_zero(QuantFormat f);  // asym_int8, asym_int4

std::string_view to_string(QuantFormat f);
std::string_view to_string(Nvfp4Rule v);
std::string_view to_string(MxScaleRule v);
std::string_view to_string(DsMlaScale v);
std::string_view to_string(IndexerScale v);
std::string_view to_string(AsymArith v);
std::string_view to_string(AsymLanes v);
std::string_view to_string(Int4Pairing v);
std::string_view to_string(ScaleLayout v);
std::optional<QuantFormat> quant_format_from_string(std::string_view s);
std::optional<Nvfp4Rule> nvfp4_rule_from_string(std::string_view s);
std::optional<MxScaleRule> mx_scale_rule_from_string(std::string_view s);
std::optional<DsMlaScale> ds_mla_scale_from_string(std::string_view s);
std::optional<IndexerScale> indexer_scale_from_string(std::string_view s);
std::optional<AsymArith> asym_arith_from_string(std::string_view s);
std::optional<AsymLanes> asym_lanes_from_string(std::string_view s);
std::optional<Int4Pairing> int4_pairing_from_string(std::string_view s);
std::optional<ScaleLayout> scale_layout_from_string(std::string_view s);
// Quoted names for "expected one of" messages.
std::string quoted_quant_formats();

}  // namespace kvf
