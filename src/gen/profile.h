// profile.h — a campaign profile: the ranges and weights the generator draws from (configs/*.json).
//
// Every list is ordered simplest first: the generator picks by weight, the shrinker moves towards
// the front of each list. A profile file is strict JSON (schema "kvfuzz-config", version 1)
// holding every field below and nothing else, weighted lists as {"values": [...], "weights":
// [...]} (see configs/default.json); an unknown or missing key, a wrong type, an empty or
// duplicate list, an out-of-range value or all-zero weights is refused with the file, the JSON
// path and the expected form. Optional keys: min_tensor_elements (absent = 0), gapped_strides_percent
// and misaligned_bases_percent (absent = irregular_percent, the share both had when one flag drove
// them), kv_views, families, value_head_dims, rope_dims, padding_modes, addressings, window_inputs,
// cp_inputs, cp_world_sizes, cp_interleaves (absent = the built-in default's list), ring_percent,
// cp_percent (absent = 0).
// them), kv_views, scattered_positions_percent, shared_prefix_percent and max_shared_prefix_blocks
// (absent = the built-in default's values).
//
// Partial profiles: a profile with "extends": "default" (the built-in profile) or "extends":
// "PATH" (another profile file, relative to this one) gives only the keys it changes; each key it
// gives replaces the base's whole value, the others come from the base, followed down the chain
// (at most 16 files; a cycle is refused). Its "name" is optional (absent: the file's stem). An
// error in a key taken from a base names the base's file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "case/quant_format.h"
#include "case/types.h"

namespace kvf {

// A choice among values with integer weights (weight 0 = never generated, still a shrink target).
template <typename T>
struct Weighted {
  std::vector<T> values;    // simplest first
  std::vector<int> weights;  // same length as values, each >= 0, at least one > 0

