// profile.cpp — campaign profiles: the strict configs/*.json loader and the built-in default.
//
// A profile file is one JSON object, schema "kvfuzz-config", version 1, holding every Profile
// field (profile.h) and nothing else. Weighted choices are {"values": [...], "weights": [...]}.
// Every problem is an InputError naming the file, the JSON pointer and the expected form.
#include "profile.h"

#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "base/json.h"  // pointer_token: keys and names echoed in messages
#include "case/case_json.h"

namespace kvf {
namespace {

using nlohmann::json;

constexpr std::string_view kSchema = "kvfuzz-config";
constexpr int kVersion = 1;

// Reads one profile object; `file` names the file in every error, or, for a key a partial profile
// took from the profile it extends, `origin` names that profile's file.
class ProfileReader {
 public:
  explicit ProfileReader(std::string file, std::map<std::string, std::string> origin = {})
      : file_(std::move(file)), origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    const std::string key = path.size() > 1 ? path.substr(1, path.find('/', 1) - 1) : std::string();
    const auto it = origin_.find(key);
    if (it == origin_.end()) throw InputError(file_, path, message);
    throw InputError(it->second, path, message + " (taken by " + file_ + " from the profile it extends)");
  }

  // A JSON integer in [lo, hi]; booleans and fractions are refused.
  int64_t integer(const json& j, const std::string& path, int64_t lo, int64_t hi) const {
    if (!j.is_number_integer()) fail(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    // Unsigned values beyond int64 are out of range too.
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi)
      fail(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
    return v;
  }

  std::string string(const json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, "expected a string");
    return j.get<std::string>();
  }

  // {"values": [...], "weights": [...]}: values parsed by `parse_value(json, path)`, distinct;
  // weights integers >= 0, same count, not all zero.
  template <typename T, typename ParseValue>
  Weighted<T> weighted(const json& j, const std::string& path, ParseValue parse_value) const {
    if (!j.is_object()) fail(path, "expected an object {\"values\": [...], \"weights\": [...]}");
    for (const auto& [key, _] : j.items())
      if (key != "values" && key != "weights")
        fail(path + "/" + pointer_token(key), "unknown key; expected only \"values\" and \"weights\"");
    if (!j.contains("values")) fail(path, "missing key \"values\" (a non-empty array, simplest first)");
    if (!j.contains("weights")) fail(path, "missing key \"weights\" (an array of integers >= 0, one per value)");
    const json& values = j.at("values");
    const json& weights = j.at("weights");
    if (!values.is_array() || values.empty()) fail(path + "/values", "expected a non-empty array, simplest value first");
    if (!weights.is_array()) fail(path + "/weights", "expected an array of integers >= 0, one per value");
    if (weights.size() != values.size())
      fail(path + "/weights", "expected " + std::to_string(values.size()) + " weights (one per value), got " +
                                  std::to_string(weights.size()));
    Weighted<T> w;
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string p = path + "/values/" + std::to_string(i);
      T v = parse_value(values[i], p);
      for (const T& earlier : w.values)
        if (earlier == v) fail(p, "duplicate value; each value may appear once");
      w.values.push_back(v);
    }
    int64_t total = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const int64_t x = integer(weights[i], path + "/weights/" + std::to_string(i), 0, 1'000'000);
      w.weights.push_back(static_cast<int>(x));
      total += x;
    }
    if (total == 0) fail(path + "/weights", "expected at least one weight > 0");
    return w;
  }

  // A weighted list of integers in [lo, hi].
  Weighted<int32_t> weighted_int(const json& j, const std::string& path, int32_t lo, int32_t hi) const {
    return weighted<int32_t>(j, path, [&](const json& v, const std::string& p) {
      return static_cast<int32_t>(integer(v, p, lo, hi));
    });
  }

  // A weighted list of enum names, parsed by `from_string` (std::nullopt = unknown name).
  template <typename E, typename FromString>
  Weighted<E> weighted_enum(const json& j, const std::string& path, FromString from_string,
                            const std::string& expected) const {
    return weighted<E>(j, path, [&](const json& v, const std::string& p) {
      if (!v.is_string()) fail(p, "expected a string, one of " + expected);
      const std::optional<E> e = from_string(v.get<std::string>());
      if (!e) fail(p, "unknown name \"" + pointer_token(v.get<std::string>()) + "\"; expected one of " + expected);
      return *e;
    });
  }

 private:
  std::string file_;
  std::map<std::string, std::string> origin_;  // top-level key -> file it came from, when not file_
};

