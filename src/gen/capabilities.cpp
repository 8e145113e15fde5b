// capabilities.cpp — see capabilities.h.
#include "capabilities.h"

#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "base/errors.h"
#include "generate.h"
#include "materialize.h"
#include "base/rng.h"

namespace kvf {
namespace {

template <typename E>
bool has(uint32_t bits, E value) {
  const auto i = static_cast<unsigned>(value);
  return i < 32 && ((bits >> i) & 1u) != 0;
}

bool nhd_like(Layout l) { return l == Layout::paged_nhd || l == Layout::contiguous_bshd || l == Layout::packed_kv_nhd; }

// The strides of a cache with no gaps: [nb, bs, H, D] (NHD-like; packed K/V doubles the block),
// [nb, H, bs, D] (HND-like; content-packed K/V doubles the row). `dim` is 1 for scale caches (one
// fp32 per (block, pos, head)), which are never packed.
bool dense(const CacheGeometry& g, Layout layout, int64_t heads, int64_t dim, bool packed_kv) {
  const int64_t bs = g.block_size;
  if (layout == Layout::vllm_legacy && dim > 1)  // K [nb, H, D/x, bs, x], V [nb, H, D, bs]: D*bs per head
    return g.stride_head == dim * bs && g.stride_block == heads * dim * bs;
  if (layout == Layout::packed_content_hnd && packed_kv)
    return g.stride_pos == 2 * dim && g.stride_head == bs * 2 * dim && g.stride_block == heads * bs * 2 * dim;
  if (nhd_like(layout))
    return g.stride_head == dim && g.stride_pos == heads * dim && g.stride_block == (packed_kv ? 2 : 1) * bs * heads * dim;
  return g.stride_pos == dim && g.stride_head == bs * dim && g.stride_block == heads * bs * dim;
}

bool aligned16(int64_t elem_offset, int elem_size) { return (elem_offset * elem_size) % 16 == 0; }

std::string str(std::string_view s) { return std::string(s); }

// An empty set admits everything.
bool in_set(const std::vector<int32_t>& set, int32_t v) { return set.empty() || std::find(set.begin(), set.end(), v) != set.end(); }

std::string set_text(const std::vector<int32_t>& set) {
  std::string out;
  for (int32_t v : set) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return "{" + out + "}";
}

}  // namespace

std::string outside_reason(const Case& c, const Capabilities& k) {
  if (!has(k.families, c.family)) return "family " + str(to_string(c.family));
  if (!has(k.padding_modes, c.padding)) return "padding mode " + str(to_string(c.padding));
  if (!has(k.addressings, c.addressing)) return "addressing " + str(to_string(c.addressing));
  if (!has(k.windows, c.window_input)) return "window input " + str(to_string(c.window_input));
  if (!has(k.cp_inputs, c.cp_input)) return "context-parallel input " + str(to_string(c.cp_input));
  if (!has(k.quant_formats, c.quant_format)) return "quantised format " + str(to_string(c.quant_format));
  if (const uint32_t missing = rule_bits(c.quant_format, c.quant_rules) & ~k.quant_rules; missing != 0)
    for (int b = 0; b < kRuleBits; ++b)
      if (missing & (1u << b)) return "convention " + str(to_string(static_cast<RuleBit>(b)));
  if (!has(k.layouts, c.layout)) return "layout " + str(to_string(c.layout));
  if (!has(k.input_dtypes, c.input_dtype)) return "input dtype " + str(to_string(c.input_dtype));
  // A quantised format's codes and scales are the format's (quant_formats above), not a classic cache.
  if (!c.has_format() && !has(k.cache_dtypes, c.cache_dtype)) return "cache dtype " + str(to_string(c.cache_dtype));
  if (!c.has_format() && !has(k.scale_kinds, c.scale_kind)) return "scale kind " + str(to_string(c.scale_kind));
  if (k.same_input_cache_dtype && !is_quantized(c.cache_dtype) && c.cache_dtype != c.input_dtype)
    return "float cache of another dtype than the input";
  if (!has(k.slot_dtypes, c.slot_dtype)) return "slot dtype " + str(to_string(c.slot_dtype));
  if (k.min_head_dim > 0 && c.head_dim < k.min_head_dim) return "head_dim below " + std::to_string(k.min_head_dim);
  if (k.max_head_dim > 0 && c.head_dim > k.max_head_dim) return "head_dim above " + std::to_string(k.max_head_dim);
  if (k.head_dim_multiple > 1 && c.head_dim % k.head_dim_multiple != 0)
    return "head_dim not a multiple of " + std::to_string(k.head_dim_multiple);
  if (!in_set(k.head_dims, c.head_dim)) return "head_dim not in " + set_text(k.head_dims);
  if (c.family == Family::mla && !in_set(k.rope_dims, c.rope_dim)) return "rope_dim not in " + set_text(k.rope_dims);
  if (k.max_num_heads > 0 && c.num_heads > k.max_num_heads) return "num_heads above " + std::to_string(k.max_num_heads);
  const int64_t bs = c.cache.block_size;
  if (k.max_block_size > 0 && bs > k.max_block_size) return "block_size above " + std::to_string(k.max_block_size);
  if (k.block_size_pow2_only && (bs <= 0 || (bs & (bs - 1)) != 0)) return "block_size not a power of two";

  const int64_t H = c.num_heads, D = c.head_dim;
  const bool fused = c.num_q_heads > 0;
  if (fused && !k.fused_qkv) return "fused QKV input";
  const int64_t dense_row = fused ? (int64_t{c.num_q_heads} + 2 * H) * D : H * D;
  for (const InputView* v : {&c.key, &c.value})
    if (!k.strided_input && (v->stride_head != D || v->stride_token != dense_row)) return "strided input";
  const bool packed = c.layout == Layout::packed_kv_nhd || c.layout == Layout::packed_content_hnd;
  if (!k.padded_cache && !dense(c.cache, c.layout, H, D, packed)) return "padded cache strides";
  if (!k.padded_cache && c.scale_kind == ScaleKind::per_token_head && !dense(c.scale_cache, c.layout, H, 1, false))
    return "padded scale cache strides";
  if (!k.graph_padding_rows && c.num_input_rows > c.num_slots()) return "graph padding rows";
  if (!k.slots_past_capacity) {
    const int64_t capacity = c.capacity();
    if (std::any_of(c.slot_mapping.begin(), c.slot_mapping.end(), [&](int64_t s) { return s >= capacity; }))
      return "slots past the cache's capacity";
  }
  if (k.stride_granularity > 1) {
    const int64_t G = k.stride_granularity;
    const int64_t in = dtype_size(c.input_dtype), cache = c.has_format() ? 1 : dtype_size(c.cache_dtype);
    std::vector<int64_t> input = {c.key.stride_token, c.key.stride_head};
    if (c.has_value()) input.insert(input.end(), {c.value.stride_token, c.value.stride_head});
    if (c.family == Family::mla) input.insert(input.end(), {c.rope.stride_token, c.rope.stride_head});
    for (int64_t s : input)
      if (s * in % G != 0) return "input stride not a multiple of " + std::to_string(G) + " bytes";
    for (const CacheGeometry* geo : {&c.cache, &c.value_geometry()})
      for (int64_t s : {geo->stride_block, geo->stride_pos, geo->stride_head})
        if (s * cache % G != 0) return "cache stride not a multiple of " + std::to_string(G) + " bytes";
  }
  if (!k.unaligned) {
    const int in = dtype_size(c.input_dtype), cache = dtype_size(c.cache_dtype);
    bool ok = aligned16(c.key.offset, in) && aligned16(c.value.offset, in) && aligned16(c.cache_k_offset, cache) &&
              aligned16(c.cache_v_offset, cache);
    if (c.scale_kind == ScaleKind::per_token_head) ok = ok && aligned16(c.scale_k_offset, 4) && aligned16(c.scale_v_offset, 4);
    if (c.family == Family::mla) ok = ok && aligned16(c.rope.offset, in);  // k_pe's base too
    if (!ok) return "base pointer not 16-byte aligned";
  }
  return "";
}

namespace {

template <typename T>
bool any_weight(const Weighted<T>& w) {
  return std::any_of(w.weights.begin(), w.weights.end(), [](int x) { return x > 0; });
}

template <typename T>
std::string names(const Weighted<T>& w) {
  std::string out;
  for (const T& v : w.values) {
    if constexpr (std::is_integral_v<T>) {
      out += (out.empty() ? "" : ", ") + std::to_string(v);
    } else {
      out += (out.empty() ? "" : ", ") + str(to_string(v));
    }
  }
  return out.empty() ? "none" : out;
}

// The restricted list must keep a value the generator can draw (weight > 0).
template <typename T>
void require(const Profile& p, const Weighted<T>& full, const Weighted<T>& kept, const std::string& dimension,
             const std::string& supported) {
  if (any_weight(kept)) return;
  throw InputError("", "", "profile \"" + p.name + "\" has no " + dimension + " the target supports (profile: " +
                               names(full) + "; target: " + supported + "); choose a profile (--config) that has one");
}

template <typename E>
std::string bit_names(uint32_t bits, std::initializer_list<E> all) {
  std::string out;
  for (E e : all)
    if (has(bits, e)) out += (out.empty() ? "" : ", ") + str(to_string(e));
  return out.empty() ? "none" : out;
}

std::string limits_text(int32_t lo, int32_t hi, int32_t multiple) {
  std::string out = lo > 0 ? ">= " + std::to_string(lo) : "";
  if (hi > 0) out += (out.empty() ? "" : ", ") + ("<= " + std::to_string(hi));
  if (multiple > 1) out += (out.empty() ? "" : ", ") + ("multiples of " + std::to_string(multiple));
  return out;
}

constexpr std::initializer_list<Family> kFamilies = {Family::kv, Family::kv_split, Family::k_only, Family::mla};
constexpr std::initializer_list<Layout> kLayouts = {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd,
                                                    Layout::contiguous_bhsd, Layout::packed_kv_nhd,
                                                    Layout::packed_content_hnd, Layout::vllm_legacy};
constexpr std::initializer_list<DType> kDTypes = {DType::f16, DType::bf16, DType::f32,
                                                  DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
constexpr std::initializer_list<ScaleKind> kScaleKinds = {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_head,
                                                          ScaleKind::per_block, ScaleKind::per_token_head};
constexpr std::initializer_list<IndexType> kIndexTypes = {IndexType::i32, IndexType::i64};
constexpr std::initializer_list<PaddingMode> kPaddingModes = {PaddingMode::negative, PaddingMode::sink};
constexpr std::initializer_list<Addressing> kAddressings = {Addressing::slot_mapping, Addressing::csr};
constexpr std::initializer_list<WindowInput> kWindows = {WindowInput::none, WindowInput::slot_mapping, WindowInput::positions};
constexpr std::initializer_list<CpInput> kCpInputs = {CpInput::none, CpInput::slot_mapping, CpInput::positions};
constexpr std::initializer_list<QuantFormat> kQuantFormats = {
    QuantFormat::none,      QuantFormat::nvfp4,      QuantFormat::mxfp8_e4m3,  QuantFormat::mxfp8_e5m2,
    QuantFormat::mxfp4,     QuantFormat::ds_mla,     QuantFormat::indexer_k,   QuantFormat::fp8_inline,
    QuantFormat::int8_inline, QuantFormat::asym_int8, QuantFormat::asym_int4};
constexpr std::initializer_list<RuleBit> kRuleBitList = {
    RuleBit::nvfp4_flashinfer, RuleBit::nvfp4_flashinfer_precise, RuleBit::scale_layout_linear, RuleBit::scale_layout_swizzled_v,
    RuleBit::scale_layout_swizzled, RuleBit::mx_ocp_floor, RuleBit::mx_nv_ceil, RuleBit::ds_mla_flt_min, RuleBit::ds_mla_pow2,
    RuleBit::indexer_fp32, RuleBit::indexer_ue8m0_log2f, RuleBit::indexer_ue8m0_exact, RuleBit::asym_f32, RuleBit::asym_f16,
    RuleBit::asym_bf16, RuleBit::asym_lanes_exact, RuleBit::asym_lanes_zero_padded_pow2, RuleBit::int4_split_half,
    RuleBit::int4_adjacent};

}  // namespace

namespace {

// The bits of the names listed at j[key] (layouts, dtypes, ...), or ~0u when the key is missing.
template <typename E>
uint32_t name_bits(const nlohmann::json& j, const char* key, std::optional<E> (*parse)(std::string_view),
                   std::initializer_list<E> all, const char* what, const std::string& where) {
  if (!j.contains(key)) return ~0u;
  const std::string expected = std::string("a list of ") + what + " names (" + bit_names(~0u, all) + ")";
  const nlohmann::json& v = j.at(key);
  if (!v.is_array()) throw InputError(where, std::string("/") + key, "expected " + expected);
  uint32_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::optional<E> e = v[i].is_string() ? parse(v[i].get<std::string>()) : std::nullopt;
    if (!e || std::find(all.begin(), all.end(), *e) == all.end())
      throw InputError(where, std::string("/") + key + "/" + std::to_string(i), v[i].dump() + " is not one of " + expected);
    out |= 1u << static_cast<unsigned>(*e);
  }
  return out;
}

int32_t limit(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return 0;
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
    throw InputError(where, std::string("/") + key, v.dump() + " is not an integer >= 0 (0: no limit)");
  return static_cast<int32_t>(v.get<int64_t>());
}

// A byte count of 0 (any) or a power of two up to 4096.
int32_t granularity(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return 0;
  const nlohmann::json& v = j.at(key);
  const int64_t n = v.is_number_integer() ? v.get<int64_t>() : -1;
  if (n < 0 || n > 4096 || (n & (n - 1)) != 0)
    throw InputError(where, std::string("/") + key, v.dump() + " is not 0 (any) or a power of two of bytes up to 4096, e.g. 16");
  return static_cast<int32_t>(n);
}

bool flag(const nlohmann::json& j, const char* key, bool missing, const std::string& where) {
  if (!j.contains(key)) return missing;
  if (!j.at(key).is_boolean()) throw InputError(where, std::string("/") + key, j.at(key).dump() + " is not true or false");
  return j.at(key).get<bool>();
}

// KEY's list of dims, ascending and distinct; empty when absent.
std::vector<int32_t> dim_set(const nlohmann::json& j, const char* key, const char* what, const char* example,
                             const std::string& where) {
  std::vector<int32_t> out;
  if (!j.contains(key)) return out;
  const nlohmann::json& v = j.at(key);
  const std::string expected = std::string("a non-empty list of ") + what + ", integers 1..4096 (e.g. " + example + ")";
  if (!v.is_array() || v.empty()) throw InputError(where, std::string("/") + key, "expected " + expected);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() < 1 || v[i].get<int64_t>() > 4096)
      throw InputError(where, std::string("/") + key + "/" + std::to_string(i), v[i].dump() + " is not in " + expected);
    out.push_back(static_cast<int32_t>(v[i].get<int64_t>()));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

constexpr const char* kFeatureNames[] = {"fused_qkv", "strided_input", "padded_cache", "graph_padding_rows",
                                         "invalid_slot_counter", "unaligned"};

}  // namespace

Capabilities capabilities_from_json(const nlohmann::json& j, const std::string& where) {
  static const char* const keys[] = {"layouts", "input_dtypes", "cache_dtypes", "scale_kinds", "slot_dtypes", "families", "padding_modes", "addressings", "windows", "cp_inputs", "quant_formats", "quant_rules", "features",
                                     "head_dims", "min_head_dim", "max_head_dim", "head_dim_multiple", "max_num_heads",
                                     "max_block_size", "block_size_pow2_only", "same_input_cache_dtype", "slots_past_capacity", "rope_dims",
                                     "stride_granularity"};
  std::string known;
  for (const char* k : keys) known += (known.empty() ? "" : ", ") + std::string(k);
  if (!j.is_object()) throw InputError(where, "", "expected a dict of capabilities with the keys " + known);
  for (const auto& item : j.items()) {
    const std::string key = item.key();  // a plain local: clang 14 cannot capture structured bindings
    if (std::find_if(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; }) == std::end(keys))
      throw InputError(where, "/" + key, "unknown key \"" + key + "\"; the keys are " + known);
  }
  Capabilities c;
  c.layouts = name_bits<Layout>(j, "layouts", layout_from_string, kLayouts, "layout", where);
  c.input_dtypes = name_bits<DType>(j, "input_dtypes", dtype_from_string, {DType::f16, DType::bf16, DType::f32}, "input dtype", where);
  c.cache_dtypes = name_bits<DType>(j, "cache_dtypes", dtype_from_string, kDTypes, "cache dtype", where);
  c.scale_kinds = name_bits<ScaleKind>(j, "scale_kinds", scale_kind_from_string, kScaleKinds, "scale kind", where);
  c.slot_dtypes = name_bits<IndexType>(j, "slot_dtypes", index_type_from_string, kIndexTypes, "slot dtype", where);
  c.families = name_bits<Family>(j, "families", family_from_string, kFamilies, "format family", where);
  c.padding_modes = name_bits<PaddingMode>(j, "padding_modes", padding_mode_from_string, kPaddingModes, "padding mode", where);
  c.addressings = name_bits<Addressing>(j, "addressings", addressing_from_string, kAddressings, "addressing", where);
  c.windows = name_bits<WindowInput>(j, "windows", window_input_from_string, kWindows, "window input", where);
  c.cp_inputs = name_bits<CpInput>(j, "cp_inputs", cp_input_from_string, kCpInputs, "context-parallel input", where);
  c.quant_formats = name_bits<QuantFormat>(j, "quant_formats", quant_format_from_string, kQuantFormats, "quantised format", where);
  c.quant_rules = name_bits<RuleBit>(j, "quant_rules", rule_bit_from_string, kRuleBitList, "format convention", where);
  if (j.contains("features")) {
    std::string names;
    for (const char* f : kFeatureNames) names += (names.empty() ? "" : ", ") + std::string(f);
    const nlohmann::json& v = j.at("features");
    if (!v.is_array()) throw InputError(where, "/features", "expected a list of feature names (" + names + ")");
    std::vector<std::string> given;
    for (size_t i = 0; i < v.size(); ++i) {
      const bool ok = v[i].is_string() && std::find_if(std::begin(kFeatureNames), std::end(kFeatureNames), [&](const char* f) {
                                            return v[i].get<std::string>() == f;
                                          }) != std::end(kFeatureNames);
      if (!ok) throw InputError(where, "/features/" + std::to_string(i), v[i].dump() + " is not one of the features " + names);
      given.push_back(v[i].get<std::string>());
    }
    const auto has_feature = [&](const char* f) { return std::find(given.begin(), given.end(), f) != given.end(); };
    c.fused_qkv = has_feature("fused_qkv");
    c.strided_input = has_feature("strided_input");
    c.padded_cache = has_feature("padded_cache");
    c.graph_padding_rows = has_feature("graph_padding_rows");
    c.invalid_slot_counter = has_feature("invalid_slot_counter");
    c.unaligned = has_feature("unaligned");
  }
  c.head_dims = dim_set(j, "head_dims", "head dims", "[64, 128, 256]", where);
  c.rope_dims = dim_set(j, "rope_dims", "rope dims", "[64]", where);
  c.min_head_dim = limit(j, "min_head_dim", where);
  c.max_head_dim = limit(j, "max_head_dim", where);
  c.head_dim_multiple = limit(j, "head_dim_multiple", where);
  c.max_num_heads = limit(j, "max_num_heads", where);
  c.max_block_size = limit(j, "max_block_size", where);
  c.block_size_pow2_only = flag(j, "block_size_pow2_only", false, where);
  c.same_input_cache_dtype = flag(j, "same_input_cache_dtype", false, where);
  c.slots_past_capacity = flag(j, "slots_past_capacity", true, where);
  c.stride_granularity = granularity(j, "stride_granularity", where);
  return c;
}

