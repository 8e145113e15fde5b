// generate.cpp — the RapidCheck generator of genotypes, and the per-case source of campaigns.
//
// Order of choices: head_dim, then num_heads and block_size among the values whose cache
// footprint fits max_elements_per_case, then the other shape choices (dtypes and quantisation in
// one draw, gen_dtypes: a copy, a float conversion or a quantised cache), then the number of
// requests, then each request's lengths capped so that the batch fits the element budget. The
// bound holds by construction (no suchThat, no discards). RapidCheck's own shrinking is switched
// off (gen::noShrink) and replaced by shrink_genotype(): campaigns and `kvfuzz shrink` use one
// shrinker.
#include "generate.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "base/rng.h"
#include "shrink.h"

namespace kvf {
namespace {

// Generators are lazy: a Shrinkable recomputes its value from the lambdas long after gen_genotype
// returned, so every lambda holds the profile through this shared pointer, never a reference.
using ProfilePtr = std::shared_ptr<const Profile>;

// Size-independent weighted choice among w.values (weight 0 = never). Unlike gen::inRange this
// does not grow with the size: layouts, dtypes and shapes are drawn from the full list at every
// size. (gen::weightedElement only takes an initializer_list, so it cannot hold profile data.)
template <typename T>
rc::Gen<T> weighted(const Weighted<T>& w) {
  return [w](const rc::Random& random, int /*size*/) {
    uint64_t total = 0;
    for (int x : w.weights) total += static_cast<uint64_t>(x);
    // load_profile() refuses such lists; a Profile built in code might not.
    if (total == 0 || w.weights.size() != w.values.size())
      throw std::invalid_argument("kvfuzz profile: a weighted list needs one weight per value, at least one > 0");
    uint64_t r = rc::Random(random).next() % total;
    size_t i = 0;
    while (r >= static_cast<uint64_t>(w.weights[i])) r -= static_cast<uint64_t>(w.weights[i++]);
    return rc::shrinkable::just(w.values[i]);
  };
}

// True with probability percent/100, whatever the size.
rc::Gen<bool> chance(int percent) {
  return [percent](const rc::Random& random, int /*size*/) {
    return rc::shrinkable::just(static_cast<int>(rc::Random(random).next() % 100) < percent);
  };
}

// An integer in [lo, hi] (both inclusive) that grows with the size; lo when hi <= lo
// (gen::inRange throws on an empty range).
rc::Gen<int64_t> up_to(int64_t lo, int64_t hi) {
  if (hi <= lo) return rc::gen::just(lo);
  return rc::gen::inRange<int64_t>(lo, hi + 1);
}

// The values of w for which fits(value) holds, with their weights; if no value with a positive
// weight fits, the smallest value alone (so a profile with only big shapes still generates).
Weighted<int32_t> fitting(const Weighted<int32_t>& w, const std::function<bool(int32_t)>& fits) {
  Weighted<int32_t> out;
  bool any = false;
  for (size_t i = 0; i < w.values.size(); ++i) {
    if (!fits(w.values[i])) continue;
    out.values.push_back(w.values[i]);
    out.weights.push_back(w.weights[i]);
    any = any || w.weights[i] > 0;
  }
  if (!any) out = {{*std::min_element(w.values.begin(), w.values.end())}, {1}};
  return out;
}

bool is_contiguous(Layout l) { return l == Layout::contiguous_bshd || l == Layout::contiguous_bhsd; }

// Element types and quantisation of one case (profile.h: quant_percent, cross_dtype_percent).
struct DTypes {
  DType input = DType::f16;             // key/value element type
  DType cache = DType::f16;             // = input unless cross-dtype or quantised
  ScaleKind scale_kind = ScaleKind::none;  // none exactly for float caches
  ScaleDist scale_dist = ScaleDist::unit;  // unit unless the kind has static scales
};

rc::Gen<DTypes> gen_dtypes(const ProfilePtr& pp) {
  const Profile& p = *pp;
  // 0 = bit-exact copy, 1 = float conversion, 2 = quantised.
  const int copy_weight = std::max(0, 100 - p.cross_dtype_percent - p.quant_percent);
  const Weighted<int> kinds{{0, 1, 2}, {copy_weight, p.cross_dtype_percent, p.quant_percent}};
  return rc::gen::mapcat(weighted(kinds), [pp](int kind) -> rc::Gen<DTypes> {
    const Profile& p = *pp;
    if (kind == 0) {
      return rc::gen::map(weighted(p.input_dtypes), [](DType t) { return DTypes{t, t}; });
    }
    if (kind == 1) {
      const auto floats = only(p.cache_dtypes, [](DType t) { return !is_quantized(t); });
      return rc::gen::map(rc::gen::tuple(weighted(p.input_dtypes), weighted(floats)),
                          [](std::tuple<DType, DType> t) { return DTypes{std::get<0>(t), std::get<1>(t)}; });
    }
    const auto quantised = only(p.cache_dtypes, [](DType t) { return is_quantized(t); });
    return rc::gen::map(
        rc::gen::tuple(weighted(p.input_dtypes), weighted(quantised), weighted(p.scale_kinds), weighted(p.scale_dists)),
        [](std::tuple<DType, DType, ScaleKind, ScaleDist> t) {
          DTypes d{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
          if (d.scale_kind == ScaleKind::per_token_head) d.scale_dist = ScaleDist::unit;  // computed scales
          return d;
        });
  });
}

// One request whose context + new tokens stay within `max_tokens` (>= 1).
rc::Gen<RequestGene> gen_request(const ProfilePtr& pp, int64_t max_tokens) {
  const Profile& p = *pp;
  const int64_t max_new = std::min<int64_t>(p.max_new_len, max_tokens);
  // Kind of request: 0 = decode (1 token), 1 = idle (0 tokens), 2 = prefill (2..max_new tokens).
  const int prefill_weight = std::max(0, 100 - p.decode_percent - p.idle_percent);
  const Weighted<int> kinds{{0, 1, 2}, {p.decode_percent, p.idle_percent, prefill_weight}};
  const rc::Gen<int64_t> new_len = rc::gen::mapcat(weighted(kinds), [max_new](int kind) {
    if (kind == 0 || (kind == 2 && max_new < 2)) return rc::gen::just<int64_t>(1);
    if (kind == 1) return rc::gen::just<int64_t>(0);
    return up_to(2, max_new);
  });
  const int64_t max_context = p.max_context_len;
  return rc::gen::mapcat(new_len, [max_context, max_tokens](int64_t n) {
    return rc::gen::map(up_to(0, std::min<int64_t>(max_context, max_tokens - n)),
                        [n](int64_t ctx) { return RequestGene{ctx, n}; });
  });
}

// Shape choices, made before any length.
struct Shape {
  Layout layout = Layout::paged_nhd;      // cache layout
  int32_t head_dim = 1;                   // D, drawn first
  int32_t num_heads = 1;                  // H_kv, among values with 4 * H * D <= budget
  int32_t block_size = 1;                 // among values with 4 * bs * H * D <= budget
  int32_t gqa_ratio = 1;                  // H_q / H_kv of a fused QKV input
  bool fused_qkv = false;                 // key/value are views into one QKV buffer
  DTypes dtypes;                          // element types and quantisation
  IndexType slot_dtype = IndexType::i64;  // slot_mapping element type
  ValueDist dist = ValueDist::finite;     // payload distribution
  bool irregular = false;                 // odd padding and invalid slot values, last block in use
  bool gapped_strides = false;            // gaps between dims and tensors
  bool misaligned_bases = false;          // odd base offsets
  KvViews kv_views = KvViews::alike;      // how the value view differs from the key view
};

rc::Gen<Shape> gen_shape(const ProfilePtr& pp) {
  const int64_t budget = pp->max_elements_per_case;
  return rc::gen::mapcat(weighted(pp->head_dims), [pp, budget](int32_t d) {
    const Profile& p = *pp;
    // At least four slots of every head must fit the budget.
    const auto heads = fitting(p.num_heads, [=](int32_t h) { return int64_t{4} * h * d <= budget; });
    return rc::gen::mapcat(weighted(heads), [pp, budget, d](int32_t h) {
      const Profile& p = *pp;
      // At least four blocks must fit the budget.
      const auto sizes = fitting(p.block_sizes, [=](int32_t bs) { return int64_t{4} * bs * h * d <= budget; });
      using Drawn = std::tuple<Layout, int32_t, int32_t, bool, DTypes, IndexType, ValueDist, bool, bool, bool, KvViews>;
      return rc::gen::map(
          rc::gen::tuple(weighted(p.layouts), weighted(sizes), weighted(p.gqa_ratios), chance(p.fused_qkv_percent),
                         gen_dtypes(pp), weighted(p.slot_dtypes), weighted(p.value_dists), chance(p.irregular_percent),
                         chance(p.gapped_strides_percent), chance(p.misaligned_bases_percent), weighted(p.kv_views)),
          [d, h](const Drawn& t) {
            Shape s;
            s.head_dim = d;
            s.num_heads = h;
            std::tie(s.layout, s.block_size, s.gqa_ratio, s.fused_qkv, s.dtypes, s.slot_dtype, s.dist, s.irregular,
                     s.gapped_strides, s.misaligned_bases, s.kv_views) = t;
            // vLLM's legacy K packs x = 16 bytes of cache elements: a head_dim it cannot pack
            // gets the closest geometry instead (HND, no random draw, so the stream is unchanged).
            if (s.layout == Layout::vllm_legacy && d % xpack_elems(s.dtypes.cache) != 0) s.layout = Layout::paged_hnd;
            return s;
          });
    });
  });
}

// A weighted pick with a SplitMix64 draw (no RapidCheck randomness: see apply_family).
template <typename T>
T pick_weighted(const Weighted<T>& w, SplitMix64& rng) {
  int64_t total = 0;
  for (const int64_t x : w.weights) total += x;
  if (total <= 0) return w.values.front();
  int64_t r = static_cast<int64_t>(rng.below(static_cast<uint64_t>(total)));
  for (size_t i = 0; i < w.values.size(); ++i) {
    if (r < w.weights[i]) return w.values[i];
    r -= w.weights[i];
  }
  return w.values.back();
}

// The format family and what it needs, drawn from the genotype's layout_seed rather than from
// RapidCheck's stream, so that a profile drawing only kv (the default) makes exactly the cases it
// made before families existed. The shape is then made to fit the family (profile.h `families`).
void apply_family(const Profile& p, Genotype& g) {
  SplitMix64 rng(mix64(g.layout_seed ^ mix64(0x66616d696c79ull)));  // "family"
  g.family = pick_weighted(p.families, rng);
  if (g.family == Family::kv) return;
  const bool plain = g.layout == Layout::paged_nhd || g.layout == Layout::paged_hnd || is_contiguous(g.layout);
  if (!plain) g.layout = g.layout == Layout::vllm_legacy ? Layout::paged_hnd : Layout::paged_nhd;
  g.kv_views = KvViews::alike;
  if (g.family == Family::kv_split) g.value_head_dim = pick_weighted(p.value_head_dims, rng);
  if (g.family == Family::mla) {
    g.num_heads = 1;
    g.rope_dim = pick_weighted(p.rope_dims, rng);
    g.head_dim += g.rope_dim;  // the entry: kv_c's head_dim dims, then k_pe's
    if (g.scale_kind != ScaleKind::none) g.scale_kind = ScaleKind::per_tensor;
  }
}

// The serving conventions, drawn like the family from the layout_seed (a stream of their own), so
// that a profile drawing only the default mode makes exactly the cases it made before them.
void apply_serving(const Profile& p, Genotype& g) {
  SplitMix64 rng(mix64(g.layout_seed ^ mix64(0x73657276696e67ull)));  // "serving"
  g.padding = pick_weighted(p.padding_modes, rng);
  g.addressing = pick_weighted(p.addressings, rng);
  if (g.addressing == Addressing::csr) {  // a CSR call has int32 arrays and no padding or invalid rows
    g.padding = PaddingMode::negative;
    g.slot_dtype = IndexType::i32;
    g.tail_padding = g.interleaved_padding = g.invalid_slots = 0;
  }
  if (rng.percent(p.ring_percent)) {  // a sliding-window ring (case/window.h) of 1 .. the longest sequence
    int64_t longest = 1;
    for (const RequestGene& r : g.requests) longest = std::max(longest, r.context_len + r.new_len);
    g.window_input = pick_weighted(p.window_inputs, rng);
    g.window_size = static_cast<int32_t>(1 + rng.below(static_cast<uint64_t>(longest)));
    g.window_sinks = static_cast<int32_t>(rng.below(static_cast<uint64_t>(std::min(g.window_size, 4))));
    g.padding = PaddingMode::negative;  // a ring takes the default padding, slot_mapping addressing and
    g.addressing = Addressing::slot_mapping;  // its own blocks, consecutive positions (materialize.cpp
    g.scattered_positions = false;           // shuffles their row order)
    g.shared_prefix_blocks = 0;
    if (g.window_input == WindowInput::positions) g.slot_dtype = IndexType::i32;
  }
  if (rng.percent(p.cp_percent)) {  // context-parallel shards (case/context_parallel.h)
    g.cp_input = pick_weighted(p.cp_inputs, rng);
    g.cp_world_size = pick_weighted(p.cp_world_sizes, rng);
    g.cp_interleave = pick_weighted(p.cp_interleaves, rng);
    g.padding = PaddingMode::negative;  // shards take the default padding and slot_mapping addressing, no
    g.addressing = Addressing::slot_mapping;  // ring, their own blocks and consecutive positions, no
    g.window_input = WindowInput::none;       // invalid rows, and int32 slots (the producer's type)
    g.window_size = g.window_sinks = 0;
    g.scattered_positions = false;
    g.shared_prefix_blocks = 0;
    g.invalid_slots = 0;
    g.slot_dtype = IndexType::i32;
  }
}

// A quantised format (case/quant_format.h), drawn like the serving conventions from the layout_seed
// (a stream of its own) after them, so that a profile without formats makes exactly the cases it
// made before them. The family, shape, dtypes and serving conventions are then made to fit it:
// ds_mla is an MLA latent record (H 1, 128, 256 or 512 latent dims + 64 rope dims, 16-bit input);
// indexer_k a K-only cache of one head of 128 dims; the others K and V of head dims a multiple of
// their group (rounded up); the default serving conventions. The asymmetric formats take finite
// values (a constant or non-finite group has no defined code: block_quant.h).
void apply_format(const Profile& p, Genotype& g) {
  SplitMix64 rng(mix64(g.layout_seed ^ mix64(0x666f726d6174ull)));  // "format"
  if (!rng.percent(p.format_percent)) return;
  const QuantFormat f = pick_weighted(p.quant_formats, rng);
  g.quant_format = f;
  QuantRules& r = g.quant_rules;
  r.nvfp4 = pick_weighted(p.nvfp4_rules, rng);
  r.scale_layout = pick_weighted(p.scale_layouts, rng);
  r.mx = pick_weighted(p.mx_rules, rng);
  r.ds_mla = pick_weighted(p.ds_mla_rules, rng);
  r.indexer = pick_weighted(p.indexer_rules, rng);
  r.asym_arith = pick_weighted(p.asym_ariths, rng);
  r.asym_lanes = pick_weighted(p.asym_lanes, rng);
  r.int4_pairing = pick_weighted(p.int4_pairings, rng);
  if (f == QuantFormat::ds_mla) {
    const int32_t latents[] = {128, 256, 512};
    g.head_dim = latents[rng.below(3)] + 64;
  }
  fit_format(g);
}


// Free blocks that make each of K and V span at least `min_elems` elements (profile.h
// min_tensor_elements). One block spans at least block_size * H * D elements (a sequence of the
// longest request for contiguous layouts; materialize.cpp only adds gaps and slack on top).
int32_t spare_blocks_for_span(const Genotype& g, int64_t min_elems) {
  int64_t used = 0, block = g.block_size;
  if (is_contiguous(g.layout)) {
    block = 1;
    for (const RequestGene& r : g.requests) block = std::max(block, r.context_len + r.new_len);
    used = static_cast<int64_t>(g.requests.size());
  } else {
    for (const RequestGene& r : g.requests) used += (r.context_len + r.new_len + g.block_size - 1) / g.block_size;
  }
  const int64_t span = block * g.num_heads * g.head_dim;
  const int64_t blocks = (min_elems + span - 1) / span;  // load_profile() bounds this by 2^22
  return static_cast<int32_t>(std::clamp<int64_t>(blocks - used, 0, INT32_MAX));
}

// Requests, padding and spare blocks for a shape, within the element budget B: the cache holds
// at most about S = B / (H * D) slots. The number of requests is capped so each gets at least one
// block (paged) or a 4-slot sequence (contiguous: 1 token + slack), then the per-request token cap
// splits S among them and spare blocks take what is left (at least one). Result: new tokens
// * H * D <= B and cache slots * H * D <= 2 B (a property test checks both).
rc::Gen<Genotype> gen_batch(const ProfilePtr& pp, const Shape& s) {
  const int64_t slots = std::max<int64_t>(1, pp->max_elements_per_case / (int64_t{s.num_heads} * s.head_dim));
  const int64_t unit = is_contiguous(s.layout) ? 4 : s.block_size;  // fewest slots a request takes
  const int64_t max_requests = std::min<int64_t>(pp->max_requests, std::max<int64_t>(1, slots / unit));
  return rc::gen::mapcat(up_to(1, max_requests), [pp, s, slots](int64_t n) {
    const Profile& p = *pp;
    int64_t max_tokens = 0;  // context + new per request
    int64_t max_spare = 0;   // spare blocks (sequences)
    if (is_contiguous(s.layout)) {
      // n sequences of max_tokens + slack (<= 3) slots, leaving room for one spare sequence.
      max_tokens = std::max<int64_t>(1, slots / (n + 1) - 3);
      max_spare = std::min<int64_t>(p.max_spare_blocks, std::max<int64_t>(1, slots / (max_tokens + 3) - n));
    } else {
      const int64_t blocks_per_request = std::max<int64_t>(1, slots / (n * s.block_size));
      max_tokens = blocks_per_request * s.block_size;
      max_spare = std::min<int64_t>(p.max_spare_blocks,
                                    std::max<int64_t>(1, slots / s.block_size - n * blocks_per_request));
    }
    // Placement genes come last in the tuple, so the draws before them are those of every profile
    // before they existed; shared_prefix_blocks is 0 without sharing, else 1..max_shared_prefix_blocks.
    using Rest = std::tuple<std::vector<RequestGene>, int64_t, int64_t, int64_t, int64_t, int64_t, uint64_t, bool, bool, int64_t>;
    return rc::gen::map(
        rc::gen::tuple(rc::gen::container<std::vector<RequestGene>>(static_cast<size_t>(n), gen_request(pp, max_tokens)),
                       up_to(0, p.max_padding), up_to(0, p.max_padding), up_to(0, p.max_invalid_slots),
                       up_to(0, p.max_extra_input_rows), up_to(0, max_spare), rc::gen::arbitrary<uint64_t>(),
                       chance(p.scattered_positions_percent), chance(p.shared_prefix_percent),
                       rc::gen::inRange<int64_t>(1, int64_t{p.max_shared_prefix_blocks} + 1)),
        [s, pp, min_elems = p.min_tensor_elements](Rest t) {
          Genotype g;
          g.layout = s.layout;
          g.block_size = s.block_size;
          g.num_heads = s.num_heads;
          g.head_dim = s.head_dim;
          g.gqa_ratio = s.gqa_ratio;
          g.fused_qkv = s.fused_qkv;
          g.input_dtype = s.dtypes.input;
          g.cache_dtype = s.dtypes.cache;
          g.scale_kind = s.dtypes.scale_kind;
          g.scale_dist = s.dtypes.scale_dist;
          g.slot_dtype = s.slot_dtype;
          g.dist = s.dist;
          g.irregular = s.irregular;
          g.gapped_strides = s.gapped_strides;
          g.stride_gap_bytes = pp->stride_gap_bytes;
          g.misaligned_bases = s.misaligned_bases;
          g.kv_views = s.kv_views;
          g.requests = std::move(std::get<0>(t));
          g.tail_padding = static_cast<int32_t>(std::get<1>(t));
          g.interleaved_padding = static_cast<int32_t>(std::get<2>(t));
          g.invalid_slots = static_cast<int32_t>(std::get<3>(t));
          g.extra_input_rows = static_cast<int32_t>(std::get<4>(t));
          g.spare_blocks = static_cast<int32_t>(std::get<5>(t));
          g.layout_seed = std::get<6>(t);
          g.scattered_positions = std::get<7>(t);
          g.shared_prefix_blocks = std::get<8>(t) && !is_contiguous(s.layout) ? static_cast<int32_t>(std::get<9>(t)) : 0;
          apply_family(*pp, g);
          apply_serving(*pp, g);
          apply_format(*pp, g);
          if (min_elems > 0) g.spare_blocks = std::max(g.spare_blocks, spare_blocks_for_span(g, min_elems));
          return g;
        });
  });
}

}  // namespace

// The shape, family, dtypes and serving conventions a format needs (generate.h).
void fit_format(Genotype& g) {
  const QuantFormat f = g.quant_format;
  if (f == QuantFormat::none) return;
  const QuantRules& r = g.quant_rules;
  g.padding = PaddingMode::negative;
  g.addressing = Addressing::slot_mapping;
  g.window_input = WindowInput::none;
  g.window_size = g.window_sinks = 0;
  g.cp_input = CpInput::none;
  g.cp_world_size = g.cp_interleave = 0;
  g.value_head_dim = 0;
  if (g.layout == Layout::vllm_legacy) g.layout = Layout::paged_hnd;
  const auto round_up = [](int32_t v, int32_t m) { return (std::max(v, 1) + m - 1) / m * m; };
  switch (f) {
    case QuantFormat::ds_mla:  // latent dims a multiple of 128, 64 rope dims
      g.family = Family::mla;
      g.num_heads = 1;
      g.rope_dim = 64;
      g.head_dim = round_up(g.head_dim - g.rope_dim, 128) + g.rope_dim;
      if (g.input_dtype == DType::f32) g.input_dtype = DType::bf16;
      g.kv_views = KvViews::alike;
      break;
    case QuantFormat::indexer_k:
      g.family = Family::k_only;
      g.num_heads = 1;
      g.head_dim = round_up(g.head_dim, 128);
      g.rope_dim = 0;
      g.kv_views = KvViews::alike;
      break;
    default:
      g.family = Family::kv;
      g.rope_dim = 0;
      g.head_dim = round_up(g.head_dim, static_cast<int32_t>(format_group(f, 4)));  // 16, 32, or a multiple of 4 (inline, asym)
      break;
  }
  const bool swizzled = f == QuantFormat::nvfp4 && r.scale_layout != ScaleLayout::linear;
  if (swizzled) {  // 4 x 4 tiles of tokens by scales
    g.head_dim = round_up(g.head_dim, 64);
    g.block_size = round_up(g.block_size, 4);
  }
  if (g.layout != Layout::paged_nhd && g.layout != Layout::paged_hnd && (g.family != Family::kv || swizzled))
    g.layout = Layout::paged_nhd;  // records and one-head formats: paged; swizzled scales: block sizes of 4 tokens
  g.cache_dtype = format_code_dtype(f);
  g.scale_kind = f == QuantFormat::nvfp4 ? ScaleKind::per_tensor : ScaleKind::none;
  if (g.scale_kind == ScaleKind::none) g.scale_dist = ScaleDist::unit;
  // A constant or non-finite group has no defined asymmetric code (block_quant.h): finite values, ties or edges.
  if ((f == QuantFormat::asym_int8 || f == QuantFormat::asym_int4) && g.dist != ValueDist::ties &&
      g.dist != ValueDist::edges)
    g.dist = ValueDist::finite;
}

rc::Gen<Genotype> gen_genotype(const Profile& profile) {
  auto p = std::make_shared<const Profile>(profile);
  rc::Gen<Genotype> raw = rc::gen::mapcat(gen_shape(p), [p](const Shape& s) { return gen_batch(p, s); });
  return rc::gen::shrink(rc::gen::noShrink(raw), [p](const Genotype& g) {
    return rc::seq::fromContainer(shrink_genotype(g, *p));
  });
}

Genotype generate_case(const Profile& profile, uint64_t seed, int64_t index) {
  const auto i = static_cast<uint64_t>(index);
  const rc::Random::Key key = {mix64(seed), mix64(i), mix64(seed ^ mix64(i)), mix64(i ^ 0x6b7666757a7aull)};
  // Sizes cycle 0..100 (RapidCheck's nominal maximum; the Debian build has UB above it), so small
  // cases keep coming back throughout a campaign.
  const int size = static_cast<int>(i % 101);
  return gen_genotype(profile)(rc::Random(key), size).value();
}

}  // namespace kvf
