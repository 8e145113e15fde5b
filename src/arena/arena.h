// arena.h — the guarded memory image one append runs on.
//
// One byte image, 256-byte aligned like cudaMalloc, laid out as
//   [guard][input buffer][guard][slot_mapping][guard][static scales][guard][cache buffer][guard]
//   [scale cache buffer][guard][invalid counter][guard]
// The static scales section holds static_scale_count() fp32 K scales then as many V scales (empty
// unless per_tensor / per_head / per_block); the scale cache section holds case.scale_cache_elems
// fp32 elements (empty unless per_token_head). Empty sections take no bytes but keep their guard.
// Each section starts 256-byte aligned; every byte outside the six sections is guard (0xFF, a NaN
// in every float and fp8 dtype, -1 in int8), except the first half of the band after slot_mapping, which is 0x00 so
// that an over-read of slot_mapping yields slot 0, a real slot, rather than -1, which is skipped. guard_bytes = round_up(clamp(one cache block's span in bytes, 4 KiB,
// 1 MiB), 256), so an off-by-one-block write from either end of the cache lands in a guard band.
// Every byte has a known value before the run (make_initial_arena): payload rows, tagged-NaN padding rows,
// provenance-encoded context, per-region canaries, guard patterns. A target runs the kernel with
// pointers into the image (host image for cuda-emu; a device copy for GPU targets), and the image
// afterwards is compared with the golden expectation (diff.h).
//
// Large caches (windows.h): an arena may be *windowed*. It has the same layout and the same
// addresses, but only its materialised byte ranges (every section but the cache, and windows of the
// cache) hold bytes; the rest of the image is reserved address space that reads as zeros and is
// never compared: its pre-run bits are the fill (CacheFill, cache_fill.cuh), and the target checks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "case/case.h"
#include "cache_fill.cuh"

namespace kvf {

// A byte range [begin, end) of an arena image.
struct ByteRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const ByteRange&) const = default;
};

// Byte offsets of each section in the image. Every section begins 256-byte aligned.
struct ArenaLayout {
  int64_t guard_bytes = 0;    // size of each guard band (multiple of 256)
  int64_t input_begin = 0;    // input buffer: input_buffer_elems elements of input_dtype
  int64_t input_bytes = 0;
  int64_t slots_begin = 0;    // slot_mapping: num_slots elements of slot_dtype
  int64_t slots_bytes = 0;
  int64_t scales_begin = 0;   // static scales: 2 * static_scale_count() fp32 (K then V); read-only
  int64_t scales_bytes = 0;
  int64_t cache_begin = 0;    // cache buffer: cache_buffer_elems elements of cache_dtype
  int64_t cache_bytes = 0;
  int64_t scale_cache_begin = 0;  // scale cache buffer: scale_cache_elems fp32 (per_token_head)
  int64_t scale_cache_bytes = 0;
  int64_t counter_begin = 0;  // one unsigned long long: the invalid-slot counter
  int64_t total_bytes = 0;
};

// Plans the image of a (valid) case.
ArenaLayout plan_arena(const Case& c);

class Arena {
 public:
  // A dense image: every byte materialised (uninitialised).
  explicit Arena(const ArenaLayout& layout);
  // A windowed image: only `materialized` (sorted, disjoint, page-aligned ranges inside the image,
  // as plan_windows() makes them) is backed by memory; the rest reads as zeros. Uninitialised.
  Arena(const ArenaLayout& layout, std::vector<ByteRange> materialized);
  Arena(const Arena& other);
  Arena& operator=(const Arena& other);
  // An arena of `other`'s layout and materialised ranges, its bytes uninitialised: the destination
  // of a copy of every materialised byte (a worker's post-run image, campaign/isolation.h).
  static Arena shaped_like(const Arena& other);
  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  const ArenaLayout& layout() const { return layout_; }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  int64_t size() const { return layout_.total_bytes; }
  // The byte ranges that hold the image's bytes: {[0, size())} for a dense arena. Copies, transfers
  // and comparisons touch only these.
  const std::vector<ByteRange>& materialized() const { return materialized_; }
  bool windowed() const { return windowed_; }

