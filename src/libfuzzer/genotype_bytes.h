// genotype_bytes.h — libFuzzer's bytes as a case genotype (kvfuzz-libfuzzer, docs/scale.md).
//
// FuzzedDataProvider reads one choice after another: layout, block size, heads, head dim, GQA,
// fused QKV, dtypes and quantisation (a copy, a float conversion or a quantised cache, with its
// scale kind), slot type, requests (1..4, context 0..32, new 0..8), padding rows, invalid slots,
// CUDA-graph rows, spare blocks, the layout flags, value distribution and the layout seed. Every
// choice comes from a small fixed list, so each input is a valid genotype of a small case (bytes
// that run out read as zeros: the simplest choice). A genotype is a value kvfuzz materialises the
// same way everywhere, so the case a crash artifact decodes to is the case `kvfuzz replay` runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include <fuzzer/FuzzedDataProvider.h>

#include "case/genotype.h"

namespace kvf {

template <typename T>
T pick(FuzzedDataProvider& in, std::initializer_list<T> values) {
  const size_t i = in.ConsumeIntegralInRange<size_t>(0, values.size() - 1);
  return values.begin()[i];
}

inline Genotype genotype_from_bytes(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Genotype g;
  g.layout = pick(in, {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                       Layout::packed_kv_nhd});
  g.block_size = pick(in, {16, 1, 2, 3, 4, 5, 7, 8, 17, 32});
  g.num_heads = in.ConsumeIntegralInRange<int32_t>(1, 4);
  g.head_dim = pick(in, {8, 1, 2, 3, 4, 7, 16, 46, 64, 72, 80, 96, 128});
  g.gqa_ratio = in.ConsumeIntegralInRange<int32_t>(1, 4);
  g.fused_qkv = in.ConsumeBool();
  g.input_dtype = pick(in, {DType::f16, DType::bf16, DType::f32});
  switch (in.ConsumeIntegralInRange(0, 2)) {
    case 0: g.cache_dtype = g.input_dtype; break;                              // a bit copy
    case 1: g.cache_dtype = pick(in, {DType::f16, DType::bf16, DType::f32}); break;  // a float conversion
    default:                                                                   // a quantised cache
      g.cache_dtype = pick(in, {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8});
      g.scale_kind = pick(in, {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block, ScaleKind::per_token_head});
      if (g.scale_kind != ScaleKind::per_token_head)
        g.scale_dist = pick(in, {ScaleDist::unit, ScaleDist::pow2, ScaleDist::random, ScaleDist::extreme});
      break;
  }
  g.slot_dtype = pick(in, {IndexType::i64, IndexType::i32});
  const int requests = in.ConsumeIntegralInRange(1, 4);
  for (int r = 0; r < requests; ++r) {
    RequestGene q;
    q.new_len = in.ConsumeIntegralInRange<int64_t>(0, 8);
    q.context_len = in.ConsumeIntegralInRange<int64_t>(0, 32);
    g.requests.push_back(q);
  }
  g.tail_padding = in.ConsumeIntegralInRange<int32_t>(0, 3);
  g.interleaved_padding = in.ConsumeIntegralInRange<int32_t>(0, 3);
  g.invalid_slots = in.ConsumeIntegralInRange<int32_t>(0, 2);
  g.extra_input_rows = in.ConsumeIntegralInRange<int32_t>(0, 2);
  g.spare_blocks = in.ConsumeIntegralInRange<int32_t>(0, 3);
  g.irregular = in.ConsumeBool();
  g.gapped_strides = in.ConsumeBool();
  g.misaligned_bases = in.ConsumeBool();
  g.kv_views = pick(in, {KvViews::alike, KvViews::value_rows, KvViews::value_heads, KvViews::value_head_major});
  g.dist = pick(in, {ValueDist::finite, ValueDist::special, ValueDist::constant, ValueDist::ties,
                             ValueDist::edges});
  g.layout_seed = in.ConsumeIntegral<uint64_t>();
  // Last, so inputs from before these genes decode as they did (an exhausted input gives false, 0).
  g.scattered_positions = in.ConsumeBool();
  g.shared_prefix_blocks = in.ConsumeIntegralInRange<int32_t>(0, 2);
  return g;
}

}  // namespace kvf