// Every key of a profile file, in the order default.json lists them.
const std::set<std::string>& profile_keys() {
  static const std::set<std::string> keys = {
      "schema", "version", "name", "layouts", "block_sizes", "num_heads", "head_dims", "gqa_ratios",
      "fused_qkv_percent", "input_dtypes", "cross_dtype_percent", "quant_percent", "cache_dtypes",
      "scale_kinds", "scale_dists", "slot_dtypes",
      "value_dists", "max_requests", "max_context_len", "max_new_len", "decode_percent",
      "idle_percent", "max_padding", "max_invalid_slots", "max_extra_input_rows", "max_spare_blocks",
      "irregular_percent", "max_elements_per_case"};
  return keys;
}

// Keys a profile may leave out (profile.h says their defaults).
const std::set<std::string>& optional_profile_keys() {
  static const std::set<std::string> keys = {"gapped_strides_percent", "misaligned_bases_percent", "stride_gap_bytes", "kv_views",
                                             "families", "value_head_dims", "rope_dims", "padding_modes", "addressings", "ring_percent", "window_inputs",
                                             "cp_percent", "cp_inputs", "cp_world_sizes", "cp_interleaves",
                                             "format_percent", "quant_formats", "nvfp4_rules", "scale_layouts", "mx_rules",
                                             "ds_mla_rules", "indexer_rules", "asym_ariths", "asym_lanes", "int4_pairings",
                                             "scattered_positions_percent", "shared_prefix_percent",
                                             "max_shared_prefix_blocks", "min_tensor_elements"};
  return keys;
}

// The smallest positive-weight value of a weighted list.
template <typename T>
T smallest_drawn(const Weighted<T>& w) {
  T m = w.values.front();
  bool any = false;
  for (size_t i = 0; i < w.values.size(); ++i)
    if (w.weights[i] > 0 && (!any || w.values[i] < m)) {
      m = w.values[i];
      any = true;
    }
  return m;
}

// Schema and version first: a newer kvfuzz's profile may have keys this one does not know.
void check_schema(const json& j, const ProfileReader& r) {
  if (!j.is_object()) r.fail("", "expected a JSON object (schema \"kvfuzz-config\")");
  if (!j.contains("schema")) r.fail("/schema", "missing key \"schema\"; expected \"kvfuzz-config\"");
  if (r.string(j.at("schema"), "/schema") != kSchema) r.fail("/schema", "expected \"kvfuzz-config\"");
  if (!j.contains("version")) r.fail("/version", "missing key \"version\"; expected the integer 1");
  const json& jv = j.at("version");
  if (jv.is_number_unsigned() && jv.get<uint64_t>() > static_cast<uint64_t>(kVersion))
    r.fail("/version", "version " + jv.dump() + " was written by a newer kvfuzz; this one reads version 1");
  const int64_t version = r.integer(jv, "/version", 0, std::numeric_limits<int32_t>::max());
  if (version != kVersion) r.fail("/version", "expected 1");
}