namespace {

template <typename E>
nlohmann::json bit_list(uint32_t bits, std::initializer_list<E> all) {
  nlohmann::json out = nlohmann::json::array();
  for (E e : all)
    if (has(bits, e)) out.push_back(str(to_string(e)));
  return out;
}

}  // namespace

nlohmann::json capabilities_to_json(const Capabilities& c) {
  nlohmann::json j;
  j["layouts"] = bit_list(c.layouts, kLayouts);
  j["families"] = bit_list(c.families, kFamilies);
  j["padding_modes"] = bit_list(c.padding_modes, kPaddingModes);
  j["addressings"] = bit_list(c.addressings, kAddressings);
  j["windows"] = bit_list(c.windows, kWindows);
  j["cp_inputs"] = bit_list(c.cp_inputs, kCpInputs);
  j["quant_formats"] = bit_list(c.quant_formats, kQuantFormats);
  j["quant_rules"] = bit_list(c.quant_rules, kRuleBitList);
  j["input_dtypes"] = bit_list(c.input_dtypes, {DType::f16, DType::bf16, DType::f32});
  j["cache_dtypes"] = bit_list(c.cache_dtypes, kDTypes);
  j["scale_kinds"] = bit_list(c.scale_kinds, kScaleKinds);
  j["slot_dtypes"] = bit_list(c.slot_dtypes, kIndexTypes);
  const bool features[] = {c.fused_qkv, c.strided_input, c.padded_cache, c.graph_padding_rows, c.invalid_slot_counter, c.unaligned};
  j["features"] = nlohmann::json::array();
  for (size_t i = 0; i < std::size(kFeatureNames); ++i)
    if (features[i]) j["features"].push_back(kFeatureNames[i]);
  if (!c.head_dims.empty()) j["head_dims"] = c.head_dims;
  if (!c.rope_dims.empty()) j["rope_dims"] = c.rope_dims;
  j["min_head_dim"] = c.min_head_dim;
  j["max_head_dim"] = c.max_head_dim;
  j["head_dim_multiple"] = c.head_dim_multiple;
  j["max_num_heads"] = c.max_num_heads;
  j["max_block_size"] = c.max_block_size;
  j["block_size_pow2_only"] = c.block_size_pow2_only;
  j["same_input_cache_dtype"] = c.same_input_cache_dtype;
  j["slots_past_capacity"] = c.slots_past_capacity;
  j["stride_granularity"] = c.stride_granularity;
  return j;
}

