// kv_format.cuh — the format model: where each stored field of a KV cache keeps a logical coordinate.
//
// A cache stores one or more fields (K, V, the latent entry of an MLA cache, ...). Each field maps a
// logical coordinate (block, pos, head, dim) to an element offset in its buffer through a layout:
// one Mode per axis, and a Mode is a CuTe-style hierarchical shape:stride of up to kMaxSubModes
// sub-modes, the first fastest (colexicographic, as CUTLASS's cute::Layout). Coordinate c of a mode
// with sub-modes (e0:s0, e1:s1, e2:s2) splits into c0 = c % e0, c1 = (c / e0) % e1, c2 = c / (e0 e1),
// and contributes c0*s0 + c1*s1 + c2*s2. Examples (elements of the cache dtype, x = 16 bytes of them):
//
//   paged NHD [nb, bs, H, D]        block nb:bs*H*D  pos bs:H*D  head H:D      dim D:1
//   paged HND [nb, H, bs, D]        block nb:H*bs*D  pos bs:D    head H:bs*D   dim D:1
//   vLLM x-packed K [nb, H, D/x, bs, x]
//                                   block nb:H*D*bs  pos bs:x    head H:D*bs   dim (x, D/x):(1, bs*x)
//   vLLM legacy V [nb, H, D, bs]    block nb:H*D*bs  pos bs:1    head H:D*bs   dim D:bs
//   content-packed [nb, bs, H, 2D]  K at offset 0, V at offset D, both pos bs:H*2D head H:2D dim D:1
//
// A layout is valid when it is injective in the checkable form this file relies on (validate.h):
// its sub-modes of extent > 1, sorted by stride, each have a stride larger than the span of all
// smaller ones ("nested strides"). Then a buffer element has at most one coordinate, and
// FieldShape::locate() finds it by greedy division, checked against field_offset().
//
// Sub-byte dtypes (e2m1, int4) keep two elements per byte, element 2i in the low nibble; records
// that mix dtypes in one buffer give each field its own dtype with offsets in its own elements.
// Those encodings arrive with the quantisation formats; the model does not change for them.
//
// One definition serves the kernels, the golden model, the arena classifier and the report map.
#pragma once

#include <cstdint>

#include "kv_layout.cuh"  // KVF_HD, CacheGeometry