Profile profile_from_json(const json& j, const ProfileReader& r) {
  check_schema(j, r);
  for (const auto& [key, _] : j.items())
    if (!profile_keys().count(key) && !optional_profile_keys().count(key))
      r.fail("/" + pointer_token(key), "unknown key; see configs/default.json for the accepted keys");
  for (const std::string& key : profile_keys())
    if (!j.contains(key)) r.fail("", "missing key \"" + key + "\"; see configs/default.json for the full form");

  const std::string layouts = "paged_nhd, paged_hnd, contiguous_bshd, contiguous_bhsd, packed_kv_nhd, packed_content_hnd, vllm_legacy";
  const std::string float_dtypes = "f16, bf16, f32";
  const std::string dtypes = "f16, bf16, f32, fp8_e4m3, fp8_e5m2, int8";
  const std::string scale_kinds = "per_tensor, per_head, per_block, per_token_head";
  Profile p;
  p.name = r.string(j.at("name"), "/name");
  if (p.name.empty()) r.fail("/name", "expected a non-empty name");
  p.layouts = r.weighted_enum<Layout>(j.at("layouts"), "/layouts", layout_from_string, layouts);
  p.block_sizes = r.weighted_int(j.at("block_sizes"), "/block_sizes", 1, 4096);
  p.num_heads = r.weighted_int(j.at("num_heads"), "/num_heads", 1, 1024);
  p.head_dims = r.weighted_int(j.at("head_dims"), "/head_dims", 1, 4096);
  p.gqa_ratios = r.weighted_int(j.at("gqa_ratios"), "/gqa_ratios", 1, 64);
  p.fused_qkv_percent = static_cast<int>(r.integer(j.at("fused_qkv_percent"), "/fused_qkv_percent", 0, 100));
  p.input_dtypes = r.weighted_enum<DType>(j.at("input_dtypes"), "/input_dtypes", dtype_from_string, float_dtypes);
  for (size_t i = 0; i < p.input_dtypes.values.size(); ++i)
    if (!is_classic_cache_dtype(p.input_dtypes.values[i]) || is_quantized(p.input_dtypes.values[i]))
      r.fail("/input_dtypes/values/" + std::to_string(i),
             "\"" + std::string(to_string(p.input_dtypes.values[i])) +
                 "\" is quantised, and quantised dtypes are cache-only; expected one of " + float_dtypes);
  p.cross_dtype_percent = static_cast<int>(r.integer(j.at("cross_dtype_percent"), "/cross_dtype_percent", 0, 100));
  p.quant_percent = static_cast<int>(r.integer(j.at("quant_percent"), "/quant_percent", 0, 100));
  if (p.cross_dtype_percent + p.quant_percent > 100)
    r.fail("/quant_percent", "expected cross_dtype_percent + quant_percent <= 100, got " +
                                 std::to_string(p.cross_dtype_percent + p.quant_percent));
  p.cache_dtypes = r.weighted_enum<DType>(j.at("cache_dtypes"), "/cache_dtypes", dtype_from_string, dtypes);
  for (size_t i = 0; i < p.cache_dtypes.values.size(); ++i)
    if (!is_classic_cache_dtype(p.cache_dtypes.values[i]))
      r.fail("/cache_dtypes/values/" + std::to_string(i), "\"" + std::string(to_string(p.cache_dtypes.values[i])) +
                                                              "\" belongs to the quantised formats (quant_formats, format_percent); expected one of " + dtypes);
  bool float_weight = false, quant_weight = false;  // some entry of that class with weight > 0
  for (size_t i = 0; i < p.cache_dtypes.values.size(); ++i) {
    if (p.cache_dtypes.weights[i] == 0) continue;
    if (is_quantized(p.cache_dtypes.values[i])) {
      quant_weight = true;
    } else {
      float_weight = true;
    }
  }
  if (p.quant_percent > 0 && !quant_weight)
    r.fail("/cache_dtypes", "quant_percent is " + std::to_string(p.quant_percent) +
                                " but no quantised dtype (fp8_e4m3, fp8_e5m2, int8) has a weight > 0");
  if (p.cross_dtype_percent > 0 && !float_weight)
    r.fail("/cache_dtypes", "cross_dtype_percent is " + std::to_string(p.cross_dtype_percent) +
                                " but no float dtype (f16, bf16, f32) has a weight > 0");
  p.scale_kinds = r.weighted_enum<ScaleKind>(j.at("scale_kinds"), "/scale_kinds", scale_kind_from_string, scale_kinds);
  for (size_t i = 0; i < p.scale_kinds.values.size(); ++i)
    if (p.scale_kinds.values[i] == ScaleKind::none)
      r.fail("/scale_kinds/values/" + std::to_string(i),
             "\"none\" is implied for float caches and never drawn for quantised ones; expected one of " + scale_kinds);
  p.scale_dists = r.weighted_enum<ScaleDist>(j.at("scale_dists"), "/scale_dists", scale_dist_from_string,
                                             "unit, pow2, random, extreme");
  p.slot_dtypes = r.weighted_enum<IndexType>(j.at("slot_dtypes"), "/slot_dtypes", index_type_from_string, "i32, i64");
  p.value_dists = r.weighted_enum<ValueDist>(j.at("value_dists"), "/value_dists", value_dist_from_string,
                                              "finite, special, constant, ties, edges");
  p.max_requests = static_cast<int32_t>(r.integer(j.at("max_requests"), "/max_requests", 1, 4096));
  p.max_context_len = static_cast<int32_t>(r.integer(j.at("max_context_len"), "/max_context_len", 0, 1 << 20));
  p.max_new_len = static_cast<int32_t>(r.integer(j.at("max_new_len"), "/max_new_len", 1, 1 << 20));
  p.decode_percent = static_cast<int>(r.integer(j.at("decode_percent"), "/decode_percent", 0, 100));
  p.idle_percent = static_cast<int>(r.integer(j.at("idle_percent"), "/idle_percent", 0, 100));
  if (p.decode_percent + p.idle_percent > 100)
    r.fail("/idle_percent", "expected decode_percent + idle_percent <= 100, got " +
                                std::to_string(p.decode_percent + p.idle_percent));
  p.max_padding = static_cast<int32_t>(r.integer(j.at("max_padding"), "/max_padding", 0, 1 << 16));
  p.max_invalid_slots = static_cast<int32_t>(r.integer(j.at("max_invalid_slots"), "/max_invalid_slots", 0, 1 << 16));
  p.max_extra_input_rows =
      static_cast<int32_t>(r.integer(j.at("max_extra_input_rows"), "/max_extra_input_rows", 0, 1 << 16));
  p.max_spare_blocks = static_cast<int32_t>(r.integer(j.at("max_spare_blocks"), "/max_spare_blocks", 0, 1 << 16));
  p.irregular_percent = static_cast<int>(r.integer(j.at("irregular_percent"), "/irregular_percent", 0, 100));
  p.gapped_strides_percent = j.contains("gapped_strides_percent")
                                 ? static_cast<int>(r.integer(j.at("gapped_strides_percent"), "/gapped_strides_percent", 0, 100))
                                 : p.irregular_percent;
  p.misaligned_bases_percent =
      j.contains("misaligned_bases_percent")
          ? static_cast<int>(r.integer(j.at("misaligned_bases_percent"), "/misaligned_bases_percent", 0, 100))
          : p.irregular_percent;
  if (j.contains("stride_gap_bytes")) {
    p.stride_gap_bytes = static_cast<int32_t>(r.integer(j.at("stride_gap_bytes"), "/stride_gap_bytes", 0, 4096));
    if ((p.stride_gap_bytes & (p.stride_gap_bytes - 1)) != 0)
      r.fail("/stride_gap_bytes", "expected 0 (one element) or a power of two of bytes up to 4096, got " + std::to_string(p.stride_gap_bytes));
  }
  p.kv_views = j.contains("kv_views") ? r.weighted_enum<KvViews>(j.at("kv_views"), "/kv_views", kv_views_from_string,
                                                                  "alike, value_rows, value_heads, value_head_major")
                                      : default_profile().kv_views;
  p.families = j.contains("families") ? r.weighted_enum<Family>(j.at("families"), "/families", family_from_string,
                                                                 "kv, kv_split, k_only, mla")
                                      : default_profile().families;
  p.value_head_dims = j.contains("value_head_dims") ? r.weighted_int(j.at("value_head_dims"), "/value_head_dims", 1, 4096)
                                                    : default_profile().value_head_dims;
  p.rope_dims = j.contains("rope_dims") ? r.weighted_int(j.at("rope_dims"), "/rope_dims", 1, 1024) : default_profile().rope_dims;
  p.padding_modes = j.contains("padding_modes")
                        ? r.weighted_enum<PaddingMode>(j.at("padding_modes"), "/padding_modes", padding_mode_from_string, "negative, sink")
                        : default_profile().padding_modes;
  p.addressings = j.contains("addressings")
                      ? r.weighted_enum<Addressing>(j.at("addressings"), "/addressings", addressing_from_string, "slot_mapping, csr")
                      : default_profile().addressings;
  p.ring_percent = j.contains("ring_percent") ? static_cast<int>(r.integer(j.at("ring_percent"), "/ring_percent", 0, 100))
                                              : default_profile().ring_percent;
  p.window_inputs = j.contains("window_inputs")
                        ? r.weighted_enum<WindowInput>(j.at("window_inputs"), "/window_inputs", window_input_from_string,
                                                       "slot_mapping, positions")
                        : default_profile().window_inputs;
  for (const WindowInput w : p.window_inputs.values)
    if (w == WindowInput::none) r.fail("/window_inputs", "\"none\" is not a ring; ring_percent sets how many cases have one");
  p.format_percent = j.contains("format_percent")
                         ? static_cast<int>(r.integer(j.at("format_percent"), "/format_percent", 0, 100))
                         : default_profile().format_percent;
  p.quant_formats = j.contains("quant_formats")
                        ? r.weighted_enum<QuantFormat>(j.at("quant_formats"), "/quant_formats", quant_format_from_string,
                                                       "nvfp4, mxfp8_e4m3, mxfp8_e5m2, mxfp4, ds_mla, indexer_k, fp8_inline, int8_inline, asym_int8, asym_int4")
                        : default_profile().quant_formats;
  for (const QuantFormat f : p.quant_formats.values)
    if (f == QuantFormat::none) r.fail("/quant_formats", "\"none\" is no format; format_percent sets how many cases have one");
  const auto rules = [&](const char* key, auto from_string, const char* names, auto fallback) {
    using E = typename decltype(fallback.values)::value_type;
    return j.contains(key) ? r.weighted_enum<E>(j.at(key), std::string("/") + key, from_string, names) : fallback;
  };
  const Profile base = default_profile();
  p.nvfp4_rules = rules("nvfp4_rules", nvfp4_rule_from_string, "flashinfer, flashinfer_precise", base.nvfp4_rules);
  p.scale_layouts = rules("scale_layouts", scale_layout_from_string, "linear, swizzled_v, swizzled", base.scale_layouts);
  p.mx_rules = rules("mx_rules", mx_scale_rule_from_string, "ocp_floor, nv_ceil", base.mx_rules);
  p.ds_mla_rules = rules("ds_mla_rules", ds_mla_scale_from_string, "flt_min, pow2", base.ds_mla_rules);
  p.indexer_rules = rules("indexer_rules", indexer_scale_from_string, "fp32, ue8m0_log2f, ue8m0_exact", base.indexer_rules);
  p.asym_ariths = rules("asym_ariths", asym_arith_from_string, "f32, f16, bf16", base.asym_ariths);
  p.asym_lanes = rules("asym_lanes", asym_lanes_from_string, "exact, zero_padded_pow2", base.asym_lanes);
  p.int4_pairings = rules("int4_pairings", int4_pairing_from_string, "split_half, adjacent", base.int4_pairings);
  p.cp_percent = j.contains("cp_percent") ? static_cast<int>(r.integer(j.at("cp_percent"), "/cp_percent", 0, 100))
                                          : default_profile().cp_percent;
  p.cp_inputs = j.contains("cp_inputs")
                    ? r.weighted_enum<CpInput>(j.at("cp_inputs"), "/cp_inputs", cp_input_from_string, "slot_mapping, positions")
                    : default_profile().cp_inputs;
  for (const CpInput i : p.cp_inputs.values)
    if (i == CpInput::none) r.fail("/cp_inputs", "\"none\" is no sharding; cp_percent sets how many cases are sharded");
  p.cp_world_sizes = j.contains("cp_world_sizes") ? r.weighted_int(j.at("cp_world_sizes"), "/cp_world_sizes", 1, 64)
                                                  : default_profile().cp_world_sizes;
  p.cp_interleaves = j.contains("cp_interleaves") ? r.weighted_int(j.at("cp_interleaves"), "/cp_interleaves", 1, 1024)
                                                  : default_profile().cp_interleaves;
  const Profile builtin = default_profile();
  p.scattered_positions_percent =
      j.contains("scattered_positions_percent")
          ? static_cast<int>(r.integer(j.at("scattered_positions_percent"), "/scattered_positions_percent", 0, 100))
          : builtin.scattered_positions_percent;
  p.shared_prefix_percent = j.contains("shared_prefix_percent")
                                ? static_cast<int>(r.integer(j.at("shared_prefix_percent"), "/shared_prefix_percent", 0, 100))
                                : builtin.shared_prefix_percent;
  p.max_shared_prefix_blocks =
      j.contains("max_shared_prefix_blocks")
          ? static_cast<int32_t>(r.integer(j.at("max_shared_prefix_blocks"), "/max_shared_prefix_blocks", 1, 1 << 16))
          : builtin.max_shared_prefix_blocks;
  p.max_elements_per_case = r.integer(j.at("max_elements_per_case"), "/max_elements_per_case", 1, int64_t{1} << 34);
  if (j.contains("min_tensor_elements")) {
    p.min_tensor_elements = r.integer(j.at("min_tensor_elements"), "/min_tensor_elements", 0, int64_t{1} << 36);
    if (p.min_tensor_elements > 0) {
      // The fewest elements one block can span, over the shapes this profile draws.
      bool contiguous = false;
      for (size_t i = 0; i < p.layouts.values.size(); ++i)
        contiguous |= p.layouts.weights[i] > 0 &&
                      (p.layouts.values[i] == Layout::contiguous_bshd || p.layouts.values[i] == Layout::contiguous_bhsd);
      const int64_t bs = contiguous ? 1 : smallest_drawn(p.block_sizes);
      const int64_t row = int64_t{smallest_drawn(p.num_heads)} * smallest_drawn(p.head_dims);
      const int64_t blocks = (p.min_tensor_elements + bs * row - 1) / (bs * row);
      const int64_t slots = (p.min_tensor_elements + row - 1) / row;
      if (blocks > (int64_t{1} << 22))
        r.fail("/min_tensor_elements", "the smallest shape drawn (block_size " + std::to_string(bs) + (contiguous ? " for contiguous layouts" : "") +
                                           ", " + std::to_string(row) + " elements per slot) would need " + std::to_string(blocks) +
                                           " blocks; at most 4194304: raise the smallest block_size, num_heads or head_dims of positive weight, "
                                           "give contiguous layouts weight 0, or lower min_tensor_elements");
      if (slots > (int64_t{1} << 30))
        r.fail("/min_tensor_elements", "the smallest shape drawn (" + std::to_string(row) + " elements per slot) would need " +
                                           std::to_string(slots) + " slots; at most 1073741824 (int32 slot_mapping): raise the smallest "
                                           "num_heads or head_dims of positive weight, or lower min_tensor_elements");
    }
  }
  return p;
}

