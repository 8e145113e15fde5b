// cache_fill.cuh — host/device pieces of large-cache checking (windows.h): inverting the cache
// addressing formula, and the pattern every cache element outside the host's windows holds.
//
// CacheShape::locate() is the one inversion of kv_layout.cuh's cache_elem_offset(); CacheLocator
// (arena.h) is built on it. CacheFill is what a large case's cache holds before the run wherever the
// host has no window: one pattern, the free-block canary of the cache dtype. Every block a request
// owns lies inside a window, so outside them there are only free-block cells, which hold exactly that
// in a dense arena too, and stride gaps (irregular layouts), which hold the stride-gap canary in a
// dense arena and the free-block canary here; both are NaN patterns (codes, for 1-byte caches) that
// the checks treat alike. One constant makes the device fill a memset and the check a streaming
// compare (outside_scan.cuh).
#pragma once

#include <cstdint>

#include "kv_layout.cuh"  // KVF_HD, CacheGeometry, cache_elem_offset

namespace kvf {

// (tensor, block, pos, head, dim) of one cache element, if some cell of K or V is at it.
struct CellIndex {
  bool is_cell = false;   // false: a gap (no cell addresses the element)
  bool is_value = false;  // V (else K)
  int64_t block = -1, pos = -1, head = -1, dim = -1;
};

// The geometry of one buffer's K and V tensors prepared for inversion. Relies on the "nested
// strides" validity rule (validate.h): sorted by stride, every stride exceeds the span of all
// smaller dims, so greedy division by the strides in descending order is the only possible
// decomposition; the result is checked against cache_elem_offset() anyway, so an invalid case can
// only make locate() say "gap", never lie.
struct CacheShape {
  struct Dim {
    int64_t stride = 0, extent = 1;
    int which = 0;  // 0 block, 1 pos, 2 head, 3 dim
  };
  CacheGeometry g;                        // geometry of K and V
  int64_t k_offset = 0, v_offset = 0;     // element offsets of K and V in the buffer
  Dim dims[4];                            // dims of extent > 1, by descending stride
  int num_dims = 0;
  bool invertible = true;                 // false if a dim is empty, or has extent > 1 and a stride <= 0

  CacheShape() = default;
  // Host only. `num_heads` and `head_dim` are the extents of the head and dim dimensions (head_dim
  // 1 for a scale cache).
  CacheShape(const CacheGeometry& geometry, int64_t k_off, int64_t v_off, int64_t num_heads, int64_t head_dim)
      : g(geometry), k_offset(k_off), v_offset(v_off) {
    const Dim all[4] = {{g.stride_block, g.num_blocks, 0}, {g.stride_pos, g.block_size, 1}, {g.stride_head, num_heads, 2}, {1, head_dim, 3}};
    for (const Dim& d : all) {
      if (d.extent <= 0) invertible = false;  // no cell at all: every element is a gap
      if (d.extent <= 1) continue;            // index is always 0; its stride does not matter
      if (d.stride <= 0) invertible = false;
      dims[num_dims++] = d;
    }
    for (int i = 1; i < num_dims; ++i)  // insertion sort by descending stride (at most 4 dims)
      for (int j = i; j > 0 && dims[j - 1].stride < dims[j].stride; --j) {
        const Dim t = dims[j];
        dims[j] = dims[j - 1];
        dims[j - 1] = t;
      }
  }

  KVF_HD CellIndex locate(int64_t elem) const {
    CellIndex out;
    if (!invertible) return out;
    for (int t = 0; t < 2; ++t) {
      const int64_t base = t == 1 ? v_offset : k_offset;
      int64_t rest = elem - base;
      if (rest < 0) continue;
      int64_t index[4] = {0, 0, 0, 0};  // block, pos, head, dim
      bool fits = true;
      for (int i = 0; i < num_dims && fits; ++i) {
        const int64_t q = rest / dims[i].stride;
        if (q >= dims[i].extent) fits = false;
        index[dims[i].which] = q;
        rest -= q * dims[i].stride;
      }
      if (!fits || rest != 0) continue;
      if (base + cache_elem_offset(g, index[0], index[1], index[2], index[3]) != elem) continue;
      out.is_cell = true;
      out.is_value = t == 1;
      out.block = index[0];
      out.pos = index[1];
      out.head = index[2];
      out.dim = index[3];
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
