// case.h — a concrete, materialised append batch: everything needed to run and check one call.
//
// A Case is what the corpus stores (JSON schema v1, case_json.h) and what targets execute. It is
// derived from a shrinkable Genotype (case/genotype.h) by materialize(), but once materialised it
// stands alone: block tables, slot_mapping, strides and buffer sizes are concrete values, so a
// corpus file replays identically whatever the generator becomes.
//
// Buffers. A case describes three buffers, each placed by the arena inside guard bands:
//   input  — one buffer holding key and value views (e.g. a fused QKV projection); elements of
//            input_dtype; key/value are [T_in, H, D] views into it with explicit offsets/strides.
//   slots  — slot_mapping, [T] elements of slot_dtype.
//   cache  — one buffer holding the K and V cache tensors; elements of cache_dtype; K starts at
//            cache_k_offset, V at cache_v_offset, both with the geometry `cache` (V with its own
//            head dim and strides in the kv_split family; no V in k_only and mla).
// fields() lists what the cache stores and where each field's values come from: the one
// description the golden model, the arena, the locator and the reports read.
// Payload values are not stored: they are a pure function of (payload, coordinates), see
// values/payload.h, so a case stays small and every stored value is reproducible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../kernels/cuda/kv_append.cuh"  // DType, IndexType, CacheGeometry
#include "../../kernels/cuda/kv_format.cuh"  // FieldLayout
#include "genotype.h"
#include "explicit_inputs.h"
#include "quant_format.h"
#include "types.h"

namespace kvf {

// A key or value input view [T_in, H, D] inside the input buffer, in elements.
struct InputView {
  int64_t offset = 0;        // element offset of [0, 0, 0] from the input buffer start
  int64_t stride_token = 0;  // elements between rows
  int64_t stride_head = 0;   // elements between heads
};

// What a field stores: values of the input (data), or a quantised format's scales or zero points.
enum class FieldRole : uint8_t { data, scale, zero };
// Which buffer of the arena holds a field.
enum class FieldBuffer : uint8_t { cache, scale_cache };

// One stored field of the cache: its dtype, buffer and layout (kv_format.cuh; offsets and strides
// in elements of its dtype, nibbles for the 4-bit ones, element 2j in the low nibble of byte j),
// extents, and, for data, its source: one input view or two concatenated along dim (an MLA entry:
// kv_c's dims, then k_pe's). The classic caches have one or two data fields of cache_dtype in the
// cache buffer; the quantised formats (quant_format.h) add scale and zero fields, and their data
// fields name the scale (and zero) field that covers each group of `group` dims.
struct CacheField {
  const char* name = "K";  // "K", "V", "latent", "rope"; "K scale", "V zero", "latent scale", ...
  FieldRole role = FieldRole::data;
  int index = 0;           // 0 or 1: K's side or V's (static scales, scale cache, input tensor)
  FieldBuffer buffer = FieldBuffer::cache;
  DType dtype = DType::f16;
  FieldLayout layout;
  int64_t num_heads = 0;
  int64_t head_dim = 0;    // data: dims of the stored entry; scale and zero: groups per (token, head)
  int64_t entry_dim = 0;   // data: the entry dim of this field's dim 0 (payload index; an ds_mla record's rope: 512)
  struct Part {
    InputView view;
    int64_t width = 0;     // dims [first, first + width) of the entry come from this view's [0, width)
  };
  Part parts[2];
  int num_parts = 1;       // 0 for scale and zero fields
  int64_t group = 0;       // data of a quantised format: dims per scale (0: none); scale, zero: dims each covers
  int scale = -1;          // data: index of its scale field in CacheFields; scale, zero: of its data field
  int zero = -1;           // data of an asymmetric format: index of its zero-point field
};

// The fields of a case, K's first (at most eight).
struct CacheFields {
  static constexpr int kMax = 8;
  CacheField field[kMax];
  int count = 0;
  const CacheField* begin() const { return field; }
  const CacheField* end() const { return field + count; }
  CacheField& add() { return field[count++]; }
};

// One request of the batch: its earlier context and the tokens appended by this call.
struct Request {
  int64_t context_len = 0;      // tokens already in the cache before this call
  int64_t new_len = 0;          // tokens this call appends (1 = decode)
  std::vector<int64_t> blocks;  // block table: physical block of logical block i
  // [new_len] logical position of each new token, in the order of the request's rows in
  // slot_mapping; empty = context_len .. context_len + new_len - 1 (consecutive). Positions >=
  // context_len that are not listed are holes (placement.h): the call must not write them.
  std::vector<int64_t> positions;
};

// What a replay of the case must produce.
enum class Expect : uint8_t { pass, fail };

struct Expectation {
  Expect outcome = Expect::pass;
  std::string finding_kind;  // for fail: the kind of the first finding (e.g. "padding_leak"); may be empty

