// kernel_fields.h — the cache addressing kvfuzz_triton's kernel takes, from the format model.
//
// kv_append_kernel (kernels/triton/kvfuzz_triton/kv_append.py) addresses K and V as separate
// fields, element (block, pos, head, d) of a field at
//   block*stride_block + pos*stride_pos + head*stride_head + (d % x)*stride_dim0 + (d / x)*stride_dim1
// from its base: the FieldLayout of kernels/cuda/kv_format.cuh with flat block, pos and head axes and
// a dim axis of at most two sub-modes, (x, D/x):(stride_dim0, stride_dim1). The triton target packs
// these as launch arguments (aot_manifest.cpp); the Python worker sends them to kvfuzz_triton.launch
// (triton-interp) and builds the Python targets' vllm_legacy tensor views from them.
#pragma once

#include <cstdint>
#include <string>

#include "case/types.h"
#include "kv_append.cuh"  // KvAppendParams; kv_format.cuh

namespace kvf {

// One field as the kernel takes it (kvfuzz_triton.FieldStrides).
struct KernelField {
  int64_t stride_block = 0;
  int64_t stride_pos = 0;
  int64_t stride_head = 0;
  int64_t x = 1;            // >= 1; 1: the dim axis is flat, its stride is stride_dim1
  int64_t stride_dim0 = 1;  // stride of d % x (inside an x-chunk)
  int64_t stride_dim1 = 1;  // stride of d / x (between x-chunks)
};

// The layout of p's K (is_value false) or V field from its own base: the v1 geometry (V's own
// geometry and head dim for kv_split), or for vllm_legacy the x-packed K and transposed V (x =
// xpack_elems of the cache dtype), exactly as the CUDA kernel and Case::cache_field build them.
inline FieldLayout append_field_layout(const KvAppendParams& p, bool is_value) {
  if (!p.vllm_legacy)
    return is_value ? geometry_layout(value_geometry(p), 0, p.num_heads, value_dim(p))
                    : geometry_layout(p.cache, 0, p.num_heads, p.head_dim);
  return is_value ? transposed_value_layout(p.cache, 0, p.num_heads, p.head_dim)
                  : xpacked_key_layout(p.cache, 0, p.num_heads, p.head_dim, xpack_elems(p.cache_dtype));
}

// Returns "" and fills `out` with the kernel's form of `f`, or why the kernel cannot address it (an
// offset from the base, a block, pos or head axis with more than one sub-mode, a dim axis with more
// than two).
inline std::string kernel_field(const FieldLayout& f, KernelField& out) {
  const auto flat = [](const Mode& m) {
    for (int i = 1; i < m.rank; ++i)
      if (m.extent[i] > 1) return false;
    return true;
  };
  if (f.offset != 0) return "the field starts " + std::to_string(f.offset) + " elements past its base";
  if (!flat(f.mode[0]) || !flat(f.mode[1]) || !flat(f.mode[2]))
    return "the block, pos and head axes must each be one (extent, stride) mode";
  const Mode& d = f.mode[3];
  if (d.rank > 2 && d.extent[2] > 1) return "the dim axis has more than two sub-modes";
  out.stride_block = f.mode[0].stride[0];
  out.stride_pos = f.mode[1].stride[0];
  out.stride_head = f.mode[2].stride[0];
  if (d.rank == 1 || d.extent[1] <= 1) {  // D:s (or (D, 1):(s, _)): flat
    out.x = 1;
    out.stride_dim0 = 1;
    out.stride_dim1 = d.stride[0];
  } else {
    if (d.extent[0] < 1 || d.extent[0] > INT32_MAX)
      return "the dim axis's x = " + std::to_string(d.extent[0]) + " is not in [1, 2^31)";
    out.x = d.extent[0];
    out.stride_dim0 = d.stride[0];
    out.stride_dim1 = d.stride[1];
  }
  return "";
}

}  // namespace kvf

namespace kvf {

// One field of a quantised format as kv_append_format_kernel takes it
// (kernels/triton/kvfuzz_triton/kv_append_format.py; kvfuzz_triton.format_api.FormatField): element
//   offset + block*block + mode(pos) + head*head + mode(dim),  mode(c) = (c % x)*s0 + (c / x)*s1
// in elements of the field's dtype from byte 0 of its buffer: the FieldLayout of kv_format.cuh with
// flat block and head axes and pos and dim axes of at most two sub-modes (a flat one is x = 1).
struct FormatKernelField {
  int64_t offset = 0;
  int64_t block = 0;
  int64_t pos_x = 1, pos0 = 0, pos1 = 0;
  int64_t head = 0;
  int64_t dim_x = 1, dim0 = 0, dim1 = 1;
};

// Returns "" and fills `out` with the format kernel's form of `f`, or why it cannot address it (a
// block or head axis of more than one sub-mode, a pos or dim axis of more than two).
inline std::string format_kernel_field(const FieldLayout& f, FormatKernelField& out) {
  // (x, s0, s1) of mode m, or false: sub-modes of extent 1 at its end do not count.
  const auto two = [](const Mode& m, int64_t& x, int64_t& s0, int64_t& s1) {
    int used = m.rank;
    while (used > 1 && m.extent[used - 1] <= 1) --used;
    if (used > 2) return false;
    if (used == 1) {
      x = 1, s0 = 0, s1 = m.stride[0];
    } else {
      x = m.extent[0], s0 = m.stride[0], s1 = m.stride[1];
    }
    return x >= 1 && x <= INT32_MAX;
  };
  int64_t x = 1, s0 = 0;
  out.offset = f.offset;
  if (!two(f.mode[0], x, s0, out.block) || x != 1) return "the block axis must be one (extent, stride) mode";
  if (!two(f.mode[2], x, s0, out.head) || x != 1) return "the head axis must be one (extent, stride) mode";
  if (!two(f.mode[1], out.pos_x, out.pos0, out.pos1)) return "the pos axis has more than two sub-modes (or a first extent past 2^31)";
  if (!two(f.mode[3], out.dim_x, out.dim0, out.dim1)) return "the dim axis has more than two sub-modes (or a first extent past 2^31)";
  return "";
}

}  // namespace kvf
