// golden.cpp — the golden model of the append contract (DESIGN.md §1, unquantised part).
//
// golden_append() is boring on purpose (STYLE.md rule 3): plain loops over (row, head, dim), one
// element at a time, no vectorisation and no shortcuts. It consumes the same bytes a kernel does —
// slot_mapping and key/value elements are read from the arena image, not from the Case — and
// addresses the cache only through kv_layout.cuh's cache_elem_offset(). Applied to the initial
// arena it produces the expected arena that diff.h compares a target's result with.
#include "golden.h"

#include <cstring>

#include "convert.h"

namespace kvf::golden {

namespace {
// Raw element access on the arena's bytes (memcpy: sections may be misaligned for the element).
uint32_t load_elem(const std::byte* base, DType t, int64_t index);           // 16-bit types: low half
void store_elem(std::byte* base, DType t, int64_t index, uint32_t bits);
int64_t load_slot(const std::byte* slots, IndexType t, int64_t row);         // slot_mapping[row], widened
}  // namespace

void golden_append(const Case& c, Arena& arena) {
  const std::byte* input = arena.input();
  const std::byte* slots = arena.slots();
  std::byte* cache = arena.cache();
  const int64_t capacity = c.capacity();

  unsigned long long invalid = 0;
  for (int64_t row = 0; row < c.num_slots(); ++row) {  // rows >= T (graph padding) are never read
    const int64_t slot = load_slot(slots, c.slot_dtype, row);
    if (slot < 0) continue;  // padding
    if (slot >= capacity) {  // invalid: never written, counted
      ++invalid;
      continue;
    }
    const int64_t block = slot / c.cache.block_size;
    const int64_t pos = slot % c.cache.block_size;
    for (int64_t head = 0; head < c.num_heads; ++head) {
      for (int64_t dim = 0; dim < c.head_dim; ++dim) {
        const int64_t cell = cache_elem_offset(c.cache, block, pos, head, dim);

        const int64_t k_in = c.key.offset + input_elem_offset(c.key.stride_token, c.key.stride_head, row, head, dim);
        const uint32_t k = load_elem(input, c.input_dtype, k_in);
        store_elem(cache, c.cache_dtype, c.cache_k_offset + cell, convert_bits(k, c.input_dtype, c.cache_dtype));

        const int64_t v_in =
            c.value.offset + input_elem_offset(c.value.stride_token, c.value.stride_head, row, head, dim);
        const uint32_t v = load_elem(input, c.input_dtype, v_in);
        store_elem(cache, c.cache_dtype, c.cache_v_offset + cell, convert_bits(v, c.input_dtype, c.cache_dtype));
      }
    }
  }
  std::memcpy(arena.counter(), &invalid, sizeof invalid);
}

// ---------------------------------------------------------------------------------------------

namespace {


// Raw bits of element `index` of an array of `t` (16-bit types in the low half).
uint32_t load_elem(const std::byte* base, DType t, int64_t index) {
  if (t == DType::f32) {
    uint32_t v;
    std::memcpy(&v, base + index * 4, 4);
    return v;
  }
  uint16_t v;
  std::memcpy(&v, base + index * 2, 2);
  return v;
}

void store_elem(std::byte* base, DType t, int64_t index, uint32_t bits) {
  if (t == DType::f32) {
    std::memcpy(base + index * 4, &bits, 4);
    return;
  }
  const uint16_t v = static_cast<uint16_t>(bits);
  std::memcpy(base + index * 2, &v, 2);
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