  // The one spelling of an expectation in every output: "pass", "fail" or "fail:<kind>".
  std::string text() const {
    if (outcome == Expect::pass) return "pass";
    return finding_kind.empty() ? "fail" : "fail:" + finding_kind;
  }
};

// Where a case came from; informational, never used to recompute the batch.
struct Provenance {
  std::string seed;          // campaign seed of the generating run, as a decimal string
  int64_t case_index = -1;   // index of the case in its campaign, -1 if unknown
  std::string tool_version;  // kvfuzz version that wrote the file
  std::string command_line;  // command that produced the file
  std::string target;        // target the case was found on, as typed (`replay` and `report` use it)
  std::string target_digest;  // that target's code file, as targets/target.h target_digest() gives it
                              // ("fnv1a64:..."; "" for a built-in target or an older file)
};

struct Case;
// The fields of a case with a quantised format (quant_fields.cpp, docs/formats.md).
CacheFields format_fields(const Case& c);
// Whether an nvfp4 case's K (is_value false) or V scales are in vLLM's swizzled layout.
bool nvfp4_scales_swizzled(const Case& c, bool is_value);

struct Case {
  // shape
  int32_t num_heads = 0;       // H_kv
  int32_t head_dim = 0;        // D
  int32_t num_q_heads = 0;     // H_q of a fused QKV input (0 = key/value are separate tensors)
  DType input_dtype = DType::f16;
  DType cache_dtype = DType::f16;
  IndexType slot_dtype = IndexType::i64;

  // format (v2; v1 files are all family kv)
  Family family = Family::kv;
  int32_t value_head_dim = 0;             // kv_split: V's head dim (!= head_dim); 0 otherwise
  std::optional<CacheGeometry> value_cache;  // kv_split: V's strides (num_blocks, block_size = cache's)
  int32_t rope_dim = 0;                   // mla: the entry's last rope_dim dims come from `rope` (k_pe),
  InputView rope;                         //   the first head_dim - rope_dim from `key` (kv_c); 0 otherwise

  // A quantised format (v2; quant_format.h): cache_dtype is its code dtype, and fields() holds its
  // codes, scales (and zero points) as typed fields. none: the classic caches.
  QuantFormat quant_format = QuantFormat::none;
  QuantRules quant_rules;
  bool has_format() const { return quant_format != QuantFormat::none; }

  // serving conventions (v2; v1 files are all the default)
  PaddingMode padding = PaddingMode::negative;  // sink: padding rows carry slot 0, whose contents are unconstrained
  Addressing addressing = Addressing::slot_mapping;  // csr: the kernel gets CSR arrays (case/csr.h) instead of
                                                     // slot_mapping, which stays the case's truth (every entry valid)
  // A sliding-window ring cache (case/window.h): each request keeps its first window_sinks positions
  // and the last window_size - window_sinks, position p >= sinks at ring index
  // sinks + (p - sinks) mod (size - sinks) of its block table. window_input none: no window.
  WindowInput window_input = WindowInput::none;
  int64_t window_size = 0;   // W >= 1
  int64_t window_sinks = 0;  // S in [0, W)
  bool has_window() const { return window_input != WindowInput::none; }
  // Context-parallel shards (case/context_parallel.h): cp_world_size ranks with interleave
  // cp_interleave each hold a shard of every request. The cache holds the shards one after another
  // (shard r: blocks [r * shard_blocks(), (r + 1) * shard_blocks())), the block tables hold
  // shard-local ids shared by every rank, and the call runs once per rank. cp_input none: no shards.
  CpInput cp_input = CpInput::none;
  int64_t cp_world_size = 0;  // N >= 1
  int64_t cp_interleave = 0;  // I >= 1
  bool has_cp() const { return cp_input != CpInput::none; }
  // Calls one append makes: one per rank.
  int64_t num_ranks() const { return has_cp() && cp_world_size > 0 ? cp_world_size : 1; }
  // Blocks of one rank's cache (the whole cache without shards).
  int64_t shard_blocks() const { return cache.num_blocks / num_ranks(); }

  // cache
  Layout layout = Layout::paged_nhd;
  CacheGeometry cache;           // geometry of K and V (elements)
  int64_t cache_k_offset = 0;    // element offset of K's base in the cache buffer
  int64_t cache_v_offset = 0;    // element offset of V's base in the cache buffer
  int64_t cache_buffer_elems = 0;  // size of the cache buffer in elements

  // inputs
  int64_t num_input_rows = 0;      // T_in >= num_slots; rows >= T are CUDA-graph padding, never read
  int64_t input_buffer_elems = 0;  // size of the input buffer in elements
  InputView key;
  InputView value;
  std::vector<int64_t> slot_mapping;  // [T] flat slot per row; < 0 padding; >= capacity invalid

  // batch
  std::vector<Request> requests;  // blocks owned by no request are free; a block entirely inside the
                                  // context of several requests may be in each of their tables (shared)

