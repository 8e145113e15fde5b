// quant_format.cpp — see quant_format.h.
#include "quant_format.h"

#include "enum_names.h"
#include "names.h"
#include "types.h"

namespace kvf {
namespace {

constexpr NameTable<Nvfp4Rule, 2> kNvfp4Names{{{Nvfp4Rule::flashinfer, "flashinfer"}, {Nvfp4Rule::flashinfer_precise, "flashinfer_precise"}}};
constexpr NameTable<MxScaleRule, 2> kMxNames{{{MxScaleRule::ocp_floor, "ocp_floor"}, {MxScaleRule::nv_ceil, "nv_ceil"}}};
constexpr NameTable<DsMlaScale, 2> kDsMlaNames{{{DsMlaScale::flt_min, "flt_min"}, {DsMlaScale::pow2, "pow2"}}};
constexpr NameTable<IndexerScale, 3> kIndexerNames{
    {{IndexerScale::fp32, "fp32"}, {IndexerScale::ue8m0_log2f, "ue8m0_log2f"}, {IndexerScale::ue8m0_exact, "ue8m0_exact"}}};
constexpr NameTable<AsymArith, 3> kArithNames{{{AsymArith::f32, "f32"}, {AsymArith::f16, "f16"}, {AsymArith::bf16, "bf16"}}};
constexpr NameTable<AsymLanes, 2> kLanesNames{{{AsymLanes::exact, "exact"}, {AsymLanes::zero_padded_pow2, "zero_padded_pow2"}}};
constexpr NameTable<Int4Pairing, 2> kPairingNames{{{Int4Pairing::split_half, "split_half"}, {Int4Pairing::adjacent, "adjacent"}}};
constexpr NameTable<RuleBit, kRuleBits> kRuleBitNames{{
    {RuleBit::nvfp4_flashinfer, "nvfp4:flashinfer"},
    {RuleBit::nvfp4_flashinfer_precise, "nvfp4:flashinfer_precise"},
    {RuleBit::scale_layout_linear, "scale_layout:linear"},
    {RuleBit::scale_layout_swizzled_v, "scale_layout:swizzled_v"},
    {RuleBit::scale_layout_swizzled, "scale_layout:swizzled"},
    {RuleBit::mx_ocp_floor, "mx:ocp_floor"},
    {RuleBit::mx_nv_ceil, "mx:nv_ceil"},
    {RuleBit::ds_mla_flt_min, "ds_mla:flt_min"},
    {RuleBit::ds_mla_pow2, "ds_mla:pow2"},
    {RuleBit::indexer_fp32, "indexer:fp32"},
    {RuleBit::indexer_ue8m0_log2f, "indexer:ue8m0_log2f"},
    {RuleBit::indexer_ue8m0_exact, "indexer:ue8m0_exact"},
    {RuleBit::asym_f32, "asym_arith:f32"},
    {RuleBit::asym_f16, "asym_arith:f16"},
    {RuleBit::asym_bf16, "asym_arith:bf16"},
    {RuleBit::asym_lanes_exact, "asym_lanes:exact"},
    {RuleBit::asym_lanes_zero_padded_pow2, "asym_lanes:zero_padded_pow2"},
    {RuleBit::int4_split_half, "int4_pairing:split_half"},
    {RuleBit::int4_adjacent, "int4_pairing:adjacent"},
}};

constexpr NameTable<ScaleLayout, 3> kScaleLayoutNames{
    {{ScaleLayout::linear, "linear"}, {ScaleLayout::swizzled_v, "swizzled_v"}, {ScaleLayout::swizzled, "swizzled"}}};

}  // namespace

DType format_code_dtype(QuantFormat f) {
  switch (f) {
    case QuantFormat::nvfp4:
    case QuantFormat::mxfp4: return DType::fp4_e2m1;
    case QuantFormat::mxfp8_e5m2: return DType::fp8_e5m2;
    case QuantFormat::int8_inline: return DType::int8;
    case QuantFormat::asym_int8: return DType::uint8;
    case QuantFormat::asym_int4: return DType::uint4;
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::ds_mla:
    case QuantFormat::indexer_k:
    case QuantFormat::fp8_inline: return DType::fp8_e4m3;
    case QuantFormat::none: break;
  }
  return DType::f16;
}

DType format_scale_dtype(QuantFormat f) {
  switch (f) {
    case QuantFormat::nvfp4: return DType::fp8_e4m3;
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4: return DType::fp8_e8m0;
    case QuantFormat::none: return DType::f16;
    default: return DType::f32;
  }
}

int64_t format_group(QuantFormat f, int64_t head_dim) {
  switch (f) {
    case QuantFormat::nvfp4: return 16;
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4: return 32;
    case QuantFormat::ds_mla:
    case QuantFormat::indexer_k: return 128;
    default: return head_dim;
  }
}

bool format_scales_in_cache(QuantFormat f) {
  return f == QuantFormat::ds_mla || f == QuantFormat::indexer_k || f == QuantFormat::fp8_inline || f == QuantFormat::int8_inline;
}

bool format_has_zero(QuantFormat f) { return f == QuantFormat::asym_int8 || f == QuantFormat::asym_int4; }

uint32_t rule_bits(QuantFormat f, const QuantRules& r) {
  const auto bit = [](RuleBit b) { return 1u << static_cast<unsigned>(b); };
  const auto asym = [&]() {
    return bit(static_cast<RuleBit>(static_cast<int>(RuleBit::asym_f32) + static_cast<int>(r.asym_arith))) |
           bit(r.asym_lanes == AsymLanes::exact ? RuleBit::asym_lanes_exact : RuleBit::asym_lanes_zero_padded_pow2);
  };
  switch (f) {
    case QuantFormat::nvfp4:
      return bit(r.nvfp4 == Nvfp4Rule::flashinfer ? RuleBit::nvfp4_flashinfer : RuleBit::nvfp4_flashinfer_precise) |
             bit(static_cast<RuleBit>(static_cast<int>(RuleBit::scale_layout_linear) + static_cast<int>(r.scale_layout)));
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4: return bit(r.mx == MxScaleRule::ocp_floor ? RuleBit::mx_ocp_floor : RuleBit::mx_nv_ceil);
    case QuantFormat::ds_mla: return bit(r.ds_mla == DsMlaScale::flt_min ? RuleBit::ds_mla_flt_min : RuleBit::ds_mla_pow2);
    case QuantFormat::indexer_k: return bit(static_cast<RuleBit>(static_cast<int>(RuleBit::indexer_fp32) + static_cast<int>(r.indexer)));
    case QuantFormat::asym_int8: return asym();
    case QuantFormat::asym_int4:
      return asym() | bit(r.int4_pairing == Int4Pairing::split_half ? RuleBit::int4_split_half : RuleBit::int4_adjacent);
    default: return 0;
  }
}

uint32_t default_rule_bits() {
  uint32_t bits = 0;
  for (const QuantFormat f : {QuantFormat::nvfp4, QuantFormat::mxfp4, QuantFormat::ds_mla, QuantFormat::indexer_k, QuantFormat::asym_int4})
    bits |= rule_bits(f, QuantRules{});
  return bits;
}

std::string_view to_string(RuleBit b) { return name_of(kRuleBitNames, b); }
std::optional<RuleBit> rule_bit_from_string(std::string_view s) { return value_of(kRuleBitNames, s); }

std::string_view to_string(QuantFormat f) { return name_of(kQuantFormatNames, f); }
std::string_view to_string(Nvfp4Rule v) { return name_of(kNvfp4Names, v); }
std::string_view to_string(MxScaleRule v) { return name_of(kMxNames, v); }
std::string_view to_string(DsMlaScale v) { return name_of(kDsMlaNames, v); }
std::string_view to_string(IndexerScale v) { return name_of(kIndexerNames, v); }
std::string_view to_string(AsymArith v) { return name_of(kArithNames, v); }
std::string_view to_string(AsymLanes v) { return name_of(kLanesNames, v); }
std::string_view to_string(Int4Pairing v) { return name_of(kPairingNames, v); }
std::string_view to_string(ScaleLayout v) { return name_of(kScaleLayoutNames, v); }
std::optional<QuantFormat> quant_format_from_string(std::string_view s) { return value_of(kQuantFormatNames, s); }
std::optional<Nvfp4Rule> nvfp4_rule_from_string(std::string_view s) { return value_of(kNvfp4Names, s); }
std::optional<MxScaleRule> mx_scale_rule_from_string(std::string_view s) { return value_of(kMxNames, s); }
std::optional<DsMlaScale> ds_mla_scale_from_string(std::string_view s) { return value_of(kDsMlaNames, s); }
std::optional<IndexerScale> indexer_scale_from_string(std::string_view s) { return value_of(kIndexerNames, s); }
std::optional<AsymArith> asym_arith_from_string(std::string_view s) { return value_of(kArithNames, s); }
std::optional<AsymLanes> asym_lanes_from_string(std::string_view s) { return value_of(kLanesNames, s); }
std::optional<Int4Pairing> int4_pairing_from_string(std::string_view s) { return value_of(kPairingNames, s); }
std::optional<ScaleLayout> scale_layout_from_string(std::string_view s) { return value_of(kScaleLayoutNames, s); }
std::string quoted_quant_formats() { return quote_all(kQuantFormatNames); }

template <> std::string quoted_names<QuantFormat>() { return quote_all(kQuantFormatNames); }
template <> std::string quoted_names<Nvfp4Rule>() { return quote_all(kNvfp4Names); }
template <> std::string quoted_names<MxScaleRule>() { return quote_all(kMxNames); }
template <> std::string quoted_names<DsMlaScale>() { return quote_all(kDsMlaNames); }
template <> std::string quoted_names<IndexerScale>() { return quote_all(kIndexerNames); }
template <> std::string quoted_names<AsymArith>() { return quote_all(kArithNames); }
template <> std::string quoted_names<AsymLanes>() { return quote_all(kLanesNames); }
template <> std::string quoted_names<Int4Pairing>() { return quote_all(kPairingNames); }
template <> std::string quoted_names<ScaleLayout>() { return quote_all(kScaleLayoutNames); }
template <> std::string quoted_names<RuleBit>() { return quote_all(kRuleBitNames); }

}  // namespace kvf
