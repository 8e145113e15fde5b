// golden.cpp — the golden model of the append contract (docs/contract.md).
//
// golden_append() is boring on purpose (STYLE.md rule 3): plain loops over (row, head, tensor,
// dim), one element at a time, no vectorisation and no shortcuts. It consumes the same bytes a
// kernel does — slot_mapping, key/value elements and static scales are read from the arena image,
// not from the Case — and addresses the cache only through the fields of Case::fields() (kv_format.cuh's
// field_offset; an MLA entry's dims come from kv_c then k_pe) and the scale cache through kv_layout.cuh's cache_elem_offset(). Applied to the initial arena it produces the expected arena that diff.h
// compares a target's result with.
//
// Float caches: convert_bits (bit copy for equal dtypes, else RNE, NaN -> canonical NaN).
// Quantised caches: x = the input element widened to f32 (exact), stored = quantize_bits(x, scale)
// = convert(x / scale) with IEEE fp32 division, where scale is
//   per_tensor      static scale 0
//   per_head        static scale head
//   per_block       static scale (physical block of the slot) * H + head
//   per_token_head  max(amax, 1e-6f) / QMAX in fp32, amax = max |x| over the row's D values
//                   (NaN of any kind ignored, starting at 0; an Inf makes amax and scale Inf, and the
//                   formula then gives x / Inf = 0 and Inf / Inf = NaN: no special case), written
//                   to the scale cache cell (block, pos, head) of the tensor.
// Static scales live in the arena's scales section: K scales [0, n), V scales [n, 2n), n =
// static_scale_count().
//
// A sharded case (case/context_parallel.h) is one call per rank r, each into shard r (blocks
// r * shard_blocks + the slot's block, with that block's per-block scales and scale-cache cells):
// with input slot_mapping rank r reads its own slot mapping, which the golden model first writes
// into the image as the formula gives it (the producer's expected output); with input positions
// it reads slot_mapping and skips the rows whose position another rank holds.
#include "golden.h"

#include <cmath>
#include <cstring>

#include "case/context_parallel.h"
#include "case/window.h"
#include "block_quant.h"
#include "values/convert.h"

