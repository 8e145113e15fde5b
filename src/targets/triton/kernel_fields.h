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