std::string formats_text(const Capabilities& c) {
  return "layouts " + bit_names(c.layouts, kLayouts) + "; families " + bit_names(c.families, kFamilies) + "; padding " +
         bit_names(c.padding_modes, kPaddingModes) + "; addressing " + bit_names(c.addressings, kAddressings) + "; window " +
         bit_names(c.windows, kWindows) + "; context parallel " + bit_names(c.cp_inputs, kCpInputs) +
         "; quantised formats " + bit_names(c.quant_formats, kQuantFormats);
}

Profile restrict_profile(const Profile& p, const Capabilities& k) {
  Profile r = p;
  r.families = only(p.families, [&](Family f) { return has(k.families, f); });
  require(p, p.families, r.families, "format family", bit_names(k.families, kFamilies));
  r.padding_modes = only(p.padding_modes, [&](PaddingMode m) { return has(k.padding_modes, m); });
  require(p, p.padding_modes, r.padding_modes, "padding mode", bit_names(k.padding_modes, kPaddingModes));
  r.addressings = only(p.addressings, [&](Addressing a) { return has(k.addressings, a); });
  require(p, p.addressings, r.addressings, "addressing", bit_names(k.addressings, kAddressings));
  r.window_inputs = only(p.window_inputs, [&](WindowInput w) { return has(k.windows, w); });
  if (!any_weight(r.window_inputs)) r.ring_percent = 0;  // no ring the kernel takes: none drawn
  r.cp_inputs = only(p.cp_inputs, [&](CpInput i) { return has(k.cp_inputs, i); });
  if (!any_weight(r.cp_inputs)) r.cp_percent = 0;  // no shards the kernel takes: none drawn
  r.quant_formats = only(p.quant_formats, [&](QuantFormat f) { return has(k.quant_formats, f); });
  if (!any_weight(r.quant_formats)) r.format_percent = 0;  // no format the kernel writes: none drawn
  // Each convention list keeps what the kernel follows; one it follows none of stays as it is (its
  // format's cases are then skipped and counted).
  const auto follows = [&](auto& list, auto bit_of) {
    auto kept = only(list, [&](auto v) { return (k.quant_rules >> static_cast<unsigned>(bit_of(v)) & 1u) != 0; });
    if (any_weight(kept)) list = kept;
  };
  follows(r.nvfp4_rules, [](Nvfp4Rule v) { return v == Nvfp4Rule::flashinfer ? RuleBit::nvfp4_flashinfer : RuleBit::nvfp4_flashinfer_precise; });
  follows(r.scale_layouts, [](ScaleLayout v) { return static_cast<RuleBit>(static_cast<int>(RuleBit::scale_layout_linear) + static_cast<int>(v)); });
  follows(r.mx_rules, [](MxScaleRule v) { return v == MxScaleRule::ocp_floor ? RuleBit::mx_ocp_floor : RuleBit::mx_nv_ceil; });
  follows(r.ds_mla_rules, [](DsMlaScale v) { return v == DsMlaScale::flt_min ? RuleBit::ds_mla_flt_min : RuleBit::ds_mla_pow2; });
  follows(r.indexer_rules, [](IndexerScale v) { return static_cast<RuleBit>(static_cast<int>(RuleBit::indexer_fp32) + static_cast<int>(v)); });
  follows(r.asym_ariths, [](AsymArith v) { return static_cast<RuleBit>(static_cast<int>(RuleBit::asym_f32) + static_cast<int>(v)); });
  follows(r.asym_lanes, [](AsymLanes v) { return v == AsymLanes::exact ? RuleBit::asym_lanes_exact : RuleBit::asym_lanes_zero_padded_pow2; });
  follows(r.int4_pairings, [](Int4Pairing v) { return v == Int4Pairing::split_half ? RuleBit::int4_split_half : RuleBit::int4_adjacent; });
  r.layouts = only(p.layouts, [&](Layout l) { return has(k.layouts, l); });
  require(p, p.layouts, r.layouts, "layout", bit_names(k.layouts, kLayouts));
  r.input_dtypes = only(p.input_dtypes, [&](DType t) { return has(k.input_dtypes, t); });
  require(p, p.input_dtypes, r.input_dtypes, "input dtype", bit_names(k.input_dtypes, kDTypes));
  r.slot_dtypes = only(p.slot_dtypes, [&](IndexType t) { return has(k.slot_dtypes, t); });
  require(p, p.slot_dtypes, r.slot_dtypes, "slot dtype", bit_names(k.slot_dtypes, kIndexTypes));
  r.num_heads = only(p.num_heads, [&](int32_t h) { return k.max_num_heads <= 0 || h <= k.max_num_heads; });
  require(p, p.num_heads, r.num_heads, "head count", limits_text(0, k.max_num_heads, 0));
  r.block_sizes = only(p.block_sizes, [&](int32_t bs) {
    return (k.max_block_size <= 0 || bs <= k.max_block_size) && (!k.block_size_pow2_only || (bs & (bs - 1)) == 0);
  });
  require(p, p.block_sizes, r.block_sizes, "block size",
          limits_text(0, k.max_block_size, 0) + (k.block_size_pow2_only ? " (powers of two)" : ""));

  // Cache dtypes and quantisation: which of the three kinds of case (profile.h) remain possible.
  r.cache_dtypes = only(p.cache_dtypes, [&](DType t) { return has(k.cache_dtypes, t); });
  r.scale_kinds = only(p.scale_kinds, [&](ScaleKind s) { return has(k.scale_kinds, s); });
  const bool float_caches = has(k.scale_kinds, ScaleKind::none);
  const bool cross_ok = float_caches && !k.same_input_cache_dtype &&
                        any_weight(only(r.cache_dtypes, [](DType t) { return !is_quantized(t); }));
  const bool quant_ok = any_weight(only(r.cache_dtypes, [](DType t) { return is_quantized(t); })) && any_weight(r.scale_kinds);
  const bool copy_ok = float_caches && any_weight(only(r.input_dtypes, [&](DType t) { return has(k.cache_dtypes, t); }));
  // The three kinds' shares, impossible ones zeroed and the rest scaled to fill 100 (a profile of
  // quantised cases only stays that: it does not become a campaign of copies).
  const int copy = copy_ok ? 100 - p.cross_dtype_percent - p.quant_percent : 0;
  const int cross = cross_ok ? p.cross_dtype_percent : 0;
  const int quant = quant_ok ? p.quant_percent : 0;
  const int total = copy + cross + quant;
  // A kernel that writes quantised formats only (no NONE bit: a ds_mla or indexer writer) gets every
  // case in one of them; the classic dtypes then only seed the draw (fit_format() replaces them).
  const bool classic = has(k.quant_formats, QuantFormat::none) && total > 0;
  if (!classic) {
    if (r.format_percent == 0 || !any_weight(r.quant_formats))
      throw InputError("", "", "profile \"" + p.name + "\" generates no cache the target supports (target: cache dtypes " +
                                   bit_names(k.cache_dtypes, kDTypes) + ", scale kinds " + bit_names(k.scale_kinds, kScaleKinds) +
                                   (k.same_input_cache_dtype ? ", float caches of the input's dtype only" : "") +
                                   ", quantised formats " + bit_names(k.quant_formats, kQuantFormats) + "; profile: formats " +
                                   (p.format_percent == 0 ? std::string("none (format_percent 0)") : names(p.quant_formats)) +
                                   "); choose a profile (--config) whose cases it supports");
    r.format_percent = 100;
    r.cache_dtypes = p.cache_dtypes;
    r.scale_kinds = p.scale_kinds;
    r.cross_dtype_percent = 0;
    r.quant_percent = 0;
  } else {
    r.cross_dtype_percent = cross * 100 / total;
    r.quant_percent = copy == 0 ? 100 - r.cross_dtype_percent : quant * 100 / total;
  }

  // Without unaligned base pointers, head dims whose rows are not whole 16-byte units would put the V
  // tensor (or fused views) at unaligned addresses in most cases.
  int smallest = 4;
  for (DType t : r.input_dtypes.values) smallest = std::min(smallest, dtype_size(t));
  if (r.quant_percent > 0 || r.cross_dtype_percent > 0)
    for (DType t : r.cache_dtypes.values) smallest = std::min(smallest, dtype_size(t));
  const auto fits = [&](int64_t d) {
    return (k.min_head_dim <= 0 || d >= k.min_head_dim) && (k.max_head_dim <= 0 || d <= k.max_head_dim) &&
           (k.head_dim_multiple <= 1 || d % k.head_dim_multiple == 0) && in_set(k.head_dims, d) &&
           (k.unaligned || (d * smallest) % 16 == 0) && (k.stride_granularity <= 1 || (d * smallest) % k.stride_granularity == 0);
  };
  // A profile's head dim is kv_c's dims for an MLA entry, which is that plus a rope dim (generate.cpp):
  // the target's limits apply to the entry's whole width, as it declares them.
  const bool draws_mla = any_weight(only(r.families, [](Family f) { return f == Family::mla; }));
  const bool draws_other = any_weight(only(r.families, [](Family f) { return f != Family::mla; }));
  r.head_dims = only(p.head_dims, [&](int32_t d) {
    if (draws_other && fits(d)) return true;
    if (draws_mla)
      for (size_t i = 0; i < p.rope_dims.values.size(); ++i)
        if (p.rope_dims.weights[i] > 0 && fits(d + p.rope_dims.values[i])) return true;  // rope dims: below
    return false;
  });
  const std::string limits = limits_text(k.min_head_dim, k.max_head_dim, k.head_dim_multiple);
  require(p, p.head_dims, r.head_dims, "head_dim",
          limits + (k.head_dims.empty() ? "" : (limits.empty() ? "" : ", ") + ("one of " + set_text(k.head_dims))) +
              (k.unaligned ? "" : " (without unaligned pointers: rows of whole 16-byte units)") +
              (k.stride_granularity > 1 ? " (strides in " + std::to_string(k.stride_granularity) + "-byte units: rows of whole units)" : ""));

  if (!k.fused_qkv) r.fused_qkv_percent = 0;
  // Gaps stretch input and cache strides alike; distinct K/V views are strided inputs; odd bases are
  // unaligned pointers. Odd slot values (irregular) are part of every kernel's contract.
  if (!(k.strided_input && k.padded_cache)) r.gapped_strides_percent = 0;
  if (!k.unaligned) r.misaligned_bases_percent = 0;
  if (k.stride_granularity > 1) r.stride_gap_bytes = std::max(r.stride_gap_bytes, k.stride_granularity);
  if (!k.strided_input) r.kv_views = {{KvViews::alike}, {1}};
  // MLA entries: only the rope dims the kernel takes; none left, no MLA case (ds_mla's 64 is fit_format's).
  r.rope_dims = only(p.rope_dims, [&](int32_t d) { return in_set(k.rope_dims, d); });
  if (!any_weight(r.rope_dims)) {
    r.families = only(r.families, [](Family f) { return f != Family::mla; });
    require(p, p.families, r.families, "format family",
            bit_names(k.families, kFamilies) + " (mla only with rope dims " + set_text(k.rope_dims) + ", which the profile does not draw)");
  }
  if (!k.graph_padding_rows) r.max_extra_input_rows = 0;
  if (!k.slots_past_capacity) r.max_invalid_slots = 0;
  return r;
}