std::string read_profile_text(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw InputError(name, "", "is a directory; expected a kvfuzz-config JSON file (see configs/)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(name, "", "cannot open the profile file; expected a readable kvfuzz-config JSON file");
  // Profiles are small; a size cap keeps a mistaken path (a disk image, /dev/zero) from being read whole.
  constexpr std::streamsize kMaxProfileBytes = std::streamsize{1} << 20;
  std::string text(static_cast<size_t>(kMaxProfileBytes) + 1, '\0');
  in.read(text.data(), kMaxProfileBytes + 1);
  if (in.bad()) throw InputError(name, "", "cannot read the profile file");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxProfileBytes))
    throw InputError(name, "", "the file is larger than the 1 MiB limit on profiles; expected a kvfuzz-config JSON file");
  return text;
}

json parse_profile_text(std::string_view text, const std::string& file) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(file, "", "the file is empty; expected a JSON object (a kvfuzz-config profile, see configs/)");
  return parse_json_strict(text, file);
}

constexpr int kMaxExtendsDepth = 16;

// A partial profile ("extends": "default" or a path relative to its own file) laid over its base:
// the keys it gives replace the base's, the rest come from the base (followed down the chain).
// `chain` holds the files being read, to refuse a cycle; `origin` gets the file of every key that
// is not `file`'s own.
json resolve_extends(const json& j, const std::string& file, bool files, std::vector<std::string>& chain,
                     std::map<std::string, std::string>& origin) {
  const ProfileReader r(file);
  check_schema(j, r);
  if (!j.contains("extends")) return j;
  const json& e = j.at("extends");
  if (!e.is_string() || e.get<std::string>().empty())
    r.fail("/extends", "expected \"default\" (the built-in profile) or the path of a profile file, relative to this one");
  const std::string base_name = e.get<std::string>();
  json base;
  std::map<std::string, std::string> base_origin;
  std::string base_file;
  if (base_name == "default") {
    base = profile_to_json(default_profile());
  } else if (!files) {
    r.fail("/extends", "a profile given as text (not read from a file) can extend only \"default\"");
  } else {
    const std::filesystem::path p = std::filesystem::path(file).parent_path() / base_name;
    base_file = p.lexically_normal().string();
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(p, ec);
    const std::string key = ec ? base_file : canonical.string();
    for (const std::string& f : chain)
      if (f == key) r.fail("/extends", "\"" + base_name + "\" makes a cycle: " + base_file + " is already being read");
    if (chain.size() >= kMaxExtendsDepth) r.fail("/extends", "more than 16 profiles extend one another");
    chain.push_back(key);
    base = resolve_extends(parse_profile_text(read_profile_text(p), base_file), base_file, files, chain, base_origin);
    chain.pop_back();
  }
  // A key taken from a base file is blamed on that file; one from the built-in default on `file`,
  // the profile the user can change.
  for (const auto& [key, _] : base.items()) {
    if (j.contains(key)) continue;
    const auto it = base_origin.find(key);
    if (it != base_origin.end()) {
      origin[key] = it->second;
    } else if (!base_file.empty()) {
      origin[key] = base_file;
    }
  }
  json merged = base;
  merged.erase("name");  // a partial profile without a name is named after its file
  for (const auto& [key, value] : j.items())
    if (key != "extends") merged[key] = value;
  if (!merged.contains("name")) merged["name"] = std::filesystem::path(file).stem().string();
  origin.erase("name");
  return merged;
}

