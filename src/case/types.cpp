// types.cpp — names of the shared enumerations (JSON, configs, reports) and element sizes.
//
// Each enum has one table of (value, name); to_string and *_from_string both read it, so a name
// cannot drift between the writer and the reader.
#include "types.h"

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "enum_names.h"
#include "names.h"

namespace kvf {
namespace {

constexpr NameTable<ValueDist, 5> kValueDistNames{{
    {ValueDist::finite, "finite"},
    {ValueDist::special, "special"},
    {ValueDist::constant, "constant"},
    {ValueDist::ties, "ties"},
    {ValueDist::edges, "edges"},
}};

constexpr NameTable<ScaleDist, 4> kScaleDistNames{{
    {ScaleDist::unit, "unit"},
    {ScaleDist::pow2, "pow2"},
    {ScaleDist::random, "random"},
    {ScaleDist::extreme, "extreme"},
}};

constexpr NameTable<KvViews, 4> kKvViewsNames{{
    {KvViews::alike, "alike"},
    {KvViews::value_rows, "value_rows"},
    {KvViews::value_heads, "value_heads"},
    {KvViews::value_head_major, "value_head_major"},
}};

}  // namespace

template <> std::string quoted_names<DType>() { return quote_all(kDTypeNames); }
template <> std::string quoted_names<IndexType>() { return quote_all(kIndexTypeNames); }
template <> std::string quoted_names<Layout>() { return quote_all(kLayoutNames); }
template <> std::string quoted_names<ValueDist>() { return quote_all(kValueDistNames); }
template <> std::string quoted_names<ScaleKind>() { return quote_all(kScaleKindNames); }
template <> std::string quoted_names<ScaleDist>() { return quote_all(kScaleDistNames); }
template <> std::string quoted_names<KvViews>() { return quote_all(kKvViewsNames); }
template <> std::string quoted_names<Family>() { return quote_all(kFamilyNames); }
template <> std::string quoted_names<PaddingMode>() { return quote_all(kPaddingModeNames); }
template <> std::string quoted_names<Addressing>() { return quote_all(kAddressingNames); }
template <> std::string quoted_names<WindowInput>() { return quote_all(kWindowInputNames); }
template <> std::string quoted_names<CpInput>() { return quote_all(kCpInputNames); }

std::string_view to_string(DType t) { return name_of(kDTypeNames, t); }
std::string_view to_string(IndexType t) { return name_of(kIndexTypeNames, t); }
std::string_view to_string(Layout l) { return name_of(kLayoutNames, l); }
std::string_view to_string(ValueDist d) { return name_of(kValueDistNames, d); }
std::string_view to_string(ScaleKind k) { return name_of(kScaleKindNames, k); }
std::string_view to_string(ScaleDist d) { return name_of(kScaleDistNames, d); }
std::string_view to_string(KvViews v) { return name_of(kKvViewsNames, v); }
std::string_view to_string(Family f) { return name_of(kFamilyNames, f); }
std::string_view to_string(PaddingMode m) { return name_of(kPaddingModeNames, m); }
std::string_view to_string(Addressing a) { return name_of(kAddressingNames, a); }
std::string_view to_string(WindowInput w) { return name_of(kWindowInputNames, w); }
std::string_view to_string(CpInput i) { return name_of(kCpInputNames, i); }

std::optional<DType> dtype_from_string(std::string_view s) { return value_of(kDTypeNames, s); }
std::optional<IndexType> index_type_from_string(std::string_view s) { return value_of(kIndexTypeNames, s); }
std::optional<Layout> layout_from_string(std::string_view s) { return value_of(kLayoutNames, s); }
std::optional<ValueDist> value_dist_from_string(std::string_view s) { return value_of(kValueDistNames, s); }
std::optional<ScaleKind> scale_kind_from_string(std::string_view s) { return value_of(kScaleKindNames, s); }
std::optional<ScaleDist> scale_dist_from_string(std::string_view s) { return value_of(kScaleDistNames, s); }
std::optional<KvViews> kv_views_from_string(std::string_view s) { return value_of(kKvViewsNames, s); }
std::optional<Family> family_from_string(std::string_view s) { return value_of(kFamilyNames, s); }
std::optional<PaddingMode> padding_mode_from_string(std::string_view s) { return value_of(kPaddingModeNames, s); }
std::optional<Addressing> addressing_from_string(std::string_view s) { return value_of(kAddressingNames, s); }
std::optional<WindowInput> window_input_from_string(std::string_view s) { return value_of(kWindowInputNames, s); }
std::optional<CpInput> cp_input_from_string(std::string_view s) { return value_of(kCpInputNames, s); }

bool is_quantized(DType t) { return t == DType::fp8_e4m3 || t == DType::fp8_e5m2 || t == DType::int8; }

int64_t static_scale_count(ScaleKind k, int64_t num_heads, int64_t num_blocks) {
  switch (k) {
    case ScaleKind::per_tensor: return 1;
    case ScaleKind::per_head: return num_heads;
    case ScaleKind::per_block: {
      int64_t n = 0;  // saturates: validate() refuses such a case before anything is allocated
      return __builtin_mul_overflow(num_blocks, num_heads, &n) ? std::numeric_limits<int64_t>::max() : n;
    }
    case ScaleKind::none:
    case ScaleKind::per_token_head: return 0;
  }
  return 0;  // not a ScaleKind; validate() refuses such a case
}

bool is_classic_cache_dtype(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::fp8_e4m3 || t == DType::fp8_e5m2 || t == DType::int8;
}

int index_type_size(IndexType t) {
  switch (t) {
    case IndexType::i32: return 4;
    case IndexType::i64: return 8;
  }
  return 0;  // not an IndexType; validate() refuses such a case
}

}  // namespace kvf
