// profile.h — a campaign profile: the ranges and weights the generator draws from (configs/*.json).
//
// Every list is ordered simplest first: the generator picks by weight, the shrinker moves towards
// the front of each list. A profile file is strict JSON (schema "kvfuzz-config/1"); an unknown key,
// a wrong type or an empty list is refused with the file, the JSON path and the expected form.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../case/types.h"

namespace kvf {

// A choice among values with integer weights (weight 0 = never generated, still a shrink target).
template <typename T>
struct Weighted {
  std::vector<T> values;    // simplest first
  std::vector<int> weights;  // same length as values, each >= 0, at least one > 0
};

struct Profile {
  std::string name;                    // e.g. "default"
  Weighted<Layout> layouts;
  Weighted<int32_t> block_sizes;       // 1..256, powers of two and not
  Weighted<int32_t> num_heads;         // H_kv, 1..128+
  Weighted<int32_t> head_dims;         // D, 1..576
  Weighted<int32_t> gqa_ratios;        // 1..16 (fused QKV only)
  int fused_qkv_percent = 30;          // share of cases with fused QKV input views
  Weighted<DType> input_dtypes;
  Weighted<DType> cache_dtypes;
  Weighted<IndexType> slot_dtypes;
  Weighted<ValueDist> value_dists;
  int32_t max_requests = 6;            // requests per batch (>= 1)
  int32_t max_context_len = 64;        // tokens of earlier context per request
  int32_t max_new_len = 32;            // tokens appended per request (prefill chunk)
  int decode_percent = 30;             // share of requests with new_len = 1
  int32_t max_padding = 4;             // tail and interleaved padding rows, each
  int32_t max_invalid_slots = 2;       // rows with slot >= capacity
  int32_t max_extra_input_rows = 3;    // T_in - T
  int32_t max_spare_blocks = 4;        // free blocks
  int irregular_percent = 50;          // share of cases with misaligned offsets and gapped strides
  int64_t max_elements_per_case = 1 << 20;  // bound on T * H * D; larger shapes get fewer tokens
};

// Reads and validates a profile file. Throws InputError (case/errors.h) on any problem.
Profile load_profile(const std::filesystem::path& file);

// The built-in default profile (identical to configs/default.json; a test checks they agree).
Profile default_profile();

}  // namespace kvf