Profile profile_from_document(const json& j, const std::string& file, bool files) {
  std::vector<std::string> chain{file};
  std::error_code ec;
  if (const auto c = std::filesystem::weakly_canonical(file, ec); !ec) chain.front() = c.string();
  std::map<std::string, std::string> origin;
  const json merged = resolve_extends(j, file, files, chain, origin);
  return profile_from_json(merged, ProfileReader(file, std::move(origin)));
}

}  // namespace

json profile_to_json(const Profile& p) {
  const auto weighted = [](const auto& w) {
    json values = json::array();
    for (const auto& v : w.values) {
      if constexpr (std::is_integral_v<std::decay_t<decltype(v)>>) {
        values.push_back(v);
      } else {
        values.push_back(std::string(to_string(v)));
      }
    }
    return json{{"values", values}, {"weights", w.weights}};
  };
  json j = {{"schema", kSchema},
            {"version", kVersion},
            {"name", p.name},
            {"layouts", weighted(p.layouts)},
            {"block_sizes", weighted(p.block_sizes)},
            {"num_heads", weighted(p.num_heads)},
            {"head_dims", weighted(p.head_dims)},
            {"gqa_ratios", weighted(p.gqa_ratios)},
            {"fused_qkv_percent", p.fused_qkv_percent},
            {"input_dtypes", weighted(p.input_dtypes)},
            {"cross_dtype_percent", p.cross_dtype_percent},
            {"quant_percent", p.quant_percent},
            {"cache_dtypes", weighted(p.cache_dtypes)},
            {"scale_kinds", weighted(p.scale_kinds)},
            {"scale_dists", weighted(p.scale_dists)},
            {"slot_dtypes", weighted(p.slot_dtypes)},
            {"value_dists", weighted(p.value_dists)},
            {"max_requests", p.max_requests},
            {"max_context_len", p.max_context_len},
            {"max_new_len", p.max_new_len},
            {"decode_percent", p.decode_percent},
            {"idle_percent", p.idle_percent},
            {"max_padding", p.max_padding},
            {"max_invalid_slots", p.max_invalid_slots},
            {"max_extra_input_rows", p.max_extra_input_rows},
            {"max_spare_blocks", p.max_spare_blocks},
            {"irregular_percent", p.irregular_percent},
            {"gapped_strides_percent", p.gapped_strides_percent},
            {"misaligned_bases_percent", p.misaligned_bases_percent},
            {"kv_views", weighted(p.kv_views)},
            {"families", weighted(p.families)},
            {"value_head_dims", weighted(p.value_head_dims)},
            {"rope_dims", weighted(p.rope_dims)},
            {"padding_modes", weighted(p.padding_modes)},
            {"addressings", weighted(p.addressings)},
            {"ring_percent", p.ring_percent},
            {"window_inputs", weighted(p.window_inputs)},
            {"cp_percent", p.cp_percent},
            {"cp_inputs", weighted(p.cp_inputs)},
            {"cp_world_sizes", weighted(p.cp_world_sizes)},
            {"cp_interleaves", weighted(p.cp_interleaves)},
            {"format_percent", p.format_percent},
            {"quant_formats", weighted(p.quant_formats)},
            {"nvfp4_rules", weighted(p.nvfp4_rules)},
            {"scale_layouts", weighted(p.scale_layouts)},
            {"mx_rules", weighted(p.mx_rules)},
            {"ds_mla_rules", weighted(p.ds_mla_rules)},
            {"indexer_rules", weighted(p.indexer_rules)},
            {"asym_ariths", weighted(p.asym_ariths)},
            {"asym_lanes", weighted(p.asym_lanes)},
            {"int4_pairings", weighted(p.int4_pairings)},
            {"scattered_positions_percent", p.scattered_positions_percent},
            {"shared_prefix_percent", p.shared_prefix_percent},
            {"max_shared_prefix_blocks", p.max_shared_prefix_blocks},
            {"max_elements_per_case", p.max_elements_per_case},
            {"min_tensor_elements", p.min_tensor_elements}};
  if (p.stride_gap_bytes != 0) j["stride_gap_bytes"] = p.stride_gap_bytes;  // optional, and then written
  return j;
}