  bool operator==(const Weighted&) const = default;
};

// The entries of w whose value satisfies keep(value), with their weights (possibly none).
template <typename T, typename Keep>
Weighted<T> only(const Weighted<T>& w, Keep keep) {
  Weighted<T> out;
  for (size_t i = 0; i < w.values.size(); ++i) {
    if (!keep(w.values[i])) continue;
    out.values.push_back(w.values[i]);
    out.weights.push_back(w.weights[i]);
  }
  return out;
}

struct Profile {
  std::string name;                    // e.g. "default"
  Weighted<Layout> layouts;            // cache layouts (shrink target: paged_nhd)
  Weighted<int32_t> block_sizes;       // 1..256, powers of two and not
  Weighted<int32_t> num_heads;         // H_kv, 1..128+
  Weighted<int32_t> head_dims;         // D, 1..576
  Weighted<int32_t> gqa_ratios;        // 1..16 (fused QKV only)
  int fused_qkv_percent = 30;          // share of cases with fused QKV input views
  Weighted<DType> input_dtypes;        // key/value dtypes, f16/bf16/f32 only (shrink target: the first)
  // The cache dtype. Each case is one of three kinds, by these shares (their sum <= 100):
  //   quant_percent        quantised: cache dtype drawn from the quantised entries of cache_dtypes
  //                        (fp8_e4m3, fp8_e5m2, int8), scale kind from scale_kinds, static scales'
  //                        values from scale_dists (per_token_head scales are computed: dist unit);
  //   cross_dtype_percent  float conversion: cache dtype drawn from the float entries of cache_dtypes
  //                        (it may happen to equal the input dtype);
  //   the rest             cache dtype = input dtype: a bit-exact copy.
  // A quantised cache is always cross-dtype. load_profile() requires an entry with weight > 0 among
  // the quantised (float) entries when quant_percent (cross_dtype_percent) is > 0. The shrinker never
  // turns a quantised case into a float one or changes its cache dtype (the failure may live in that
  // dtype's conversion); it simplifies scale_kind and scale_dist instead.
  int cross_dtype_percent = 15;
  int quant_percent = 0;
  Weighted<DType> cache_dtypes;        // cache dtypes of cross-dtype and quantised cases
  Weighted<ScaleKind> scale_kinds;     // per_tensor, per_head, per_block, per_token_head (never none;
                                       // shrink target: per_tensor, whatever the list's order)
  Weighted<ScaleDist> scale_dists;     // static scales' values (shrink target: unit)
  Weighted<IndexType> slot_dtypes;     // slot_mapping dtypes (shrink target: i64)
  Weighted<ValueDist> value_dists;     // payload distributions, ties included (shrink target: finite)
  int32_t max_requests = 6;            // requests per batch (>= 1)
  int32_t max_context_len = 64;        // tokens of earlier context per request
  int32_t max_new_len = 32;            // tokens appended per request (prefill chunk)
  int decode_percent = 30;             // share of requests with new_len = 1
  int idle_percent = 3;                // share of requests with new_len = 0 (decode + idle <= 100)
  int32_t max_padding = 4;             // tail and interleaved padding rows, each
  int32_t max_invalid_slots = 2;       // rows with slot >= capacity
  int32_t max_extra_input_rows = 3;    // T_in - T
  int32_t max_spare_blocks = 4;        // free blocks
  // Three independent features of a case's memory layout, each drawn with its own share:
  int irregular_percent = 50;          // odd padding values (-2, -capacity, INT_MIN, -2^32 + s) instead
                                       // of -1; an i64 case's first invalid slot is 2^32 + s (invalid
                                       // values such as 2^31 + s or INT_MAX are drawn in every case);
                                       // the cache's last block in a request's table
  int gapped_strides_percent = 50;     // gaps of 0..3 elements between the dims of cache, scale cache
                                       // and input tensors, between K and V and after the buffers
  int misaligned_bases_percent = 50;   // odd element offsets of the K cache, scale cache and input
                                       // bases (not 16-byte aligned)
  int32_t stride_gap_bytes = 0;        // the unit of those gaps in input views and caches (not scale
                                       // caches), in bytes: 0 one element; N (a power of two) the
                                       // smallest multiple of N bytes (a kernel's stride granularity)
  Weighted<KvViews> kv_views;          // how the value input view differs from the key view: alike,
                                       // value_rows (V's rows padded), value_heads (V's heads padded
                                       // too), value_head_major (V head-major); shrink target: alike,
                                       // whatever the list's order
  Weighted<Family> families;           // which fields the cache stores: kv, kv_split, k_only, mla (absent
                                       // = kv alone); shrink target: kv. A family other than kv takes the
                                       // plain layouts (a paired layout becomes paged_nhd, vllm_legacy
                                       // paged_hnd) and V alike K; mla takes 1 head and scale kinds none
                                       // and per_tensor (others become per_tensor)
  Weighted<int32_t> value_head_dims;   // kv_split: V's head dim (absent = the default's)
  Weighted<int32_t> rope_dims;         // mla: k_pe's dims; the entry is head_dim (kv_c) + rope_dim (absent
                                       // = the default's)
  Weighted<PaddingMode> padding_modes; // what padding rows carry: negative (a negative slot) or sink (slot
                                       // 0, which no request owns; docs/contract.md) (absent = negative
                                       // alone); shrink target: negative
  Weighted<Addressing> addressings;    // how the call addresses the cache: slot_mapping or csr (FlashInfer's
                                       // arrays; a csr case has no padding or invalid rows and i32 indices)
                                       // (absent = slot_mapping alone); shrink target: slot_mapping
  int ring_percent = 0;                // cases whose cache is a sliding-window ring (case/window.h): a window of
                                       // 1 .. the longest sequence, 0..3 sinks (absent = 0); shrink target: none
  int cp_percent = 0;                  // cases whose cache is sharded over context-parallel ranks
                                       // (case/context_parallel.h) (absent = 0); shrink target: none
  Weighted<CpInput> cp_inputs;         // who localises each rank's tokens: slot_mapping (a producer's per-rank
                                       // slot_mapping) or positions (the kernel) (absent = both equally)
  Weighted<int32_t> cp_world_sizes;    // ranks N (absent = 2, 3, 4, 8); shrink target: the list's first
  Weighted<int32_t> cp_interleaves;    // interleave I (absent = 1, 2, 3, 16); shrink target: the list's first
  int format_percent = 0;              // cases whose cache is a quantised format (case/quant_format.h), drawn
                                       // after the serving conventions (absent = 0); shrink target: none
  Weighted<QuantFormat> quant_formats; // which formats (absent = every one equally)
  // Each format's conventions (absent = every value equally); shrink target: the list's first.
  Weighted<Nvfp4Rule> nvfp4_rules;
  Weighted<ScaleLayout> scale_layouts;
  Weighted<MxScaleRule> mx_rules;
  Weighted<DsMlaScale> ds_mla_rules;
  Weighted<IndexerScale> indexer_rules;
  Weighted<AsymArith> asym_ariths;
  Weighted<AsymLanes> asym_lanes;
  Weighted<Int4Pairing> int4_pairings;
  Weighted<WindowInput> window_inputs; // who applies a ring's window: slot_mapping (-1 for evicted tokens) or
                                       // positions (the kernel) (absent = both equally)
  // Slot placement (case/placement.h); each case draws both independently:
  int scattered_positions_percent = 10;  // new tokens at random positions of their blocks, in random row
                                         // order, leaving holes (shrink target: consecutive)
  int shared_prefix_percent = 10;        // requests share up to a drawn number of leading full-context blocks
                                         // with an earlier request (prefix caching; paged layouts)
  int32_t max_shared_prefix_blocks = 2;  // that number, drawn in 1..max (shrink target: 0, no sharing)
  int64_t max_elements_per_case = 1 << 20;  // budget B: new tokens * H * D <= B and cache slots * H * D
                                            // <= 2 B (larger shapes get fewer tokens; generate.cpp)
  // Large caches (configs/large.json; optional key, 0 = off): the generator adds free blocks until
  // each of K and V spans at least this many elements (num_blocks * stride_block), whatever the
  // budget above. Past 2^31 the element offsets of the upper blocks no longer fit 32-bit integers;
  // the shuffled block tables put live requests' blocks below and above that boundary. Such caches
  // are checked in windowed mode (arena/windows.h). At most 2^36; load_profile() refuses values that
  // would need more than 2^22 blocks for the smallest shape drawn (block_size x num_heads x
  // head_dim of positive weight; 1 slot per sequence for contiguous layouts) or more than 2^30
  // slots (so that int32 slot_mapping values stay representable).
  int64_t min_tensor_elements = 0;

  bool operator==(const Profile&) const = default;
};

// Reads and validates a profile file (at most 1 MiB). Throws InputError (base/errors.h) on any problem.
Profile load_profile(const std::filesystem::path& file);

// The same reader on in-memory text (the fuzzing entry point, tests/fuzz/fuzz_profile_reader.cpp),
// which reads no file: "extends" may name only "default" there:
// strict JSON (parse_json_strict: duplicate keys, nesting depth, invalid UTF-8 refused), then every
// key, type and range. `file` is used in error messages only. Throws only InputError.
Profile profile_from_text(std::string_view text, const std::string& file);

// The built-in default profile (identical to configs/default.json; a test checks they agree).
Profile default_profile();

// `p` as a profile file's object, every key given (optional ones too); profile_from_text() of its
// dump() gives `p` back.
nlohmann::json profile_to_json(const Profile& p);

}  // namespace kvf
