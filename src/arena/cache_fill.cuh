// cache_fill.cuh — host/device pieces of large-cache checking (windows.h): inverting the cache
// addressing formula, and the pattern every cache element outside the host's windows holds.
//
// CacheShape::locate() inverts the cache addressing with kv_format.cuh's FieldShape; CacheLocator
// (arena.h) is built on it. CacheFill is what a large case's cache holds before the run wherever the
// host has no window: one pattern, the free-block canary of the cache dtype. Every block a request
// owns lies inside a window, so outside them there are only free-block cells, which hold exactly that
// in a dense arena too, and stride gaps (irregular layouts), which hold the stride-gap canary in a
// dense arena and the free-block canary here; both are NaN patterns (codes, for 1-byte caches) that
// the checks treat alike. One constant makes the device fill a memset and the check a streaming
// compare (outside_scan.cuh).
#pragma once

#include <cstdint>

#include "kv_format.cuh"  // KVF_HD, CacheGeometry, FieldShape

namespace kvf {

// (tensor, block, pos, head, dim) of one cache element, if some cell of K or V is at it.
struct CellIndex {
  bool is_cell = false;   // false: a gap (no cell addresses the element)
  bool is_value = false;  // V (else K)
  int64_t block = -1, pos = -1, head = -1, dim = -1;
};

// One buffer's K and V tensors prepared for inversion: a FieldShape (kv_format.cuh) per tensor,
// so the arena, the report map and the device-side checks invert addresses with the format model's
// one inversion. Relies on the "nested strides" validity rule (validate.h), under which a buffer
// element is at most one cell; each result is checked against field_offset(), so an invalid case
// can only make locate() say "gap", never lie.
struct CacheShape {
  CacheGeometry g;       // blocks of K and V (V's strides are in its FieldLayout)
  FieldShape tensor[2];  // K, V
  int num_tensors = 2;   // 1: K (or the MLA latent entry) alone

  CacheShape() = default;
  // Host only. `num_heads` and `head_dim` are the extents of the head and dim dimensions (head_dim
  // 1 for a scale cache).
  CacheShape(const CacheGeometry& geometry, int64_t k_off, int64_t v_off, int64_t num_heads, int64_t head_dim)
      : CacheShape(geometry, geometry_layout(geometry, k_off, num_heads, head_dim),
                   geometry_layout(geometry, v_off, num_heads, head_dim)) {}
  // Host only: K's and V's fields of any format (Case::cache_field), with the blocks of `geometry`.
  CacheShape(const CacheGeometry& geometry, const FieldLayout& k, const FieldLayout& v)
      : g(geometry), tensor{FieldShape(k), FieldShape(v)} {}
  // Host only: one field.
  CacheShape(const CacheGeometry& geometry, const FieldLayout& k) : g(geometry), tensor{FieldShape(k), FieldShape()}, num_tensors(1) {}

  KVF_HD CellIndex locate(int64_t elem) const {
    CellIndex out;
    for (int t = 0; t < num_tensors; ++t) {
      const FieldCoord c = tensor[t].locate(elem);
      if (!c.found) continue;
      out.is_cell = true;
      out.is_value = t == 1;
      out.block = c.block;
      out.pos = c.pos;
      out.head = c.head;
      out.dim = c.dim;
      return out;
    }
    return out;
  }
};

// The pre-run bits of every cache element outside a large case's windows (windows.h).
struct CacheFill {
  int elem_size = 2;  // bytes per element of the cache dtype: 1, 2 or 4
  uint32_t bits = 0;  // the free-block canary of the cache dtype
};

// Element `elem` of a cache of `size`-byte elements, little-endian, as the low bits. On the device
// `cache` must be aligned for the element type (a cache section always is: 256 bytes).
KVF_HD uint32_t load_cache_bits(const unsigned char* cache, int64_t elem, int size) {
#if defined(__CUDA_ARCH__)
  switch (size) {
    case 4: return reinterpret_cast<const uint32_t*>(cache)[elem];
    case 2: return reinterpret_cast<const uint16_t*>(cache)[elem];
    default: return cache[elem];
  }
#else
  const unsigned char* p = cache + elem * size;
  switch (size) {
    case 4: return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
    case 2: return uint32_t{p[0]} | (uint32_t{p[1]} << 8);
    default: return p[0];
  }
#endif
}

KVF_HD void store_cache_bits(unsigned char* cache, int64_t elem, int size, uint32_t bits) {
  unsigned char* p = cache + elem * size;
  for (int i = 0; i < size; ++i) p[i] = static_cast<unsigned char>(bits >> (8 * i));
}

}  // namespace kvf