namespace {

Profile profile_text(std::string_view text, const std::string& file, bool files) {
  try {
    return profile_from_document(parse_profile_text(text, file), file, files);
  } catch (const InputError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw InputError(file, "", "out of memory while reading the profile");
  } catch (const std::exception& e) {  // not expected; keeps the "only InputError" promise
    throw InputError(file, "", std::string("cannot read the profile: ") + e.what());
  }
}

}  // namespace

Profile profile_from_text(std::string_view text, const std::string& file) { return profile_text(text, file, false); }

Profile load_profile(const std::filesystem::path& file) { return profile_text(read_profile_text(file), file.string(), true); }

Profile default_profile() {
  Profile p;
  p.name = "default";
  p.layouts = {{Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                Layout::packed_kv_nhd},
               {4, 3, 1, 1, 2}};
  p.block_sizes = {{1, 2, 3, 5, 7, 8, 16, 17, 32, 64, 100, 128, 256},
                   {2, 2, 3, 3, 3, 4, 6, 3, 4, 3, 2, 2, 2}};
  p.num_heads = {{1, 2, 3, 4, 8, 13, 16, 32, 64, 128}, {8, 6, 4, 5, 5, 2, 3, 2, 1, 1}};
  p.head_dims = {{1, 2, 3, 7, 8, 16, 32, 46, 64, 72, 80, 96, 100, 120, 128, 192, 256, 576},
                 {3, 3, 3, 3, 5, 5, 4, 2, 4, 2, 2, 2, 2, 2, 3, 1, 1, 1}};
  p.gqa_ratios = {{1, 2, 3, 4, 5, 8, 16}, {6, 3, 1, 3, 1, 2, 1}};
  p.fused_qkv_percent = 30;
  p.input_dtypes = {{DType::f16, DType::bf16, DType::f32}, {4, 3, 2}};
  p.cross_dtype_percent = 15;
  p.quant_percent = 20;
  p.cache_dtypes = {{DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8},
                    {1, 1, 1, 1, 1, 1}};
  p.scale_kinds = {{ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block, ScaleKind::per_token_head},
                   {1, 1, 1, 1}};
  p.scale_dists = {{ScaleDist::unit, ScaleDist::pow2, ScaleDist::random, ScaleDist::extreme}, {2, 2, 3, 1}};
  p.slot_dtypes = {{IndexType::i64, IndexType::i32}, {3, 2}};
  p.value_dists = {{ValueDist::finite, ValueDist::special, ValueDist::constant, ValueDist::ties}, {5, 3, 1, 2}};
  p.max_requests = 6;
  p.max_context_len = 600;
  p.max_new_len = 64;
  p.decode_percent = 30;
  p.idle_percent = 3;
  p.max_padding = 4;
  p.max_invalid_slots = 3;
  p.max_extra_input_rows = 3;
  p.max_spare_blocks = 4;
  p.irregular_percent = 50;
  p.gapped_strides_percent = 50;
  p.misaligned_bases_percent = 50;
  p.kv_views = {{KvViews::alike, KvViews::value_rows, KvViews::value_heads, KvViews::value_head_major}, {6, 2, 1, 1}};
  p.families = {{Family::kv}, {1}};
  p.value_head_dims = {{8, 64, 128}, {1, 1, 1}};
  p.rope_dims = {{8, 16, 64}, {1, 1, 1}};
  p.padding_modes = {{PaddingMode::negative}, {1}};
  p.addressings = {{Addressing::slot_mapping}, {1}};
  p.ring_percent = 0;
  p.window_inputs = {{WindowInput::slot_mapping, WindowInput::positions}, {1, 1}};
  p.cp_percent = 0;
  p.cp_inputs = {{CpInput::slot_mapping, CpInput::positions}, {1, 1}};
  p.cp_world_sizes = {{2, 3, 4, 8}, {1, 1, 1, 1}};
  p.cp_interleaves = {{1, 2, 3, 16}, {1, 1, 1, 1}};
  p.format_percent = 0;
  p.quant_formats = {{QuantFormat::nvfp4, QuantFormat::mxfp8_e4m3, QuantFormat::mxfp8_e5m2, QuantFormat::mxfp4, QuantFormat::ds_mla,
                      QuantFormat::indexer_k, QuantFormat::fp8_inline, QuantFormat::int8_inline, QuantFormat::asym_int8,
                      QuantFormat::asym_int4},
                     {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}};
  p.nvfp4_rules = {{Nvfp4Rule::flashinfer, Nvfp4Rule::flashinfer_precise}, {1, 1}};
  p.scale_layouts = {{ScaleLayout::linear, ScaleLayout::swizzled_v, ScaleLayout::swizzled}, {1, 1, 1}};
  p.mx_rules = {{MxScaleRule::ocp_floor, MxScaleRule::nv_ceil}, {1, 1}};
  p.ds_mla_rules = {{DsMlaScale::flt_min, DsMlaScale::pow2}, {1, 1}};
  p.indexer_rules = {{IndexerScale::fp32, IndexerScale::ue8m0_log2f, IndexerScale::ue8m0_exact}, {1, 1, 1}};
  p.asym_ariths = {{AsymArith::f32, AsymArith::f16, AsymArith::bf16}, {1, 1, 1}};
  p.asym_lanes = {{AsymLanes::exact, AsymLanes::zero_padded_pow2}, {1, 1}};
  p.int4_pairings = {{Int4Pairing::split_half, Int4Pairing::adjacent}, {1, 1}};
  p.scattered_positions_percent = 10;
  p.shared_prefix_percent = 10;
  p.max_shared_prefix_blocks = 2;
  p.max_elements_per_case = int64_t{1} << 18;
  return p;
}

}  // namespace kvf