CaseSource::CaseSource(const Profile& profile, const std::optional<Capabilities>& caps)
    : profile_(profile), caps_(caps), restricted_(caps ? restrict_profile(profile, *caps) : profile) {}

std::string CaseSource::outside_reason(const Case& c) const { return caps_ ? kvf::outside_reason(c, *caps_) : ""; }

DrawnCase CaseSource::draw(uint64_t seed, int64_t index) const {
  DrawnCase d;
  d.genotype = generate_case(profile_, seed, index);
  d.kase = materialize(d.genotype);
  d.outside = outside_reason(d.kase);
  if (d.outside.empty()) return d;
  // Redraws from the restricted profile, each from its own seed so that a constraint the profile
  // cannot express (a contiguous cache's block size) gets several chances.
  constexpr int kRedraws = 8;
  constexpr uint64_t kRedrawSalt = 0x726564726177ull;  // "redraw"
  for (int attempt = 0; attempt < kRedraws; ++attempt) {
    Genotype g = generate_case(restricted_, mix64(seed ^ mix64(kRedrawSalt + static_cast<uint64_t>(attempt))), index);
    Case c = materialize(g);
    if (outside_reason(c).empty()) {
      d.genotype = std::move(g);
      d.kase = std::move(c);
      return d;
    }
  }
  d.skipped = true;
  return d;
}

DrawnCase CaseSource::redraw(uint64_t seed, int64_t index, int attempt) const {
  constexpr uint64_t kSkipSalt = 0x6b736b6970ull;  // "kskip"
  DrawnCase d;
  d.genotype = generate_case(restricted_, mix64(seed ^ mix64(kSkipSalt + static_cast<uint64_t>(attempt))), index);
  d.kase = materialize(d.genotype);
  d.outside = outside_reason(d.kase);
  d.skipped = !d.outside.empty();
  return d;
}

}  // namespace kvf
