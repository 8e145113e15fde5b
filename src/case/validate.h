// validate.h — semantic checks of a Case beyond JSON types, and the size limits of the harness.
//
// A valid case: shapes positive and within limits; key/value views and the K/V tensors inside
// their buffers; K/V tensor cells distinct (strides do not make two cells overlap, and K and V do
// not overlap); every block owned by at most one request; each request's block table long enough
// for context_len + new_len and inside [0, num_blocks); slot_mapping holds each new-token slot of
// every request exactly once (in any order), plus negative padding and >= capacity invalid entries,
// and nothing else; slot values representable in slot_dtype; num_input_rows >= num_slots.
//
// Quantisation. input_dtype is f16, bf16 or f32 (quantised dtypes are cache-only). scale_kind is
// none exactly when cache_dtype is a float dtype: a quantised cache without scales and scales on a
// float cache are refused (the contract defines neither). scale_dist is unit unless the kind has
// static scales (per_tensor, per_head, per_block), whose 2 * static_scale_count() fp32 values must
// fit max_buffer_bytes. per_token_head: scale_cache has the cache's num_blocks and block_size,
// strides and scale_k_offset >= 0, scale_v_offset > scale_k_offset, cells nested (below) and inside
// scale_cache_elems. Every other kind: scale_cache, scale_k_offset, scale_v_offset and
// scale_cache_elems all 0.
//
// Nested strides (what "cells distinct" means, and what code inverting addresses may rely on).
// A strided tensor is a list of dimensions (stride, extent). Ignore dimensions of extent 1, sort
// the rest by stride ascending; the tensor is valid only if every stride is >= 1 + the sum over the
// smaller-stride dimensions of (extent - 1) * stride. Then every address decomposes uniquely, by
// repeated division from the largest stride down. The dimensions checked are:
//   cache:  dim (1, D), head (stride_head, H), pos (stride_pos, block_size),
//           block (stride_block, num_blocks), and K/V (v_offset - k_offset > 0, 2);
//           K and V lie in [k_offset, v_offset + span] within cache_buffer_elems, k_offset >= 0.
//   scale cache (per_token_head): head (stride_head, H), pos (stride_pos, block_size),
//           block (stride_block, num_blocks), and K/V (scale_v_offset - scale_k_offset, 2);
//           inside [scale_k_offset, scale_v_offset + span] within scale_cache_elems.
//   key and value views, each: dim (1, D), head (stride_head, H), token (stride_token, T_in);
//           inside [0, input_buffer_elems) for all T_in rows.
// Key and value cells are disjoint when their element ranges [offset, offset + span] do not
// intersect, or when both views have equal strides and |value.offset - key.offset| as a further
// dimension of extent 2 nests with them (fused QKV rows). Intersecting ranges with different
// strides are refused even if a finer argument could prove them disjoint.
//
// Cost: O(T + block-table entries + requests); nothing is allocated in proportion to a declared
// size (num_blocks, buffer_elems, context_len), only to arrays the case already holds, and every
// size product is computed without overflow. A genotype, when present, gets necessary checks only
// (positive sizes, limits on lower bounds of its buffers, the dtype and scale rules above):
// materialize() must still be validated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "case.h"

namespace kvf {

// Hard limits that keep a hostile or mistaken case from exhausting memory. Checked before any
// buffer is allocated; configurable from the CLI (--max-case-mib).
struct Limits {
  int64_t max_buffer_bytes = int64_t{1} << 30;  // per buffer (input, cache, scales, scale cache): 1 GiB
  int64_t max_slots = int64_t{1} << 22;         // slot_mapping entries
  int64_t max_requests = int64_t{1} << 16;
  int32_t max_heads = 1024;
  int32_t max_head_dim = 4096;
};

struct ValidationProblem {
  std::string json_path;  // where, as an RFC 6901 pointer into the case JSON
  std::string message;    // what is wrong and what was expected
};

// All problems found (empty = valid).
std::vector<ValidationProblem> validate(const Case& c, const Limits& limits = {});

}  // namespace kvf
