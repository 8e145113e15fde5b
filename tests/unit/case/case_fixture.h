// case_fixture.h — hand-built valid cases and a field-by-field comparison for the case tests.
//
// make_case() builds a small valid batch for any layout: three requests (chunked prefill on top of
// context, a fresh prefill, a decode) with shuffled block tables, interleaved and tail padding, one
// invalid slot, CUDA-graph padding rows, and K/V as separate input tensors or a fused QKV row.
// With a quantised cache dtype and a scale kind it is a quantised case; per_token_head gets a scale
// cache laid out like the KV cache without D, at an odd offset, with a gap between K and V.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "case/case.h"
#include "case/case_json.h"

namespace kvf::test {

struct CaseOptions {
  Layout layout = Layout::paged_nhd;
  int32_t num_heads = 2;
  int32_t head_dim = 8;
  int64_t num_blocks = 6;
  int64_t block_size = 4;
  bool fused_qkv = false;  // key/value views into one [T_in, (H_q + 2H) D] row, H_q = 2H
  IndexType slot_dtype = IndexType::i64;
  DType cache_dtype = DType::f16;
  ScaleKind scale_kind = ScaleKind::none;  // none exactly for a float cache_dtype
  ScaleDist scale_dist = ScaleDist::unit;  // unit unless the kind has static scales
};

inline Case make_case(const CaseOptions& o = {}) {
  Case c;
  c.num_heads = o.num_heads;
  c.head_dim = o.head_dim;
  c.input_dtype = DType::bf16;
  c.cache_dtype = o.cache_dtype;
  c.slot_dtype = o.slot_dtype;
  c.layout = o.layout;

  const int64_t H = o.num_heads, D = o.head_dim, bs = o.block_size, nb = o.num_blocks;
  const int64_t tensor = nb * bs * H * D;  // elements of one of K, V
  c.cache.num_blocks = nb;
  c.cache.block_size = bs;
  c.cache_k_offset = 0;
  c.cache_v_offset = tensor;
  c.cache_buffer_elems = 2 * tensor;
  switch (o.layout) {
    case Layout::paged_nhd:
    case Layout::contiguous_bshd:  // [nb, bs, H, D]
      c.cache.stride_block = bs * H * D;
      c.cache.stride_pos = H * D;
      c.cache.stride_head = D;
      break;
    case Layout::paged_hnd:
    case Layout::contiguous_bhsd:  // [nb, H, bs, D]
      c.cache.stride_block = H * bs * D;
      c.cache.stride_pos = D;
      c.cache.stride_head = bs * D;
      break;
    case Layout::packed_kv_nhd:  // [nb, 2, bs, H, D]
      c.cache.stride_block = 2 * bs * H * D;
      c.cache.stride_pos = H * D;
      c.cache.stride_head = D;
      c.cache_v_offset = bs * H * D;
      break;
  }

  c.scale_kind = o.scale_kind;
  c.scale_dist = o.scale_dist;
  if (o.scale_kind == ScaleKind::per_token_head) {
    CacheGeometry& s = c.scale_cache;
    s.num_blocks = nb;
    s.block_size = bs;
    if (o.layout == Layout::paged_hnd || o.layout == Layout::contiguous_bhsd) {  // [nb, H, bs]
      s.stride_pos = 1;
      s.stride_head = bs;
      s.stride_block = H * bs;
    } else {  // [nb, bs, H]
      s.stride_head = 1;
      s.stride_pos = H;
      s.stride_block = bs * H;
    }
    c.scale_k_offset = 3;
    c.scale_v_offset = c.scale_k_offset + nb * s.stride_block + 2;
    c.scale_cache_elems = c.scale_v_offset + nb * s.stride_block + 1;
  }

  // Requests own shuffled blocks; block 4 (when it exists) stays free.
  std::vector<int64_t> order;
  for (int64_t b = nb - 1; b >= 0; --b) {
    if (b != 4) order.push_back(b);
  }
  size_t next = 0;
  auto add_request = [&](int64_t context_len, int64_t new_len) {
    Request r;
    r.context_len = context_len;
    r.new_len = new_len;
    const int64_t blocks = (context_len + new_len + bs - 1) / bs;
    for (int64_t i = 0; i < blocks; ++i) r.blocks.push_back(order.at(next++));
    c.requests.push_back(r);
  };
  add_request(bs - 1, 2);  // chunked prefill crossing a block boundary
  add_request(0, 3);       // fresh prefill
  add_request(bs, 1);      // decode at the start of a new block

  for (size_t r = 0; r < c.requests.size(); ++r) {
    const Request& q = c.requests[r];
    for (int64_t p = q.context_len; p < q.context_len + q.new_len; ++p) {
      c.slot_mapping.push_back(q.blocks[static_cast<size_t>(p / bs)] * bs + p % bs);
    }
    if (r == 0) c.slot_mapping.push_back(-1);  // interleaved padding
  }
  c.slot_mapping.push_back(nb * bs + 5);  // invalid: never written, counted
  c.slot_mapping.push_back(-7);           // tail padding

  c.num_input_rows = c.num_slots() + 2;  // CUDA-graph padding rows
  if (o.fused_qkv) {
    c.num_q_heads = 2 * o.num_heads;
    const int64_t row = (c.num_q_heads + 2 * H) * D;
    c.key = {c.num_q_heads * D, row, D};
    c.value = {(c.num_q_heads + H) * D, row, D};
    c.input_buffer_elems = c.num_input_rows * row;
  } else {
    c.key = {0, H * D, D};
    c.value = {c.num_input_rows * H * D + 3, H * D, D};  // a gap of 3 elements between the tensors
    c.input_buffer_elems = 2 * c.num_input_rows * H * D + 3;
  }

  c.dist = ValueDist::special;
  c.payload_seed = 0xfedcba9876543210ull;
  c.provenance = {"12345", 7, "0.1.0", "kvfuzz run --seed 12345", "cuda-emu"};
  return c;
}

inline Genotype make_genotype() {
  Genotype g;
  g.layout = Layout::paged_hnd;
  g.block_size = 5;
  g.num_heads = 3;
  g.head_dim = 72;
  g.gqa_ratio = 4;
  g.fused_qkv = true;
  g.input_dtype = DType::f32;
  g.cache_dtype = DType::bf16;
  g.slot_dtype = IndexType::i32;
  g.requests = {{0, 7}, {16, 1}, {3, 0}};
  g.tail_padding = 2;
  g.interleaved_padding = 1;
  g.invalid_slots = 1;
  g.extra_input_rows = 3;
  g.spare_blocks = 2;
  g.irregular = true;
  g.gapped_strides = true;
  g.misaligned_bases = true;
  g.dist = ValueDist::constant;
  g.layout_seed = 18446744073709551615ull;
  return g;
}

// make_genotype() with an int8 cache and per-block static scales of random values.
inline Genotype make_quant_genotype() {
  Genotype g = make_genotype();
  g.cache_dtype = DType::int8;
  g.scale_kind = ScaleKind::per_block;
  g.scale_dist = ScaleDist::random;
  g.dist = ValueDist::ties;
  return g;
}

// Field by field, so a failure names the field.
inline void expect_same_case(const Case& a, const Case& b) {
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.num_q_heads, b.num_q_heads);
  EXPECT_EQ(a.input_dtype, b.input_dtype);
  EXPECT_EQ(a.cache_dtype, b.cache_dtype);
  EXPECT_EQ(a.slot_dtype, b.slot_dtype);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.cache.num_blocks, b.cache.num_blocks);
  EXPECT_EQ(a.cache.block_size, b.cache.block_size);
  EXPECT_EQ(a.cache.stride_block, b.cache.stride_block);
  EXPECT_EQ(a.cache.stride_pos, b.cache.stride_pos);
  EXPECT_EQ(a.cache.stride_head, b.cache.stride_head);
  EXPECT_EQ(a.cache_k_offset, b.cache_k_offset);
  EXPECT_EQ(a.cache_v_offset, b.cache_v_offset);
  EXPECT_EQ(a.cache_buffer_elems, b.cache_buffer_elems);
  EXPECT_EQ(a.scale_kind, b.scale_kind);
  EXPECT_EQ(a.scale_dist, b.scale_dist);
  EXPECT_EQ(a.scale_cache.num_blocks, b.scale_cache.num_blocks);
  EXPECT_EQ(a.scale_cache.block_size, b.scale_cache.block_size);
  EXPECT_EQ(a.scale_cache.stride_block, b.scale_cache.stride_block);
  EXPECT_EQ(a.scale_cache.stride_pos, b.scale_cache.stride_pos);
  EXPECT_EQ(a.scale_cache.stride_head, b.scale_cache.stride_head);
  EXPECT_EQ(a.scale_k_offset, b.scale_k_offset);
  EXPECT_EQ(a.scale_v_offset, b.scale_v_offset);
  EXPECT_EQ(a.scale_cache_elems, b.scale_cache_elems);
  EXPECT_EQ(a.num_input_rows, b.num_input_rows);
  EXPECT_EQ(a.input_buffer_elems, b.input_buffer_elems);
  for (const auto& [x, y] : {std::pair{&a.key, &b.key}, std::pair{&a.value, &b.value}}) {
    EXPECT_EQ(x->offset, y->offset);
    EXPECT_EQ(x->stride_token, y->stride_token);
    EXPECT_EQ(x->stride_head, y->stride_head);
  }
  EXPECT_EQ(a.slot_mapping, b.slot_mapping);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].context_len, b.requests[i].context_len) << "request " << i;
    EXPECT_EQ(a.requests[i].new_len, b.requests[i].new_len) << "request " << i;
    EXPECT_EQ(a.requests[i].blocks, b.requests[i].blocks) << "request " << i;
    EXPECT_EQ(a.requests[i].positions, b.requests[i].positions) << "request " << i;
  }
  EXPECT_EQ(a.dist, b.dist);
  EXPECT_EQ(a.payload_seed, b.payload_seed);
  EXPECT_EQ(a.expect.outcome, b.expect.outcome);
  EXPECT_EQ(a.expect.finding_kind, b.expect.finding_kind);
  EXPECT_EQ(a.provenance.seed, b.provenance.seed);
  EXPECT_EQ(a.provenance.case_index, b.provenance.case_index);
  EXPECT_EQ(a.provenance.tool_version, b.provenance.tool_version);
  EXPECT_EQ(a.provenance.command_line, b.provenance.command_line);
  EXPECT_EQ(a.provenance.target, b.provenance.target);
  ASSERT_EQ(a.genotype.has_value(), b.genotype.has_value());
  if (a.genotype) {
    EXPECT_TRUE(*a.genotype == *b.genotype);
  }
}

// Runs the reader on `text` and returns the InputError it must throw (fails the test otherwise).
inline InputError read_error(const std::string& text, const Limits& limits = {}) {
  try {
    case_from_text(text, "bad.json", limits);
  } catch (const InputError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return InputError("", "", "");
  }
  ADD_FAILURE() << "expected InputError, the case was accepted";
  return InputError("", "", "");
}

// The valid case's JSON, edited by `edit`, as text.
template <typename Edit>
std::string edited(Edit edit, const Case& c = make_case()) {
  nlohmann::json j = case_to_json(c);
  edit(j);
  return j.dump();
}

}  // namespace kvf::test