namespace kvf::golden {

namespace {
void append_format_row(const Case& c, const CacheFields& fields, std::byte* image, const ArenaLayout& layout, int64_t row,
                       int64_t block, int64_t pos);
// Raw element access on the arena's bytes (memcpy: sections may be misaligned for the element).
uint32_t load_elem(const std::byte* base, DType t, int64_t index);           // 16/8-bit types: low bits
void store_elem(std::byte* base, DType t, int64_t index, uint32_t bits);
int64_t load_slot(const std::byte* slots, IndexType t, int64_t row);         // slot_mapping[row], widened
float load_f32(const std::byte* base, int64_t index);
uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
void store_f32(std::byte* base, int64_t index, float f);
}  // namespace

void golden_append(const Case& c, Arena& arena) { golden_append(c, arena.data(), arena.layout()); }

void golden_append(const Case& c, std::byte* image, const ArenaLayout& layout) {
  const std::byte* input = image + layout.input_begin;
  const std::byte* slots = image + layout.slots_begin;
  const std::byte* scales = image + layout.scales_begin;
  std::byte* cache = image + layout.cache_begin;
  std::byte* scale_cache = image + layout.scale_cache_begin;
  const int64_t capacity = c.capacity();
  const bool quantized = is_quantized(c.cache_dtype);
  const int64_t scale_count = static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
  const CacheFields fields = c.fields();

  unsigned long long invalid = 0;
  // A ring with window input positions: rows of tokens already outside the window are not written.
  const WindowRows window = c.window_input == WindowInput::positions ? window_rows(c) : WindowRows{};
  const Window w = window_of(c);
  // A sharded case: each row's position, and (input slot_mapping) the ranks' slot mappings.
  const CpRows cp = c.has_cp() ? cp_rows(c) : CpRows{};
  const CpSection section = cp_section(c);
  if (c.cp_input == CpInput::slot_mapping)
    for (int64_t r = 0; r < c.cp_world_size; ++r) {
      const std::vector<int32_t> m = rank_slot_mapping(c, cp, r);
      std::memcpy(image + layout.slots_begin + (section.rank_mappings + r * c.num_slots()) * 4, m.data(), m.size() * 4);
    }
  const int64_t shard_capacity = c.shard_blocks() * c.cache.block_size;
  // Row `row` of rank `rank`'s call (one call without shards); rows >= T (graph padding) are never read.
  for (int64_t call_row = 0; call_row < c.num_ranks() * c.num_slots(); ++call_row) {
    const int64_t rank = call_row / c.num_slots(), row = call_row % c.num_slots();
    // A CSR call's slots are the case's (its arrays are derived from them; case/csr.h); a rank of a
    // sharded case with input slot_mapping reads its own.
    const int64_t slot = c.addressing == Addressing::csr ? c.slot_mapping[static_cast<size_t>(row)]
                         : c.cp_input == CpInput::slot_mapping
                             ? load_slot(slots + (section.rank_mappings + rank * c.num_slots()) * 4, IndexType::i32, row)
                             : load_slot(slots, c.slot_dtype, row);
    if (c.is_padding(slot)) continue;  // padding (into the sink: unconstrained)
    if (!window.position.empty() && window.position[static_cast<size_t>(row)] >= 0 &&
        !w.kept(window.position[static_cast<size_t>(row)], window.seq_len[static_cast<size_t>(row)]))
      continue;  // outside the window already: not written
    if (c.cp_input == CpInput::positions && cp.position[static_cast<size_t>(row)] >= 0 &&
        shards_of(c).owner(cp.position[static_cast<size_t>(row)]) != rank)
      continue;  // another rank's token
    if (slot >= (c.has_cp() ? shard_capacity : capacity)) {  // invalid: never written, counted
      ++invalid;
      continue;
    }
    const int64_t block = rank * c.shard_blocks() + slot / c.cache.block_size;  // in the rank's shard
    const int64_t pos = slot % c.cache.block_size;
    if (c.has_format()) {  // codes, scales and zero points of a quantised format, group by group
      append_format_row(c, fields, image, layout, row, block, pos);
      continue;
    }
    for (int64_t head = 0; head < c.num_heads; ++head) {
      for (const CacheField& field : fields) {
        // Input element of the entry's dim `dim`: the part holding it, at its own dim.
        auto input_elem = [&](int64_t dim) {
          int part = 0;
          while (part + 1 < field.num_parts && dim >= field.parts[part].width) dim -= field.parts[part++].width;
          const InputView& view = field.parts[part].view;
          return view.offset + input_elem_offset(view.stride_token, view.stride_head, row, head, dim);
        };
        auto cache_elem = [&](int64_t dim) { return field_offset(field.layout, block, pos, head, dim); };

        if (!quantized) {
          for (int64_t dim = 0; dim < field.head_dim; ++dim) {
            const uint32_t x = load_elem(input, c.input_dtype, input_elem(dim));
            store_elem(cache, c.cache_dtype, cache_elem(dim), convert_bits(x, c.input_dtype, c.cache_dtype));
          }
          continue;
        }

        const int64_t first_scale = field.index * scale_count;
        float scale = 0.0f;
        switch (c.scale_kind) {
          case ScaleKind::per_tensor: scale = load_f32(scales, first_scale + 0); break;
          case ScaleKind::per_head: scale = load_f32(scales, first_scale + head); break;
          case ScaleKind::per_block: scale = load_f32(scales, first_scale + block * c.num_heads + head); break;
          case ScaleKind::per_token_head: {
            // NaN is skipped explicitly: std::fmax returns NaN for a signalling NaN operand (IEEE
            // maxNum), and widening keeps an f16/bf16 signalling NaN signalling.
            float amax = 0.0f;
            for (int64_t dim = 0; dim < field.head_dim; ++dim) {
              const float a = std::fabs(bits_to_f32(load_elem(input, c.input_dtype, input_elem(dim)), c.input_dtype));
              if (!std::isnan(a) && a > amax) amax = a;
            }
            scale = (amax > 1e-6f ? amax : 1e-6f) / quant_max(c.cache_dtype);
            store_f32(scale_cache, (field.index == 1 ? c.scale_v_offset : c.scale_k_offset) + cache_elem_offset(c.scale_cache, block, pos, head, 0),
                      scale);
            break;
          }
          case ScaleKind::none: break;  // invalid for a quantised cache (validation rejects it): scale 0
        }
        for (int64_t dim = 0; dim < field.head_dim; ++dim) {
          const float x = bits_to_f32(load_elem(input, c.input_dtype, input_elem(dim)), c.input_dtype);
          store_elem(cache, c.cache_dtype, cache_elem(dim), quantize_bits(x, scale, c.cache_dtype));
        }
      }
    }
  }
  std::memcpy(image + layout.counter_begin, &invalid, sizeof invalid);
}

// ---------------------------------------------------------------------------------------------

namespace {

// Raw bits of element `index` of an array of `t` (16- and 8-bit types in the low bits).
uint32_t load_elem(const std::byte* base, DType t, int64_t index) {
  switch (dtype_size(t)) {
    case 4: {
      uint32_t v;
      std::memcpy(&v, base + index * 4, 4);
      return v;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, base + index * 2, 2);
      return v;
    }
    default: {
      uint8_t v;
      std::memcpy(&v, base + index, 1);
      return v;
    }
  }
}

void store_elem(std::byte* base, DType t, int64_t index, uint32_t bits) {
  switch (dtype_size(t)) {
    case 4: std::memcpy(base + index * 4, &bits, 4); return;
    case 2: {
      const auto v = static_cast<uint16_t>(bits);
      std::memcpy(base + index * 2, &v, 2);
      return;
    }
    default: {
      const auto v = static_cast<uint8_t>(bits);
      std::memcpy(base + index, &v, 1);
      return;
    }
  }
}

float load_f32(const std::byte* base, int64_t index) {
  float f;
  std::memcpy(&f, base + index * 4, 4);
  return f;
}

void store_f32(std::byte* base, int64_t index, float f) { std::memcpy(base + index * 4, &f, 4); }

// ---------------------------------------------------------------------------------------------
// The quantised formats (case/quant_format.h): each data field's row is read whole, quantised group
// by group with block_quant.h under the case's rules, and its codes, scales and zero points are
// stored through their fields' layouts. A rope field (ds_mla) is a plain conversion.

// The code of dim j of a group's packed 4-bit codes (element 2j's low nibble, as the formats pack).
uint32_t nibble(const std::vector<uint8_t>& packed, int64_t j) { return (packed[static_cast<size_t>(j / 2)] >> (4 * (j % 2))) & 0xFu; }
uint32_t nibble(const std::array<uint8_t, kNvfp4Group / 2>& packed, int64_t j) { return (packed[static_cast<size_t>(j / 2)] >> (4 * (j % 2))) & 0xFu; }

void append_format_row(const Case& c, const CacheFields& fields, std::byte* image, const ArenaLayout& layout, int64_t row,
                       int64_t block, int64_t pos) {
  const std::byte* input = image + layout.input_begin;
  const std::byte* scales = image + layout.scales_begin;
  const QuantRules& rules = c.quant_rules;
  const int64_t scale_count = static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
  for (const CacheField& field : fields) {
    if (field.role != FieldRole::data) continue;
    std::byte* buffer = image + (field.buffer == FieldBuffer::cache ? layout.cache_begin : layout.scale_cache_begin);
    for (int64_t head = 0; head < field.num_heads; ++head) {
      // The row's input elements, as the field stores them (dims of its parts, in order).
      std::vector<uint32_t> bits(static_cast<size_t>(field.head_dim));
      std::vector<float> x(static_cast<size_t>(field.head_dim));
      for (int64_t d = 0; d < field.head_dim; ++d) {
        int part = 0, dim = d;
        while (part + 1 < field.num_parts && dim >= field.parts[part].width) dim -= field.parts[part++].width;
        const InputView& v = field.parts[part].view;
        bits[static_cast<size_t>(d)] = load_elem(input, c.input_dtype, v.offset + input_elem_offset(v.stride_token, v.stride_head, row, head, dim));
        x[static_cast<size_t>(d)] = bits_to_f32(bits[static_cast<size_t>(d)], c.input_dtype);
      }
      const auto code_at = [&](int64_t d, uint32_t code) {
        store_field_elem(buffer, field.dtype, field_offset(field.layout, block, pos, head, d), code);
      };
      if (field.group == 0) {  // copied (a record's rope part): converted to the field's dtype
        for (int64_t d = 0; d < field.head_dim; ++d) code_at(d, convert_bits(bits[static_cast<size_t>(d)], c.input_dtype, field.dtype));
        continue;
      }
      const CacheField& sf = fields.field[field.scale];
      std::byte* scale_buffer = image + (sf.buffer == FieldBuffer::cache ? layout.cache_begin : layout.scale_cache_begin);
      const auto scale_at = [&](const CacheField& f, int64_t g, uint32_t value) {
        store_field_elem(scale_buffer, f.dtype, field_offset(f.layout, block, pos, head, g), value);
      };
      const int64_t group = field.group;
      for (int64_t g = 0; g < field.head_dim / group; ++g) {
        const std::span<const float> xs(x.data() + g * group, static_cast<size_t>(group));
        switch (c.quant_format) {
          case QuantFormat::nvfp4: {
            const float global = load_f32(scales, field.index * scale_count);  // the per-tensor global scale
            const Nvfp4Block b = quantize_nvfp4(std::span<const float, kNvfp4Group>(xs.data(), kNvfp4Group), global, rules.nvfp4);
            for (int64_t j = 0; j < group; ++j) code_at(g * group + j, nibble(b.packed, j));
            scale_at(sf, g, b.scale);
            break;
          }
          case QuantFormat::mxfp8_e4m3:
          case QuantFormat::mxfp8_e5m2:
          case QuantFormat::mxfp4: {
            const MxElement e = c.quant_format == QuantFormat::mxfp4       ? MxElement::fp4_e2m1
                                : c.quant_format == QuantFormat::mxfp8_e5m2 ? MxElement::fp8_e5m2
                                                                            : MxElement::fp8_e4m3;
            const MxBlock b = quantize_mx(std::span<const float, kMxGroup>(xs.data(), kMxGroup), e, rules.mx);
            for (int64_t j = 0; j < group; ++j) code_at(g * group + j, e == MxElement::fp4_e2m1 ? nibble(b.codes, j) : b.codes[static_cast<size_t>(j)]);
            scale_at(sf, g, b.scale);
            break;
          }
          case QuantFormat::ds_mla:
          case QuantFormat::indexer_k: {
            const Fp8Tile t = c.quant_format == QuantFormat::ds_mla ? quantize_ds_mla_tile(xs, rules.ds_mla) : quantize_indexer_tile(xs, rules.indexer);
            for (int64_t j = 0; j < group; ++j) code_at(g * group + j, t.codes[static_cast<size_t>(j)]);
            scale_at(sf, g, f32_bits(t.scale));
            break;
          }
          case QuantFormat::fp8_inline:
          case QuantFormat::int8_inline: {  // the contract's per_token_head: max(amax, 1e-6) / QMAX, x / s
            float amax = 0.0f;
            for (const float v : xs)
              if (!std::isnan(v) && std::fabs(v) > amax) amax = std::fabs(v);
            const float s = (amax > 1e-6f ? amax : 1e-6f) / quant_max(field.dtype);
            for (int64_t j = 0; j < group; ++j) code_at(g * group + j, quantize_bits(xs[static_cast<size_t>(j)], s, field.dtype));
            scale_at(sf, g, f32_bits(s));
            break;
          }
          case QuantFormat::asym_int8:
          case QuantFormat::asym_int4: {
            const bool int4 = c.quant_format == QuantFormat::asym_int4;
            const AsymGroup a = int4 ? quantize_asym_int4(xs, rules.int4_pairing, rules.asym_lanes)
                                     : quantize_asym_int8(xs, rules.asym_arith, rules.asym_lanes);
            const int64_t half = group / 2;
            for (int64_t j = 0; j < group; ++j) {
              uint32_t q = 0;
              if (!int4) q = a.codes[static_cast<size_t>(j)];
              else if (rules.int4_pairing == Int4Pairing::adjacent) q = nibble(a.codes, j);
              else q = j < half ? a.codes[static_cast<size_t>(j)] & 0xFu : a.codes[static_cast<size_t>(j - half)] >> 4;
              code_at(g * group + j, q);
            }
            scale_at(sf, g, f32_bits(a.scale));
            scale_at(fields.field[field.zero], g, f32_bits(a.zero));
            break;
          }
          case QuantFormat::none: break;
        }
      }
    }
  }
}

// slot_mapping[row] as read by a kernel from the arena's slot section.
int64_t load_slot(const std::byte* slots, IndexType t, int64_t row) {
  if (t == IndexType::i32) {
    int32_t v;
    std::memcpy(&v, slots + row * 4, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, slots + row * 8, 8);
  return v;
}

}  // namespace

}  // namespace kvf::golden
