// genotype.h — the small, shrinkable description RapidCheck generates and the shrinker reduces.
//
// Everything concrete (block tables, strides, slot_mapping, buffer sizes) is derived from a
// Genotype by materialize() (materialize.h), deterministically and portably: the only randomness
// is layout_seed, expanded with kvfuzz's own SplitMix64 (rng.h), never <random> distributions.
// Shrinking a genotype therefore always yields a valid batch.
#pragma once

#include <cstdint>
#include <vector>

#include "quant_format.h"
#include "types.h"

namespace kvf {

struct RequestGene {
  int64_t context_len = 0;  // tokens already cached before the call (0 = fresh prefill)
  int64_t new_len = 1;      // tokens appended by the call (1 = decode); 0 allowed (request idle)
};

struct Genotype {
  Layout layout = Layout::paged_nhd;
  int32_t block_size = 16;  // slots per block (ignored by contiguous layouts: block = sequence)
  int32_t num_heads = 1;    // H_kv
  int32_t head_dim = 8;     // D
  int32_t gqa_ratio = 1;    // H_q / H_kv of a fused QKV input
  bool fused_qkv = false;   // key/value are views into one [T_in, (H_q + 2 H_kv) D] buffer
  DType input_dtype = DType::f16;
  DType cache_dtype = DType::f16;
  IndexType slot_dtype = IndexType::i64;
  std::vector<RequestGene> requests;
  int32_t tail_padding = 0;         // rows with a negative slot after the real tokens
  int32_t interleaved_padding = 0;  // rows with a negative slot among the real tokens
  int32_t invalid_slots = 0;        // rows with slot >= capacity (never written, counted)
  int32_t extra_input_rows = 0;     // T_in - T: CUDA-graph padding rows, never read
  int32_t spare_blocks = 0;         // free blocks beyond those the requests need
  bool irregular = false;           // odd padding and invalid slot values; the cache's last block in use
  bool gapped_strides = false;      // gaps between dims of every strided tensor, slack between and after tensors
  bool misaligned_bases = false;    // odd element offsets of every tensor's base (not 16-byte aligned)
  int32_t stride_gap_bytes = 0;     // the gaps' unit in input views and caches: 0 one element, else
                                    // the smallest multiple of this many bytes (Profile::stride_gap_bytes)
  KvViews kv_views = KvViews::alike;  // how the value input view differs from the key view
  Family family = Family::kv;       // which fields the cache stores (types.h)
  int32_t value_head_dim = 0;       // kv_split: V's head dim; 0 otherwise
  int32_t rope_dim = 0;             // mla: dims of the entry from k_pe (head_dim is the whole entry); 0 otherwise
  ValueDist dist = ValueDist::finite;
  ScaleKind scale_kind = ScaleKind::none;  // none exactly when cache_dtype is a float dtype
  ScaleDist scale_dist = ScaleDist::unit;  // static scales' values (ignored for none / per_token_head)
  bool scattered_positions = false;  // new tokens at random unwritten positions of their blocks, in random
                                     // row order, leaving holes (else consecutive from context_len)
  int32_t shared_prefix_blocks = 0;  // most leading full-context blocks a request shares with an earlier
                                     // one (prefix caching; paged layouts only)
  PaddingMode padding = PaddingMode::negative;  // what padding rows carry: a negative slot, or the sink slot 0
  Addressing addressing = Addressing::slot_mapping;  // csr: FlashInfer's CSR arrays (no padding, no invalid rows, i32)
  WindowInput window_input = WindowInput::none;  // a ring cache (case.h), and who applies the window
  int32_t window_size = 0;   // W (ring cases)
  int32_t window_sinks = 0;  // S < W (ring cases)
  CpInput cp_input = CpInput::none;  // context-parallel shards (case/context_parallel.h), and who localises
  int32_t cp_world_size = 0;  // N (sharded cases)
  int32_t cp_interleave = 0;  // I (sharded cases)
  QuantFormat quant_format = QuantFormat::none;  // a quantised format (case/quant_format.h): cache_dtype is its code
                                                 // dtype, scale_kind per_tensor (nvfp4's global scales) or none
  QuantRules quant_rules;     // its conventions (only those of quant_format matter)
  uint64_t layout_seed = 0;         // not shrunk: block permutation, gaps, offsets, positions, payload salt

  bool operator==(const Genotype&) const = default;
};

inline bool operator==(const RequestGene& a, const RequestGene& b) {
  return a.context_len == b.context_len && a.new_len == b.new_len;
}

}  // namespace kvf