namespace kvf {

constexpr int kMaxSubModes = 3;

// One axis of a field's layout: rank sub-modes (extent, stride), the first fastest.
struct Mode {
  int32_t rank = 1;
  int64_t extent[kMaxSubModes] = {1, 1, 1};
  int64_t stride[kMaxSubModes] = {0, 0, 0};
};

// The logical axes of a cache coordinate.
enum class Axis : uint8_t { block = 0, pos = 1, head = 2, dim = 3 };
constexpr int kAxes = 4;

// A field's layout: element offset of (block, pos, head, dim) from its buffer's start.
struct FieldLayout {
  int64_t offset = 0;  // element offset of (0, 0, 0, 0)
  Mode mode[kAxes];    // indexed by Axis
};

inline namespace KVF_KERNEL_NS {  // (kv_layout.cuh)

// A rank-1 mode.
KVF_HD Mode flat_mode(int64_t extent, int64_t stride) {
  Mode m;
  m.extent[0] = extent;
  m.stride[0] = stride;
  return m;
}

// Number of coordinates of a mode: the product of its extents.
KVF_HD int64_t mode_size(const Mode& m) {
  int64_t n = 1;
  for (int i = 0; i < m.rank; ++i) n *= m.extent[i];
  return n;
}

// Offset contributed by coordinate c (0 <= c < mode_size(m)) of mode m.
KVF_HD int64_t mode_offset(const Mode& m, int64_t c) {
  int64_t off = 0;
  for (int i = 0; i < m.rank; ++i) {
    const bool last = i == m.rank - 1;
    const int64_t ci = last ? c : c % m.extent[i];
    off += ci * m.stride[i];
    c = last ? 0 : c / m.extent[i];
  }
  return off;
}

// Element offset of (block, pos, head, dim) in the field's buffer, in 64-bit arithmetic.
KVF_HD int64_t field_offset(const FieldLayout& f, int64_t block, int64_t pos, int64_t head, int64_t dim) {
  return f.offset + mode_offset(f.mode[0], block) + mode_offset(f.mode[1], pos) + mode_offset(f.mode[2], head) +
         mode_offset(f.mode[3], dim);
}

// The v1 geometry as a layout: every axis flat, dim stride 1. field_offset() of it equals
// `offset + cache_elem_offset(g, ...)` (a test checks it).
KVF_HD FieldLayout geometry_layout(const CacheGeometry& g, int64_t offset, int64_t num_heads, int64_t head_dim) {
  FieldLayout f;
  f.offset = offset;
  f.mode[0] = flat_mode(g.num_blocks, g.stride_block);
  f.mode[1] = flat_mode(g.block_size, g.stride_pos);
  f.mode[2] = flat_mode(num_heads, g.stride_head);
  f.mode[3] = flat_mode(head_dim, 1);
  return f;
}

// vLLM's legacy caches, x elements to 16 bytes: K [nb, H, D/x, bs, x] and V [nb, H, D, bs], each
// from its own base, with the geometry's stride_block and stride_head (stride_pos unused: K's pos
// stride is x, V's 1). head_dim must be a multiple of x.
KVF_HD FieldLayout xpacked_key_layout(const CacheGeometry& g, int64_t offset, int64_t num_heads, int64_t head_dim, int64_t x) {
  FieldLayout f;
  f.offset = offset;
  f.mode[0] = flat_mode(g.num_blocks, g.stride_block);
  f.mode[1] = flat_mode(g.block_size, x);
  f.mode[2] = flat_mode(num_heads, g.stride_head);
  f.mode[3].rank = 2;
  f.mode[3].extent[0] = x;
  f.mode[3].stride[0] = 1;
  f.mode[3].extent[1] = head_dim / x;
  f.mode[3].stride[1] = g.block_size * x;
  return f;
}
KVF_HD FieldLayout transposed_value_layout(const CacheGeometry& g, int64_t offset, int64_t num_heads, int64_t head_dim) {
  FieldLayout f;
  f.offset = offset;
  f.mode[0] = flat_mode(g.num_blocks, g.stride_block);
  f.mode[1] = flat_mode(g.block_size, 1);
  f.mode[2] = flat_mode(num_heads, g.stride_head);
  f.mode[3] = flat_mode(head_dim, g.block_size);
  return f;
}

// True when the layout is one of the v1 geometry: every axis flat and dim stride 1 (or extent 1).
KVF_HD bool is_geometry_layout(const FieldLayout& f) {
  for (int a = 0; a < kAxes; ++a)
    for (int i = 1; i < f.mode[a].rank; ++i)
      if (f.mode[a].extent[i] > 1) return false;
  return f.mode[3].extent[0] <= 1 || f.mode[3].stride[0] == 1;
}

// A field's coordinate, when an element holds one.
struct FieldCoord {
  bool found = false;
  int64_t block = -1, pos = -1, head = -1, dim = -1;
};

// One field's layout prepared for inversion: its sub-modes of extent > 1, by descending stride.
struct FieldShape {
  struct Sub {
    int64_t stride = 0, extent = 1;
    int64_t weight = 1;  // what one step of this sub-mode adds to its axis's coordinate
    int axis = 0;
  };
  static constexpr int kMaxSubs = kAxes * kMaxSubModes;
  FieldLayout layout;
  Sub subs[kMaxSubs];
  int num_subs = 0;
  bool invertible = true;  // false if an axis is empty or a sub-mode of extent > 1 has stride <= 0

  FieldShape() = default;
  explicit FieldShape(const FieldLayout& f) : layout(f) {
    for (int a = 0; a < kAxes; ++a) {
      int64_t weight = 1;
      const Mode& m = f.mode[a];
      for (int i = 0; i < m.rank; ++i) {
        if (m.extent[i] <= 0) invertible = false;  // no coordinate at all
        if (m.extent[i] > 1) {
          if (m.stride[i] <= 0) invertible = false;
          subs[num_subs++] = Sub{m.stride[i], m.extent[i], weight, a};
        }
        weight *= m.extent[i];
      }
    }
    for (int i = 1; i < num_subs; ++i)  // insertion sort by descending stride (at most 12)
      for (int j = i; j > 0 && subs[j - 1].stride < subs[j].stride; --j) {
        const Sub t = subs[j];
        subs[j] = subs[j - 1];
        subs[j - 1] = t;
      }
  }

  // The coordinate of buffer element `elem`, if the field addresses it.
  KVF_HD FieldCoord locate(int64_t elem) const {
    FieldCoord out;
    if (!invertible) return out;
    int64_t rest = elem - layout.offset;
    if (rest < 0) return out;
    int64_t coord[kAxes] = {0, 0, 0, 0};
    for (int i = 0; i < num_subs; ++i) {
      const int64_t q = rest / subs[i].stride;
      if (q >= subs[i].extent) return out;
      coord[subs[i].axis] += q * subs[i].weight;
      rest -= q * subs[i].stride;
    }
    if (rest != 0 || field_offset(layout, coord[0], coord[1], coord[2], coord[3]) != elem) return out;
    out.found = true;
    out.block = coord[0];
    out.pos = coord[1];
    out.head = coord[2];
    out.dim = coord[3];
    return out;
  }
};

}  // namespace KVF_KERNEL_NS
}  // namespace kvf
