// kv_layout.cuh — the one cache addressing formula of kvfuzz (docs/contract.md).
//
// Element (block b, offset o, head h, dim d) of a KV cache lives at
//     base + b*stride_block + o*stride_pos + h*stride_head + d
// in 64-bit element arithmetic. Paged NHD [nb,bs,H,D], paged HND [nb,H,bs,D], contiguous
// per-sequence caches ([B,S,H,D] / [B,H,S,D], block = sequence), K and V packed in one tensor
// ([nb,2,bs,H,D]) and padded strides are all instances of it. The kernel, the golden model and the
// arena classifier all call cache_elem_offset(); there is no second copy of this arithmetic.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KVF_HD __host__ __device__ __forceinline__
#else
#define KVF_HD inline
#endif

// The functions of the kernel headers live in the inline namespace kvf::KVF_KERNEL_NS ("shared"
// for the harness). A kernel library is compiled with KVF_KERNEL_NS=kernel, so its copies have
// names of their own and the linker never merges them with the harness's: a mutant's rewritten
// body cannot serve the golden model or the arena (at -O0 it did, and a mutant checked itself
// with itself). The types stay in kvf, shared by both.
#if !defined(KVF_KERNEL_NS)
#define KVF_KERNEL_NS shared
#endif

namespace kvf {

// Strides and extent of one cache tensor, in elements of the cache dtype.
struct CacheGeometry {
  int64_t num_blocks = 0;    // physical blocks (sequences, for contiguous caches)
  int64_t block_size = 0;    // slots per block (max_seq_len, for contiguous caches)
  int64_t stride_block = 0;  // elements between consecutive blocks
  int64_t stride_pos = 0;    // elements between consecutive slots of one block
  int64_t stride_head = 0;   // elements between consecutive heads
};

inline namespace KVF_KERNEL_NS {

// Number of addressable slots; slot_mapping values in [0, capacity) are written.
KVF_HD int64_t cache_capacity(const CacheGeometry& g) { return g.num_blocks * g.block_size; }

// Element offset of (block, pos, head, dim) from the cache tensor's base pointer.
KVF_HD int64_t cache_elem_offset(const CacheGeometry& g, int64_t block, int64_t pos, int64_t head,
                                 int64_t dim) {
  return block * g.stride_block + pos * g.stride_pos + head * g.stride_head + dim;
}

// Element offset of (token row, head, dim) inside a key/value input view [T_in, H, D] whose last
// dimension is contiguous.
KVF_HD int64_t input_elem_offset(int64_t stride_token, int64_t stride_head, int64_t token,
                                 int64_t head, int64_t dim) {
  return token * stride_token + head * stride_head + dim;
}

}  // namespace KVF_KERNEL_NS
}  // namespace kvf
