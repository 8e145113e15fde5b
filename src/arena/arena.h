// arena.h — the guarded memory image one append runs on.
//
// One byte image, 256-byte aligned like cudaMalloc, laid out as
//   [guard][input buffer][guard][slot_mapping][guard][cache buffer][guard][invalid counter][guard]
// Every byte has a known value before the run (fill_initial): payload rows, tagged-NaN padding rows,
// provenance-encoded context, per-region canaries, guard patterns. A target runs the kernel with
// pointers into the image (host image for cuda-emu; a device copy for GPU targets), and the image
// afterwards is compared with the golden expectation (diff.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../case/case.h"

namespace kvf {

// Byte offsets of each section in the image. Every section begins 256-byte aligned.
struct ArenaLayout {
  int64_t guard_bytes = 0;    // size of each guard band (multiple of 256)
  int64_t input_begin = 0;    // input buffer: input_buffer_elems elements of input_dtype
  int64_t input_bytes = 0;
  int64_t slots_begin = 0;    // slot_mapping: num_slots elements of slot_dtype
  int64_t slots_bytes = 0;
  int64_t cache_begin = 0;    // cache buffer: cache_buffer_elems elements of cache_dtype
  int64_t cache_bytes = 0;
  int64_t counter_begin = 0;  // one unsigned long long: the invalid-slot counter
  int64_t total_bytes = 0;
};

// Plans the image of a (valid) case.
ArenaLayout plan_arena(const Case& c);

class Arena {
 public:
  explicit Arena(const ArenaLayout& layout);
  Arena(const Arena& other);
  Arena& operator=(const Arena& other);
  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  const ArenaLayout& layout() const { return layout_; }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  int64_t size() const { return layout_.total_bytes; }

  std::byte* input() { return data() + layout_.input_begin; }
  std::byte* slots() { return data() + layout_.slots_begin; }
  std::byte* cache() { return data() + layout_.cache_begin; }
  unsigned long long* counter() { return reinterpret_cast<unsigned long long*>(data() + layout_.counter_begin); }
  const std::byte* input() const { return data() + layout_.input_begin; }
  const std::byte* slots() const { return data() + layout_.slots_begin; }
  const std::byte* cache() const { return data() + layout_.cache_begin; }
  unsigned long long counter_value() const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  ArenaLayout layout_;
  std::unique_ptr<std::byte[], Free> data_;
};

// An arena whose every byte holds its pre-run value.
Arena make_initial_arena(const Case& c);

// What occupies one element of the cache buffer.
struct CacheCell {
  enum class Role : uint8_t { gap, free_block, tail, context, new_token };
  Role role = Role::gap;
  bool is_value = false;  // V tensor (else K); meaningless for gap
  int64_t block = -1, pos = -1, head = -1, dim = -1;  // -1 for gap
  int64_t request = -1;   // owning request (context, new_token, tail), else -1
  int64_t token = -1;     // position in the request's sequence (context, new_token, tail)
};

// Locates cache element `elem` (index into the cache buffer) by inverting the stride formula;
// verified with cache_elem_offset(). O(1).
CacheCell locate_cache_elem(const Case& c, int64_t elem);

}  // namespace kvf
