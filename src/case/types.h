// types.h — enumerations shared by the genotype (gen/) and the concrete case (case/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../../kernels/cuda/kv_append.cuh"  // kv_enums.h: DType, IndexType, Layout, Family, ...

namespace kvf {

// Layout, Family, PaddingMode, Addressing, WindowInput, CpInput (with DType, IndexType, ScaleKind and
// QuantFormat): kernels/cuda/kv_enums.h, written from kernels/enums.json by scripts/gen-enums.py.

// Distribution of the payload values written into key/value rows (values/payload.h).
enum class ValueDist : uint8_t {
  finite,    // finite values of every exponent, both signs
  special,   // finite mixed with NaN, +-Inf, +-0, subnormals, +-max finite
  constant,  // every row a single repeated value (zero rows included)
  ties,      // values whose conversion to the cache format is an exact rounding tie (for quantised
             // caches: x / scale lands exactly halfway between two stored values), plus values
             // beyond the saturation limit
  edges,     // the ties' values and their neighbours in the input dtype: quotients on, one fp32 ulp
             // below and one above each rounding midpoint and saturation edge, of the codes and of
             // the computed block scales (NVFP4 e4m3 scales, MX shared exponents, dynamic scales)
};

// How static scales (per_tensor / per_head / per_block) are chosen (values/payload.h).
enum class ScaleDist : uint8_t {
  unit,     // 1.0 everywhere
  pow2,     // powers of two in [2^-4, 2^4]: x / scale is exact, so rounding ties survive division
  random,   // arbitrary fp32 in [2^-6, 2^6], distinct per head/block, K != V
  extreme,  // tiny (down to 2^-24) and huge (up to 2^24) values mixed
};

// How the value input view relates to the key view (a genotype feature; gen/materialize.cpp).
// Simplest first: the shrinker moves towards `alike`.
enum class KvViews : uint8_t {
  alike,         // V has K's head and token strides: the next region of one buffer, or K's fused QKV row
  value_rows,    // V a tensor of its own whose rows are padded: token stride != K's, head stride K's
  value_heads,   // V's heads padded too: head and token strides both differ from K's
  value_head_major,  // V head-major ([H, T_in, D] transposed to [T_in, H, D]): head stride > token stride
};

// Names used in JSON, configs and reports ("f16", "paged_nhd", ...), and their inverses
// (std::nullopt for an unknown name).
std::string_view to_string(DType t);
std::string_view to_string(IndexType t);
std::string_view to_string(Layout l);
std::string_view to_string(ValueDist d);
std::string_view to_string(ScaleKind k);
std::string_view to_string(ScaleDist d);
std::string_view to_string(KvViews v);
std::string_view to_string(Family f);
std::string_view to_string(PaddingMode m);
std::string_view to_string(Addressing a);
std::string_view to_string(WindowInput w);
std::string_view to_string(CpInput i);
std::optional<DType> dtype_from_string(std::string_view s);
std::optional<IndexType> index_type_from_string(std::string_view s);
std::optional<Layout> layout_from_string(std::string_view s);
std::optional<ValueDist> value_dist_from_string(std::string_view s);
std::optional<ScaleKind> scale_kind_from_string(std::string_view s);
std::optional<ScaleDist> scale_dist_from_string(std::string_view s);
std::optional<KvViews> kv_views_from_string(std::string_view s);
std::optional<Family> family_from_string(std::string_view s);
std::optional<PaddingMode> padding_mode_from_string(std::string_view s);
std::optional<Addressing> addressing_from_string(std::string_view s);
std::optional<WindowInput> window_input_from_string(std::string_view s);
std::optional<CpInput> cp_input_from_string(std::string_view s);
// Every name of enumeration E in declaration order, quoted and comma-separated ("\"i32\", \"i64\""),
// for "expected one of ..." messages; read from the same tables as to_string.
template <typename E>
std::string quoted_names();

// True for fp8_e4m3, fp8_e5m2 and int8 (caches that need a ScaleKind other than none).
bool is_quantized(DType t);
// Number of static scales per tensor for a case's kind: 1, H_kv, num_blocks * H_kv; 0 otherwise.
int64_t static_scale_count(ScaleKind k, int64_t num_heads, int64_t num_blocks);

// Size in bytes of one element; 1 for the 4-bit dtypes (fp4_e2m1, uint4), two of which share a byte.
// Inline: the arena fill, the golden model and the diff ask per element.
inline int dtype_size(DType t) {
  switch (t) {
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f32: return 4;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::int8:
    case DType::fp8_e8m0:
    case DType::uint8:
    case DType::fp4_e2m1:  // two to a byte: the byte that holds one
    case DType::uint4: return 1;
  }
  return 0;  // not a DType; validate() refuses such a case
}
// Bits of one element: 4, 8, 16 or 32.
inline int dtype_bits(DType t) { return t == DType::fp4_e2m1 || t == DType::uint4 ? 4 : 8 * dtype_size(t); }
// The cache dtypes of the classic caches (quant format none): f16, bf16, f32, fp8_e4m3, fp8_e5m2,
// int8. The others (fp4_e2m1, fp8_e8m0, uint8, uint4) are fields of the quantised formats only.
bool is_classic_cache_dtype(DType t);
// Elements of `t` in 16 bytes: the x of vLLM's x-packed K cache (kv_format.cuh).
inline int64_t xpack_elems(DType t) { return 16 / dtype_size(t); }
int index_type_size(IndexType t);

}  // namespace kvf