  std::byte* input() { return data() + layout_.input_begin; }
  std::byte* slots() { return data() + layout_.slots_begin; }
  std::byte* cache() { return data() + layout_.cache_begin; }
  std::byte* scales() { return data() + layout_.scales_begin; }
  std::byte* scale_cache() { return data() + layout_.scale_cache_begin; }
  const std::byte* scales() const { return data() + layout_.scales_begin; }
  const std::byte* scale_cache() const { return data() + layout_.scale_cache_begin; }
  unsigned long long* counter() { return reinterpret_cast<unsigned long long*>(data() + layout_.counter_begin); }
  const std::byte* input() const { return data() + layout_.input_begin; }
  const std::byte* slots() const { return data() + layout_.slots_begin; }
  const std::byte* cache() const { return data() + layout_.cache_begin; }
  unsigned long long counter_value() const;

 private:
  struct Free {
    Free() : mapped(0) {}
    explicit Free(size_t bytes) : mapped(bytes) {}
    size_t mapped;  // bytes of an mmap()ed (windowed) image; 0: aligned_alloc()ed
    void operator()(std::byte* p) const;
  };
  void allocate();
  void copy_from(const Arena& other);
  ArenaLayout layout_;
  bool windowed_ = false;
  std::vector<ByteRange> materialized_;
  std::unique_ptr<std::byte[], Free> data_;
};

// An arena whose every byte holds its pre-run value.
Arena make_initial_arena(const Case& c);

// The windowed arena of a large case: every materialised byte (plan.ranges, windows.h) holds its
// pre-run value, which is the value make_initial_arena(c) gives it; cache elements outside the
// ranges stand for plan.fill.bits.
struct WindowPlan;
Arena make_initial_arena(const Case& c, const WindowPlan& plan);

// What occupies one element of the cache buffer.
// Roles of an owned block's positions (case/placement.h): context below context_len, new_token at
// the request's new positions, hole at its other positions below the written extent, tail above.
struct CacheCell {
  // sink: slot 0 in the sink padding mode (case.h is_sink): no request owns it, padding rows may
  // write it, and its contents after the call are unconstrained (never judged).
  enum class Role : uint8_t { gap, free_block, tail, context, new_token, hole, sink };
  Role role = Role::gap;
  bool is_value = false;  // V tensor (else K); meaningless for gap
  bool shared = false;    // context of a prefix block several requests share; `request` is its first owner
  int64_t block = -1, pos = -1, head = -1, dim = -1;  // -1 for gap
  int64_t request = -1;   // owning request (context, new_token, hole, tail), else -1
  int64_t token = -1;     // position in the request's sequence (context, new_token, hole, tail)
  int64_t rank = -1;      // a sharded case (case/context_parallel.h): the rank whose shard holds `block`; else -1
  int field = -1;         // a quantised format (case/quant_format.h): the index in c.fields() of the field
  int64_t elem = -1;      //   holding the cell, and the element's index in its buffer, in the field's dtype
};

// What a producer's output cell of a sharded case (case/context_parallel.h) holds before the
// producer writes it: a negative slot no formula gives (-0x5a5a5a5b), so an entry the producer
// skips is a `slot_mapping_mismatch`, and the append reads it as padding.
constexpr uint32_t kCpMappingCanary = 0xA5A5A5A5u;

// Inverts the cache addressing of one case: which cell (tensor, block, pos, head, dim) a cache
// buffer element is (CacheShape::locate, cache_fill.cuh), and who owns it. Construction is
// O(num_blocks + block tables); locate() and cell() are O(1). Holds a reference to `c`, which must outlive it.
class CacheLocator {
 public:
  explicit CacheLocator(const Case& c);

  // The locator of a case's scale cache buffer (per_token_head): geometry c.scale_cache, K at
  // c.scale_k_offset, V at c.scale_v_offset, one fp32 element per (block, pos, head), so every
  // located cell has dim 0. Roles and owners are those of the KV cache cell (block, pos, head).
  static CacheLocator scale_cache(const Case& c);

  // The cell at cache buffer element `elem`; role gap if no (tensor, block, pos, head, dim) of K or
  // V addresses it (stride gaps, bytes before K/V, past the end). A quantised format's buffers are
  // located by byte: the first cell of locate_byte().
  CacheCell locate(int64_t elem) const;