  // quantisation (cache_dtype fp8_e4m3 / fp8_e5m2 / int8; scale_kind none for float caches)
  ScaleKind scale_kind = ScaleKind::none;
  ScaleDist scale_dist = ScaleDist::unit;  // values of static scales (values/payload.h scale_bits)
  // Static scales (per_tensor, per_head, per_block) are not stored: static_scale_count() fp32 values
  // per tensor, K then V, in the arena's scales section, given by scale_bits().
  // Dynamic scale caches (per_token_head): one fp32 buffer holding the K and V scale caches, laid
  // out like the KV cache without D. Unused (all zero) for other kinds.
  CacheGeometry scale_cache;        // num_blocks, block_size as `cache`; strides of (block, pos, head)
  int64_t scale_k_offset = 0;       // element offset of the K scale cache in its buffer
  int64_t scale_v_offset = 0;       // element offset of the V scale cache in its buffer
  int64_t scale_cache_elems = 0;    // size of the scale cache buffer in fp32 elements
  // A quantised format keeps its cache geometry in bytes and its scale-cache geometry in elements of
  // its scale dtype (quant_fields.cpp).
  // Whether the case has a scale-cache buffer: per_token_head scales, or a format's scales there.
  bool uses_scale_cache() const {
    return scale_kind == ScaleKind::per_token_head || (has_format() && !format_scales_in_cache(quant_format));
  }
  // Bytes of one scale-cache element: 4 (fp32), or 1 for a format's e4m3 or e8m0 scales.
  int scale_cache_elem_size() const { return has_format() ? dtype_size(format_scale_dtype(quant_format)) : 4; }

  // payload
  ValueDist dist = ValueDist::finite;
  uint64_t payload_seed = 0;  // salt of the payload function (values/payload.h)
  // Input rows given as data (a hand-written or traced case), in place of the seeded payload.
  std::optional<ExplicitInputs> explicit_inputs;

  // bookkeeping
  Expectation expect;
  Provenance provenance;
  std::optional<Genotype> genotype;  // the genotype it was materialised from, if any (enables `shrink`)

  int64_t num_slots() const { return static_cast<int64_t>(slot_mapping.size()); }
  // Slot 0 in the sink padding mode: padding rows may write it, and its contents are unconstrained.
  bool is_sink(int64_t block, int64_t pos) const { return padding == PaddingMode::sink && block == 0 && pos == 0; }
  // A padding row's slot_mapping entry: negative, or the sink slot 0 in the sink mode.
  bool is_padding(int64_t slot) const { return slot < 0 || (padding == PaddingMode::sink && slot == 0); }
  bool has_value() const { return family == Family::kv || family == Family::kv_split; }
  // What findings and reports call a field: "K", "V", or "latent" (an MLA entry).
  const char* field_name(bool is_value) const { return is_value ? "V" : family == Family::mla ? "latent" : "K"; }
  int64_t num_fields() const { return has_value() ? 2 : 1; }
  // V's head dim and geometry (K's unless kv_split).
  int64_t value_dim() const { return family == Family::kv_split ? value_head_dim : head_dim; }
  const CacheGeometry& value_geometry() const { return value_cache ? *value_cache : cache; }
  // The larger of K's and V's head dims: the dim extent of payload indices and value ids.
  int64_t max_head_dim() const { return value_dim() > head_dim ? value_dim() : head_dim; }
  int64_t capacity() const { return cache_capacity(cache); }

  // Elements of the cache dtype in 16 bytes: the x of vLLM's x-packed K.
  int64_t xpack() const { return xpack_elems(cache_dtype); }
  // Where K (is_value false) or V keeps each (block, pos, head, dim) in the cache buffer
  // (kv_format.cuh): the geometry from its offset for every layout but vllm_legacy, whose K is
  // x-packed and V transposed. The golden model, the arena and the report map address the cache
  // through this alone.
  FieldLayout cache_field(bool is_value) const {
    const int64_t offset = is_value ? cache_v_offset : cache_k_offset;
    if (layout != Layout::vllm_legacy) {
      return is_value ? geometry_layout(value_geometry(), offset, num_heads, value_dim())
                      : geometry_layout(cache, offset, num_heads, head_dim);
    }
    return is_value ? transposed_value_layout(cache, offset, num_heads, head_dim)
                    : xpacked_key_layout(cache, offset, num_heads, head_dim, xpack());
  }

  // The stored fields: K (or the latent entry) and, when the family has one, V.
  CacheFields fields() const {
    if (has_format()) return format_fields(*this);
    CacheFields out;
    CacheField& k = out.field[out.count++];
    k.name = family == Family::mla ? "latent" : "K";
    k.index = 0;
    k.dtype = cache_dtype;
    k.layout = cache_field(false);
    k.num_heads = num_heads;
    k.head_dim = head_dim;
    k.parts[0] = {key, head_dim - rope_dim};
    if (rope_dim > 0) {
      k.parts[1] = {rope, rope_dim};
      k.num_parts = 2;
    }
    if (has_value()) {
      CacheField& v = out.field[out.count++];
      v.name = "V";
      v.index = 1;
      v.dtype = cache_dtype;
      v.layout = cache_field(true);
      v.num_heads = num_heads;
      v.head_dim = value_dim();
      v.parts[0] = {value, value_dim()};
    }
    return out;
  }
};

}  // namespace kvf
