// test_cases.h — small hand-built valid cases for the arena tests, one per layout family.
//
// All share one batch (the quantised ones at the end too) (H = 2, D = 8, 8 blocks of 4 slots):
//   request 0: context 3, new 2, blocks {5, 2}  -> new tokens 3, 4 at slots 23 (block 5 pos 3), 8 (block 2 pos 0)
//   request 1: context 5, new 1, blocks {0, 7}  -> new token 5 at slot 29 (block 7 pos 1)
//   request 2: context 0, new 3, blocks {4}     -> new tokens 0..2 at slots 16..18
//   free blocks: 1, 3, 6
//   slot_mapping [23, -1, 8, 29, 16, 17, 1000, 18]: row 1 padding, row 6 invalid (capacity 32),
//   T_in = 10 (rows 8, 9 are CUDA-graph padding). Key/value are views into a fused QKV buffer with
//   2 Q heads and 4 elements of row padding.
#pragma once

#include "case/case.h"

namespace kvf::test {

inline Case base_case() {
  Case c;
  c.num_heads = 2;
  c.head_dim = 8;
  c.num_q_heads = 2;
  c.input_dtype = DType::f16;
  c.cache_dtype = DType::f16;
  c.slot_dtype = IndexType::i64;
  c.requests = {Request{3, 2, {5, 2}, {}}, Request{5, 1, {0, 7}, {}}, Request{0, 3, {4}, {}}};
  c.slot_mapping = {23, -1, 8, 29, 16, 17, 1000, 18};
  c.num_input_rows = 10;
  const int64_t row = (c.num_q_heads + 2 * c.num_heads) * c.head_dim + 4;
  c.key = InputView{c.num_q_heads * c.head_dim, row, c.head_dim};
  c.value = InputView{(c.num_q_heads + c.num_heads) * c.head_dim, row, c.head_dim};
  c.input_buffer_elems = c.num_input_rows * row;
  c.payload_seed = 12345;
  return c;
}

// [nb, bs, H, D], K then V.
inline Case paged_nhd_case() {
  Case c = base_case();
  c.layout = Layout::paged_nhd;
  c.cache = CacheGeometry{8, 4, 4 * 2 * 8, 2 * 8, 8};
  c.cache_k_offset = 0;
  c.cache_v_offset = 8 * 4 * 2 * 8;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  return c;
}

// [nb, H, bs, D], K then V; f32 input into a bf16 cache, int32 slots.
inline Case paged_hnd_case() {
  Case c = base_case();
  c.layout = Layout::paged_hnd;
  c.input_dtype = DType::f32;
  c.cache_dtype = DType::bf16;
  c.slot_dtype = IndexType::i32;
  c.cache = CacheGeometry{8, 4, 2 * 4 * 8, 8, 4 * 8};
  c.cache_k_offset = 0;
  c.cache_v_offset = 8 * 2 * 4 * 8;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  return c;
}

// [nb, 2, bs, H, D] with gaps: 2 elements after every head, 1 after every slot, 1 between K and V,
// 3 after every block; K's base at the odd (misaligned) element 5; 7 spare elements at the end.
inline Case packed_gapped_case() {
  Case c = base_case();
  c.layout = Layout::packed_kv_nhd;
  c.input_dtype = DType::f32;
  c.cache_dtype = DType::f32;
  const int64_t stride_head = 8 + 2, stride_pos = 2 * stride_head + 1, kv = 4 * stride_pos + 1;
  c.cache = CacheGeometry{8, 4, 2 * 4 * stride_pos + 3, stride_pos, stride_head};
  c.cache_k_offset = 5;
  c.cache_v_offset = 5 + kv;
  c.cache_buffer_elems = 5 + 8 * c.cache.stride_block + 7;
  return c;
}

// Quantised: f16 rows into an fp8_e4m3 paged NHD cache with per-token-head dynamic scales. The
// scale cache is [nb, bs, H] with a 3-element gap between K and V and 2 spare elements at the end.
inline Case quant_per_token_case() {
  Case c = paged_nhd_case();
  c.cache_dtype = DType::fp8_e4m3;
  c.scale_kind = ScaleKind::per_token_head;
  c.scale_cache = CacheGeometry{8, 4, 4 * 2, 2, 1};
  c.scale_k_offset = 0;
  c.scale_v_offset = 8 * 4 * 2 + 3;
  c.scale_cache_elems = c.scale_v_offset + 8 * 4 * 2 + 2;
  return c;
}

// Quantised: f32 rows into an int8 paged HND cache with random per-block static scales.
inline Case quant_per_block_case() {
  Case c = paged_hnd_case();
  c.cache_dtype = DType::int8;
  c.scale_kind = ScaleKind::per_block;
  c.scale_dist = ScaleDist::random;
  return c;
}

}  // namespace kvf::test