  // A quantised format (case/quant_format.h): the cells of the located buffer's byte `byte`, the
  // fields that hold it (a 4-bit field's two nibbles, low first; one element of any other field);
  // returns how many (0: a gap), at most 2, written to out.
  int locate_byte(int64_t byte, CacheCell (&out)[2]) const;

  // The cell (tensor, block, pos, head, dim) with its owner and role filled in. Coordinates must be
  // in range.
  CacheCell cell(bool is_value, int64_t block, int64_t pos, int64_t head, int64_t dim) const;

  // Owner of a physical block: request index and logical block index in its table, or -1/-1 if the
  // block is free. A shared block's owner is the first request holding it (case/placement.h).
  struct Owner {
    int64_t request = -1;
    int64_t logical = -1;
  };
  Owner owner(int64_t block) const { return owners_[static_cast<size_t>(block)]; }

  // Every request holding a shared block, in order; nullptr for a block in at most one table.
  const std::vector<int64_t>* sharers(int64_t block) const {
    const auto it = shared_.find(block);
    return it == shared_.end() ? nullptr : &it->second;
  }

  // The inversion itself (cache_fill.cuh), shared with the device-side fill of large caches.
  const CacheShape& shape() const { return shape_; }

 private:
  CacheLocator(const Case& c, const CacheGeometry& g, const CacheShape& shape);
  CacheLocator(const Case& c, FieldBuffer buffer);  // a quantised format's buffer
  void own_blocks(const CacheGeometry& g);
  // A quantised format's field of the located buffer, prepared for inversion.
  struct TypedField {
    int field = 0;  // index in c.fields()
    int bits = 8;   // dtype_bits of its dtype
    bool is_value = false;
    FieldShape shape;
  };
  std::vector<TypedField> typed_;  // empty for the classic caches
  const Case& c_;
  CacheShape shape_;            // geometry of the located buffer's K and V tensors, prepared for inversion
  std::vector<Owner> owners_;   // [num_blocks] owner of each physical block
  std::map<int64_t, std::vector<int64_t>> shared_;  // shared block -> the requests holding it
  std::vector<std::vector<int64_t>> positions_;     // [requests] explicit new positions, sorted; empty if consecutive
  std::vector<int64_t> extent_;                     // [requests] written_extent(): holes below, tail from here
};

// Locates cache element `elem` (index into the cache buffer) by inverting K's and V's layouts
// (Case::cache_field); verified with field_offset(). Builds a CacheLocator, so O(num_blocks): callers locating
// many elements should build one CacheLocator and reuse it.
CacheCell locate_cache_elem(const Case& c, int64_t elem);

// The sink padding mode (case.h is_sink): sets every element of slot 0 in `a` (each field, head
// and dim, and its scale-cache entries) back to its bits in `initial`, so that two images whose
// sinks hold different padding rows compare equal. Does nothing in the default mode.
void reset_sink(const Case& c, const Arena& initial, Arena& a);

// Raw element access on an image: element `index` of `size` bytes (1, 2 or 4 for cache dtypes, 4 or 8
// for slot dtypes) starting at `base`, as the low bits of the result (little-endian host).
uint64_t load_elem(const std::byte* base, int64_t index, int size);
void store_elem(std::byte* base, int64_t index, int size, uint64_t bits);
// Element `elem` of a field of dtype t in a byte buffer: its bits (a 4-bit dtype's element 2j is
// the low nibble of byte j, 2j + 1 the high nibble; the other nibble is kept on store).
uint32_t load_field_elem(const std::byte* buffer, DType t, int64_t elem);
void store_field_elem(std::byte* buffer, DType t, int64_t elem, uint32_t bits);
// The buffer of image `a` that holds field f.
inline std::byte* field_buffer(Arena& a, const CacheField& f) { return f.buffer == FieldBuffer::cache ? a.cache() : a.scale_cache(); }
inline const std::byte* field_buffer(const Arena& a, const CacheField& f) {
  return f.buffer == FieldBuffer::cache ? a.cache() : a.scale_cache();
}

}  // namespace kvf
