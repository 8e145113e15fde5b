// shrink.cpp — the one shrinker: simpler candidates of a genotype, and the greedy descent.
//
// Termination. Every candidate is strictly below its parent in the product order of the
// components listed in complexity() (each a well-ordered value: a natural number, or a
// lexicographic pair of them): no component grows and at least one shrinks. A product of
// well-orders is well-founded, so every descent ends. simpler_than() exposes the order for tests.
#include "shrink.h"

#include "generate.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace kvf {
namespace {

// Position of v in the profile's list (simplest first); values.size() for a value not listed.
template <typename T>
int64_t rank_of(const Weighted<T>& w, const T& v) {
  const auto it = std::find(w.values.begin(), w.values.end(), v);
  return it - w.values.begin();
}

// A lexicographic pair of naturals, compared as such.
using Pair = std::array<int64_t, 2>;

// The components of the complexity order; all are minimised at the simplest genotype.
struct Complexity {
  Pair requests;          // (number of requests, total context + new tokens)
  int64_t layout;         // 0 for paged_nhd
  Pair num_heads;         // (rank in the profile list, value)
  Pair head_dim;          // (rank, value)
  Pair block_size;        // (rank, value)
  int64_t fused_qkv;      // 0 = separate key/value
  Pair gqa_ratio;         // (rank, value)
  int64_t input_dtype;    // rank in the profile's input_dtypes
  int64_t cross_dtype;    // 1 when cache dtype != input dtype
  int64_t scale_kind;     // scale_rank(): 0 for none and per_tensor
  int64_t scale_dist;     // 0 for unit, then pow2, random, extreme
  int64_t slot_dtype;     // 0 for i64
  int64_t dist;           // 0 for finite
  int64_t irregular;      // 0 = slot values -1 and in-range invalid ones only
  int64_t gapped_strides;    // 0 = dense strides
  int64_t misaligned_bases;  // 0 = aligned bases
  int64_t kv_views;          // 0 = V alike K, then value_rows, value_heads, value_head_major
  int64_t family;            // family_rank(): 0 = kv
  Pair value_head_dim;       // (0, 0) unless kv_split, else (1 + rank in the profile list, value)
  Pair rope_dim;             // (0, 0) unless mla, else (1 + rank, value)
  int64_t scattered_positions;   // 0 = consecutive from context_len
  int64_t shared_prefix_blocks;  // 0 = no block shared
  int64_t padding;               // 0 = negative padding slots, 1 = the sink slot 0
  int64_t addressing;            // 0 = slot_mapping, 1 = csr
  int64_t window;                // 0 = no ring, 1 = slot_mapping applies the window, 2 = the kernel does
  int64_t window_sinks;          // a ring's sinks
  int64_t window_size;           // a ring's window (smaller: fewer slots, the same wrap with fewer tokens)
  int64_t cp;                    // 0 = no shards, 1 = a producer's slot mappings, 2 = the kernel localises
  Pair cp_world_size;            // (0, 0) without shards, else (1 + rank in the profile list, N)
  Pair cp_interleave;            // (0, 0) without shards, else (1 + rank, I)
  int64_t quant_format;          // 0 = the classic caches, else 1
  int64_t quant_rules;           // conventions past their profile lists' first: how many
  int64_t tail_padding, interleaved_padding, invalid_slots, extra_input_rows, spare_blocks;  // counts
};

// Families simplest first: K and V alike, K alone, K and V of different shapes, the MLA entry of
// two concatenated sources.
int64_t family_rank(Family f) {
  switch (f) {
    case Family::kv: return 0;
    case Family::k_only: return 1;
    case Family::kv_split: return 2;
    case Family::mla: return 3;
  }
  return 4;
}

// Scale kinds simplest first, whatever the profile lists: one scale, one per head, one per block
// and head, then the dynamic per-token scales (a computed amax, a scale cache written).
int64_t scale_rank(ScaleKind k) {
  switch (k) {
    case ScaleKind::none:
    case ScaleKind::per_tensor: return 0;
    case ScaleKind::per_head: return 1;
    case ScaleKind::per_block: return 2;
    case ScaleKind::per_token_head: return 3;
  }
  return 4;
}
constexpr ScaleKind kScaleKindsSimplestFirst[] = {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block};
constexpr ScaleDist kScaleDistsSimplestFirst[] = {ScaleDist::unit, ScaleDist::pow2, ScaleDist::random,
                                                  ScaleDist::extreme};
// Static scales' values simplest first: 1.0, exact powers of two, arbitrary values, extremes.
int64_t scale_dist_rank(ScaleDist d) {
  const auto* it = std::find(std::begin(kScaleDistsSimplestFirst), std::end(kScaleDistsSimplestFirst), d);
  return it - std::begin(kScaleDistsSimplestFirst);
}

Complexity complexity(const Genotype& g, const Profile& p) {
  Complexity c{};
  int64_t tokens = 0;
  for (const RequestGene& r : g.requests) tokens += r.context_len + r.new_len;
  c.requests = {static_cast<int64_t>(g.requests.size()), tokens};
  c.layout = g.layout != Layout::paged_nhd;
  c.num_heads = {rank_of(p.num_heads, g.num_heads), g.num_heads};
  c.head_dim = {rank_of(p.head_dims, g.head_dim), g.head_dim};
  c.block_size = {rank_of(p.block_sizes, g.block_size), g.block_size};
  c.fused_qkv = g.fused_qkv;
  c.gqa_ratio = {rank_of(p.gqa_ratios, g.gqa_ratio), g.gqa_ratio};
  c.input_dtype = rank_of(p.input_dtypes, g.input_dtype);
  c.cross_dtype = g.cache_dtype != g.input_dtype;
  c.scale_kind = scale_rank(g.scale_kind);
  c.scale_dist = scale_dist_rank(g.scale_dist);
  c.slot_dtype = g.slot_dtype != IndexType::i64;
  c.dist = g.dist != ValueDist::finite;
  c.irregular = g.irregular;
  c.gapped_strides = g.gapped_strides;
  c.misaligned_bases = g.misaligned_bases;
  c.kv_views = static_cast<int64_t>(g.kv_views);
  c.family = family_rank(g.family);
  if (g.family == Family::kv_split) c.value_head_dim = {1 + rank_of(p.value_head_dims, g.value_head_dim), g.value_head_dim};
  if (g.family == Family::mla) c.rope_dim = {1 + rank_of(p.rope_dims, g.rope_dim), g.rope_dim};
  c.scattered_positions = g.scattered_positions;
  c.shared_prefix_blocks = g.shared_prefix_blocks;
  c.padding = g.padding != PaddingMode::negative;
  c.addressing = g.addressing != Addressing::slot_mapping;
  c.window = static_cast<int64_t>(g.window_input);
  c.window_sinks = g.window_input == WindowInput::none ? 0 : g.window_sinks;
  c.window_size = g.window_input == WindowInput::none ? 0 : g.window_size;
  c.cp = static_cast<int64_t>(g.cp_input);
  c.cp_world_size = g.cp_input == CpInput::none ? Pair{0, 0} : Pair{1 + rank_of(p.cp_world_sizes, g.cp_world_size), g.cp_world_size};
  c.cp_interleave = g.cp_input == CpInput::none ? Pair{0, 0} : Pair{1 + rank_of(p.cp_interleaves, g.cp_interleave), g.cp_interleave};
  c.quant_format = g.quant_format != QuantFormat::none;
  const QuantRules& r = g.quant_rules;
  c.quant_rules = (rank_of(p.nvfp4_rules, r.nvfp4) > 0) + (rank_of(p.scale_layouts, r.scale_layout) > 0) + (rank_of(p.mx_rules, r.mx) > 0) +
                  (rank_of(p.ds_mla_rules, r.ds_mla) > 0) + (rank_of(p.indexer_rules, r.indexer) > 0) +
                  (rank_of(p.asym_ariths, r.asym_arith) > 0) + (rank_of(p.asym_lanes, r.asym_lanes) > 0) +
                  (rank_of(p.int4_pairings, r.int4_pairing) > 0);
  c.tail_padding = g.tail_padding;
  c.interleaved_padding = g.interleaved_padding;
  c.invalid_slots = g.invalid_slots;
  c.extra_input_rows = g.extra_input_rows;
  c.spare_blocks = g.spare_blocks;
  return c;
}

// Compares a with b component by component: sets *less when some component of a is below b's
// and *greater when some is above.
template <typename T>
void compare(const T& a, const T& b, bool* less, bool* greater) {
  *less = *less || a < b;
  *greater = *greater || b < a;
}

// Values simpler than v for a field drawn from w: the listed values before v (simplest first);
// for a value not in the list, every listed value and then 1, v/2 and v-1 (towards 1).
std::vector<int32_t> simpler_values(const Weighted<int32_t>& w, int32_t v) {
  std::vector<int32_t> out;
  const int64_t r = rank_of(w, v);
  for (int64_t i = 0; i < r && i < static_cast<int64_t>(w.values.size()); ++i) out.push_back(w.values[i]);
  if (r == static_cast<int64_t>(w.values.size()))
    for (int32_t x : {1, v / 2, v - 1})
      if (x >= 1 && x < v && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

// Smaller counts for a non-negative integer field: 0, half, one less (distinct, each < v).
template <typename I>
std::vector<I> smaller_counts(I v) {
  std::vector<I> out;
  for (I x : {I{0}, static_cast<I>(v / 2), static_cast<I>(v - 1)})
    if (x >= 0 && x < v && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

}  // namespace

bool simpler_than(const Genotype& a, const Genotype& b, const Profile& profile) {
  const Complexity ca = complexity(a, profile), cb = complexity(b, profile);
  bool less = false, greater = false;
  compare(ca.requests, cb.requests, &less, &greater);
  compare(ca.layout, cb.layout, &less, &greater);
  compare(ca.num_heads, cb.num_heads, &less, &greater);
  compare(ca.head_dim, cb.head_dim, &less, &greater);
  compare(ca.block_size, cb.block_size, &less, &greater);
  compare(ca.fused_qkv, cb.fused_qkv, &less, &greater);
  compare(ca.gqa_ratio, cb.gqa_ratio, &less, &greater);
  compare(ca.input_dtype, cb.input_dtype, &less, &greater);
  compare(ca.cross_dtype, cb.cross_dtype, &less, &greater);
  compare(ca.scale_kind, cb.scale_kind, &less, &greater);
  compare(ca.scale_dist, cb.scale_dist, &less, &greater);
  compare(ca.slot_dtype, cb.slot_dtype, &less, &greater);
  compare(ca.dist, cb.dist, &less, &greater);
  compare(ca.irregular, cb.irregular, &less, &greater);
  compare(ca.gapped_strides, cb.gapped_strides, &less, &greater);
  compare(ca.misaligned_bases, cb.misaligned_bases, &less, &greater);
  compare(ca.kv_views, cb.kv_views, &less, &greater);
  compare(ca.family, cb.family, &less, &greater);
  compare(ca.value_head_dim, cb.value_head_dim, &less, &greater);
  compare(ca.rope_dim, cb.rope_dim, &less, &greater);
  compare(ca.scattered_positions, cb.scattered_positions, &less, &greater);
  compare(ca.shared_prefix_blocks, cb.shared_prefix_blocks, &less, &greater);
  compare(ca.padding, cb.padding, &less, &greater);
  compare(ca.addressing, cb.addressing, &less, &greater);
  compare(ca.window, cb.window, &less, &greater);
  compare(ca.window_sinks, cb.window_sinks, &less, &greater);
  compare(ca.window_size, cb.window_size, &less, &greater);
  compare(ca.cp, cb.cp, &less, &greater);
  compare(ca.cp_world_size, cb.cp_world_size, &less, &greater);
  compare(ca.cp_interleave, cb.cp_interleave, &less, &greater);
  compare(ca.quant_format, cb.quant_format, &less, &greater);
  compare(ca.quant_rules, cb.quant_rules, &less, &greater);
  compare(ca.tail_padding, cb.tail_padding, &less, &greater);
  compare(ca.interleaved_padding, cb.interleaved_padding, &less, &greater);
  compare(ca.invalid_slots, cb.invalid_slots, &less, &greater);
  compare(ca.extra_input_rows, cb.extra_input_rows, &less, &greater);
  compare(ca.spare_blocks, cb.spare_blocks, &less, &greater);
  return less && !greater;
}

std::vector<Genotype> shrink_genotype(const Genotype& g, const Profile& profile) {
  std::vector<Genotype> out;
  // Adds a candidate unless it equals g or an earlier candidate.
  auto add = [&](const Genotype& c) {
    if (c == g || std::find(out.begin(), out.end(), c) != out.end()) return;
    out.push_back(c);
  };
  // A copy of g with one change applied.
  auto with = [&](auto&& change) {
    Genotype c = g;
    change(c);
    if (c.quant_format != QuantFormat::none) {
      fit_format(c);  // a quantised format's shape stays one it can store (head dims of whole groups, ...),
      if (!simpler_than(c, g, profile)) return;  // and the candidate must still be simpler
    }
    add(c);
  };

  // 1. Fewer requests: each request alone, then either half, then all but one.
  const size_t n = g.requests.size();
  if (n > 1) {
    for (size_t i = 0; i < n; ++i) with([&](Genotype& c) { c.requests = {g.requests[i]}; });
    with([&](Genotype& c) { c.requests.erase(c.requests.begin(), c.requests.begin() + n / 2); });
    with([&](Genotype& c) { c.requests.erase(c.requests.begin() + n / 2, c.requests.end()); });
    for (size_t i = 0; i < n; ++i) with([&](Genotype& c) { c.requests.erase(c.requests.begin() + i); });
  }

  // 2. Simpler format and shape: the family towards kv (an MLA entry keeps its width), V's head dim
  // and k_pe's dims towards the profile's first.
  if (g.family != Family::kv) {
    with([](Genotype& c) {
      c.family = Family::kv;
      c.value_head_dim = c.rope_dim = 0;
    });
    if (g.family == Family::mla) {
      with([](Genotype& c) {
        c.family = Family::k_only;
        c.rope_dim = 0;
      });
    }
  }
  if (g.family == Family::kv_split)
    for (int32_t v : simpler_values(profile.value_head_dims, g.value_head_dim)) with([v](Genotype& c) { c.value_head_dim = v; });
  if (g.family == Family::mla)
    for (int32_t v : simpler_values(profile.rope_dims, g.rope_dim)) with([v](Genotype& c) { c.rope_dim = v; });
  with([](Genotype& c) { c.layout = Layout::paged_nhd; });
  with([](Genotype& c) { c.padding = PaddingMode::negative; });  // the default contract
  with([](Genotype& c) { c.addressing = Addressing::slot_mapping; });  // its slot_mapping twin
  if (g.window_input != WindowInput::none) {
    with([](Genotype& c) {  // no ring
      c.window_input = WindowInput::none;
      c.window_size = c.window_sinks = 0;
    });
    with([](Genotype& c) { c.window_input = WindowInput::slot_mapping; });  // the caller applies the window
    with([](Genotype& c) { c.window_sinks = 0; });
    for (const int32_t w : {g.window_size / 2, g.window_size - 1})  // a smaller ring wraps with fewer tokens
      if (w > g.window_sinks && w < g.window_size) with([w](Genotype& c) { c.window_size = w; });
  }
  if (g.quant_format != QuantFormat::none) {
    with([](Genotype& c) {  // the classic cache of the input's dtype
      c.quant_format = QuantFormat::none;
      c.quant_rules = QuantRules{};
      c.cache_dtype = c.input_dtype;
      c.scale_kind = ScaleKind::none;
    });
    const QuantRules& r = g.quant_rules;  // each convention towards its list's first
    if (rank_of(profile.nvfp4_rules, r.nvfp4) > 0) with([&](Genotype& c) { c.quant_rules.nvfp4 = profile.nvfp4_rules.values.front(); });
    if (rank_of(profile.scale_layouts, r.scale_layout) > 0)
      with([&](Genotype& c) { c.quant_rules.scale_layout = profile.scale_layouts.values.front(); });
    if (rank_of(profile.mx_rules, r.mx) > 0) with([&](Genotype& c) { c.quant_rules.mx = profile.mx_rules.values.front(); });
    if (rank_of(profile.ds_mla_rules, r.ds_mla) > 0) with([&](Genotype& c) { c.quant_rules.ds_mla = profile.ds_mla_rules.values.front(); });
    if (rank_of(profile.indexer_rules, r.indexer) > 0) with([&](Genotype& c) { c.quant_rules.indexer = profile.indexer_rules.values.front(); });
    if (rank_of(profile.asym_ariths, r.asym_arith) > 0) with([&](Genotype& c) { c.quant_rules.asym_arith = profile.asym_ariths.values.front(); });
    if (rank_of(profile.asym_lanes, r.asym_lanes) > 0) with([&](Genotype& c) { c.quant_rules.asym_lanes = profile.asym_lanes.values.front(); });
    if (rank_of(profile.int4_pairings, r.int4_pairing) > 0)
      with([&](Genotype& c) { c.quant_rules.int4_pairing = profile.int4_pairings.values.front(); });
  }
  if (g.cp_input != CpInput::none) {
    with([](Genotype& c) {  // no shards
      c.cp_input = CpInput::none;
      c.cp_world_size = c.cp_interleave = 0;
    });
    with([](Genotype& c) { c.cp_input = CpInput::slot_mapping; });  // the producer localises
    for (int32_t v : simpler_values(profile.cp_world_sizes, g.cp_world_size)) with([v](Genotype& c) { c.cp_world_size = v; });
    for (int32_t v : simpler_values(profile.cp_interleaves, g.cp_interleave)) with([v](Genotype& c) { c.cp_interleave = v; });
  }
  for (int32_t v : simpler_values(profile.num_heads, g.num_heads)) with([v](Genotype& c) { c.num_heads = v; });
  for (int32_t v : simpler_values(profile.head_dims, g.head_dim)) with([v](Genotype& c) { c.head_dim = v; });
  for (int32_t v : simpler_values(profile.block_sizes, g.block_size)) with([v](Genotype& c) { c.block_size = v; });
  with([](Genotype& c) { c.fused_qkv = false; });
  for (int32_t v : simpler_values(profile.gqa_ratios, g.gqa_ratio)) with([v](Genotype& c) { c.gqa_ratio = v; });

  // 3. Plain types and values. A quantised cache keeps its dtype (a failure may live in that
  // format's conversion, and a float cache would take the quantised path away): only its input
  // dtype, scale kind (towards per_tensor) and static scales' values (towards unit) get simpler.
  const int64_t input_rank = rank_of(profile.input_dtypes, g.input_dtype);
  const bool quantised = is_quantized(g.cache_dtype);
  if (input_rank > 0) {
    const DType first = profile.input_dtypes.values[0];
    if (quantised) {
      with([first](Genotype& c) { c.input_dtype = first; });
    } else {
      with([first](Genotype& c) { c.input_dtype = c.cache_dtype = first; });
    }
  }
  if (quantised) {
    for (ScaleKind k : kScaleKindsSimplestFirst)
      if (scale_rank(k) < scale_rank(g.scale_kind)) with([k](Genotype& c) { c.scale_kind = k; });
    for (ScaleDist d : kScaleDistsSimplestFirst)
      if (scale_dist_rank(d) < scale_dist_rank(g.scale_dist)) with([d](Genotype& c) { c.scale_dist = d; });
  } else {
    with([](Genotype& c) { c.cache_dtype = c.input_dtype; });
  }
  with([](Genotype& c) { c.slot_dtype = IndexType::i64; });
  with([](Genotype& c) { c.dist = ValueDist::finite; });
  with([](Genotype& c) { c.irregular = false; });
  with([](Genotype& c) { c.gapped_strides = false; });
  with([](Genotype& c) { c.misaligned_bases = false; });
  // K and V views alike first, then each simpler way of V differing (enum order, simplest first).
  for (int v = 0; v < static_cast<int>(g.kv_views); ++v) with([v](Genotype& c) { c.kv_views = static_cast<KvViews>(v); });
  // Consecutive placement, then fewer shared prefix blocks (none first).
  with([](Genotype& c) { c.scattered_positions = false; });
  for (int32_t x : smaller_counts(g.shared_prefix_blocks)) with([x](Genotype& c) { c.shared_prefix_blocks = x; });

  // 4. Shorter requests. context_len also moves down by whole blocks (context % block_size keeps
  // the position inside the block, which is what block-boundary bugs depend on).
  for (size_t i = 0; i < n; ++i) {
    const RequestGene& r = g.requests[i];
    std::vector<int64_t> news;
    for (int64_t x : {int64_t{1}, r.new_len / 2, r.new_len - 1})
      if (x >= 0 && x < r.new_len && std::find(news.begin(), news.end(), x) == news.end()) news.push_back(x);
    for (int64_t x : news) with([i, x](Genotype& c) { c.requests[i].new_len = x; });
    std::vector<int64_t> contexts = {0};
    if (g.block_size > 0) {
      contexts.push_back(r.context_len % g.block_size);
      contexts.push_back(r.context_len - g.block_size);
    }
    contexts.push_back(r.context_len / 2);
    contexts.push_back(r.context_len - 1);
    for (int64_t x : contexts)
      if (x >= 0 && x < r.context_len) with([i, x](Genotype& c) { c.requests[i].context_len = x; });
  }

  // 5. Fewer padding rows, invalid slots, extra input rows and spare blocks.
  for (int32_t x : smaller_counts(g.tail_padding)) with([x](Genotype& c) { c.tail_padding = x; });
  for (int32_t x : smaller_counts(g.interleaved_padding)) with([x](Genotype& c) { c.interleaved_padding = x; });
  for (int32_t x : smaller_counts(g.invalid_slots)) with([x](Genotype& c) { c.invalid_slots = x; });
  for (int32_t x : smaller_counts(g.extra_input_rows)) with([x](Genotype& c) { c.extra_input_rows = x; });
  for (int32_t x : smaller_counts(g.spare_blocks)) with([x](Genotype& c) { c.spare_blocks = x; });

  // Every step above lowers one component of the complexity order and raises none (a property
  // test checks simpler_than(candidate, g) for every candidate).
  return out;
}

Genotype shrink_to_minimal(const Genotype& failing, const Profile& profile,
                           const std::function<bool(const Genotype&)>& still_fails, ShrinkStats* stats,
                           int64_t max_tries) {
  Genotype current = failing;
  ShrinkStats local;
  ShrinkStats& s = stats ? *stats : local;
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (const Genotype& candidate : shrink_genotype(current, profile)) {
      if (s.tried >= max_tries) return current;
      ++s.tried;
      if (still_fails(candidate)) {
        current = candidate;
        ++s.accepted;
        progressed = true;
        break;
      }
    }
  }
  return current;
}

}  // namespace kvf
