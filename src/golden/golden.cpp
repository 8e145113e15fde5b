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

#include "../case/context_parallel.h"
#include "../case/window.h"
#include "convert.h"

namespace kvf::golden {

namespace {
// Raw element access on the arena's bytes (memcpy: sections may be misaligned for the element).
uint32_t load_elem(const std::byte* base, DType t, int64_t index);           // 16/8-bit types: low bits
void store_elem(std::byte* base, DType t, int64_t index, uint32_t bits);
int64_t load_slot(const std::byte* slots, IndexType t, int64_t row);         // slot_mapping[row], widened
float load_f32(const std::byte* base, int64_t index);
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
