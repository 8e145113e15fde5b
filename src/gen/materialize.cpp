// materialize.cpp — genotype -> concrete Case: block tables, strides, buffers, slot_mapping.
//
// The only randomness is layout_seed, expanded by SplitMix64 (rng.h) into independent streams,
// one per concern (blocks, cache strides, input strides, slots), so that shrinking one field of a
// genotype leaves the other concerns' choices unchanged where it can. The result satisfies
// validate.h: nested strides (cells distinct), K and V disjoint, every block owned by at most one
// request (or shared as a full prefix block, shared_prefix_blocks), slot_mapping = each new-token
// slot exactly once + padding (< 0) + invalid (>= capacity). Placement (case/placement.h) draws
// from a stream of its own and only for scattered_positions / shared_prefix_blocks, so genotypes
// without them materialise exactly as before those genes existed.
#include "materialize.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "case/context_parallel.h"
#include "case/placement.h"
#include "case/window.h"
#include "base/rng.h"

namespace kvf {
namespace {

// Salts of the per-concern streams ("blocks", "cache", "input", "slots", "payload", "scales",
// "kvviews", "place" in ASCII).
constexpr uint64_t kBlocksSalt = 0x626c6f636b73ull;
constexpr uint64_t kCacheSalt = 0x6361636865ull;
constexpr uint64_t kInputSalt = 0x696e707574ull;
constexpr uint64_t kSlotsSalt = 0x736c6f7473ull;
constexpr uint64_t kPayloadSalt = 0x7061796c6f6164ull;
constexpr uint64_t kScalesSalt = 0x7363616c6573ull;
constexpr uint64_t kViewsSalt = 0x6b767669657773ull;
constexpr uint64_t kPlaceSalt = 0x706c616365ull;

SplitMix64 stream(uint64_t layout_seed, uint64_t salt) { return SplitMix64(mix64(layout_seed ^ mix64(salt))); }

bool is_contiguous(Layout l) { return l == Layout::contiguous_bshd || l == Layout::contiguous_bhsd; }

// Block tables: sizes the cache and hands each request its physical blocks from a shuffled pool.
// With shared_prefix_blocks = k (paged layouts), request i > 0 takes its first
// min(k, its full context blocks, the donor's) blocks from the table of a donor j < i drawn from
// the placement stream, as prefix caching shares a common prefix; only the rest comes from the pool.
void assign_blocks(const Genotype& g, Case& c) {
  SplitMix64 rng = stream(g.layout_seed, kBlocksSalt);
  SplitMix64 place = stream(g.layout_seed, kPlaceSalt);
  const size_t n = g.requests.size();
  std::vector<int64_t> need(n);  // [requests] blocks each request needs from the pool
  int64_t block_size = g.block_size;
  // Context-parallel shards (context_parallel.h): a table spans the longest shard of its request
  // (rank 0's); the cache is one shard's blocks, then copies of it for the other ranks (below).
  const Shards shards{g.cp_input != CpInput::none ? g.cp_world_size : 1, g.cp_input != CpInput::none ? g.cp_interleave : 1};
  auto held = [&](const RequestGene& r) { return shards.longest(r.context_len + r.new_len); };
  std::vector<size_t> donor(n, 0);     // [requests] whose prefix blocks request i shares
  std::vector<int64_t> shared(n, 0);   // [requests] how many (0 = none)
  if (is_contiguous(g.layout)) {
    // One sequence per request: block = sequence, block_size = longest sequence + slack.
    int64_t longest = 0;
    for (const RequestGene& r : g.requests) longest = std::max(longest, held(r));
    block_size = std::max<int64_t>(1, longest + static_cast<int64_t>(rng.below(4)));
    std::fill(need.begin(), need.end(), 1);
  } else {
    for (size_t i = 0; i < n; ++i) {
      int64_t len = held(g.requests[i]);
      if (g.window_input != WindowInput::none) len = std::min<int64_t>(len, g.window_size);  // a ring: W slots at most
      need[i] = (len + block_size - 1) / block_size;
      if (g.shared_prefix_blocks <= 0 || i == 0) continue;
      donor[i] = static_cast<size_t>(place.below(i));
      shared[i] = std::min<int64_t>({g.shared_prefix_blocks, g.requests[i].context_len / block_size,
                                     g.requests[donor[i]].context_len / block_size});
      need[i] -= shared[i];
    }
  }
  const int64_t used = std::accumulate(need.begin(), need.end(), int64_t{0});
  const int64_t num_blocks = std::max<int64_t>(1, used + g.spare_blocks);

  // Fisher-Yates shuffle of the physical block ids: fragmented, out-of-order block tables.
  std::vector<int64_t> pool(static_cast<size_t>(num_blocks));  // [num_blocks] shuffled physical ids
  std::iota(pool.begin(), pool.end(), int64_t{0});
  for (int64_t i = num_blocks - 1; i > 0; --i)
    std::swap(pool[static_cast<size_t>(i)], pool[rng.below(static_cast<uint64_t>(i) + 1)]);
  // Irregular cases often put the very last block of the cache in some request's table.
  if (g.irregular && used > 0 && rng.percent(50)) {
    const auto last = std::find(pool.begin(), pool.end(), num_blocks - 1);
    std::iter_swap(last, pool.begin() + static_cast<int64_t>(rng.below(static_cast<uint64_t>(used))));
  }

  c.requests.clear();
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    Request r;
    r.context_len = g.requests[i].context_len;
    r.new_len = g.requests[i].new_len;
    if (shared[i] > 0) {  // the donor's leading blocks, entirely context of both
      const std::vector<int64_t>& prefix = c.requests[donor[i]].blocks;
      r.blocks.assign(prefix.begin(), prefix.begin() + shared[i]);
    }
    r.blocks.insert(r.blocks.end(), pool.begin() + static_cast<int64_t>(next), pool.begin() + static_cast<int64_t>(next + need[i]));
    next += static_cast<size_t>(need[i]);
    c.requests.push_back(std::move(r));
  }
  c.cache.num_blocks = num_blocks;
  c.cache.block_size = block_size;
  c.cache.num_blocks *= shards.world;  // shard r: blocks [r * num_blocks, (r + 1) * num_blocks)
  // The sink padding mode: block 0 holds the sink slot 0, which no request owns. Every physical id
  // moves up by one, so the rest of the case is what it is in the default mode.
  if (g.padding == PaddingMode::sink) {
    for (Request& r : c.requests)
      for (int64_t& b : r.blocks) ++b;
    ++c.cache.num_blocks;
  }
}

// scattered_positions: each request's new tokens go to new_len positions drawn without
// replacement from [context_len, context_len + new_len + h), in the drawn (random) row order, h
// (0..the slack of its last block or sequence) positions left as holes. The block tables are
// those of consecutive placement: holes take only slack the table already has.
void place_tokens(const Genotype& g, Case& c) {
  if (g.window_input != WindowInput::none) {
    // A ring's tokens are its consecutive positions; half the requests list them in a shuffled row
    // order, so that a kernel writing a token already outside the window after the one that
    // replaced it in the ring shows on an in-order emulator too.
    SplitMix64 place = stream(g.layout_seed, mix64(kPlaceSalt ^ 0x72696e67ull));  // "ring"
    for (Request& r : c.requests) {
      if (r.new_len < 2 || !place.percent(50)) continue;
      r.positions.resize(static_cast<size_t>(r.new_len));
      std::iota(r.positions.begin(), r.positions.end(), r.context_len);
      for (size_t i = r.positions.size() - 1; i > 0; --i) std::swap(r.positions[i], r.positions[place.below(i + 1)]);
    }
    return;
  }
  if (!g.scattered_positions) return;
  SplitMix64 place = stream(g.layout_seed, mix64(kPlaceSalt));
  const int64_t bs = c.cache.block_size;
  for (Request& r : c.requests) {
    if (r.new_len <= 0) continue;
    const int64_t end = r.context_len + r.new_len;
    const int64_t room = static_cast<int64_t>(r.blocks.size()) * bs - end;  // slack of the table
    const int64_t holes = static_cast<int64_t>(place.below(static_cast<uint64_t>(std::min(r.new_len, room)) + 1));
    std::vector<int64_t> range(static_cast<size_t>(r.new_len + holes));  // [new_len + holes] candidate positions
    std::iota(range.begin(), range.end(), r.context_len);
    for (size_t i = 0; i < static_cast<size_t>(r.new_len); ++i)  // partial Fisher-Yates: the first new_len drawn
      std::swap(range[i], range[i + place.below(range.size() - i)]);
    r.positions.assign(range.begin(), range.begin() + r.new_len);
  }
}

// The unit of a stride gap between elements `elem_bytes` wide: one element, or with
// stride_gap_bytes the elements of that many bytes (a power of two, as element sizes are).
int64_t gap_unit(const Genotype& g, int64_t elem_bytes) {
  elem_bytes = std::max<int64_t>(elem_bytes, 1);
  return g.stride_gap_bytes > elem_bytes ? g.stride_gap_bytes / elem_bytes : 1;
}

// Cache strides, K/V offsets and the cache buffer size. Gaps (0..3 gap units) between dims and
// tensors and a buffer tail only with gapped_strides; an odd K base only with misaligned_bases.
// (With both set, the draws are those of the former single `irregular` flag.)
// The strides of a [.., H, D] field in one of the layouts that hold one field per tensor.
CacheGeometry field_strides(Layout layout, int64_t H, int64_t D, int64_t bs, int64_t nb, const std::function<int64_t()>& gap) {
  CacheGeometry geo;
  geo.num_blocks = nb;
  geo.block_size = bs;
  if (layout == Layout::paged_hnd || layout == Layout::contiguous_bhsd) {  // [nb, H, bs, D]
    geo.stride_pos = D + gap();
    geo.stride_head = bs * geo.stride_pos + gap();
    geo.stride_block = H * geo.stride_head + gap();
  } else {  // [nb, bs, H, D]
    geo.stride_head = D + gap();
    geo.stride_pos = H * geo.stride_head + gap();
    geo.stride_block = bs * geo.stride_pos + gap();
  }
  return geo;
}

// The cache of a family other than kv (validate.cpp check_field_caches): K (or the latent entry),
// then for kv_split V with its own head dim and strides after a gap.
void lay_out_field_caches(const Genotype& g, SplitMix64& rng, Case& c) {
  const int64_t unit = gap_unit(g, dtype_size(g.cache_dtype));
  const std::function<int64_t()> gap = [&]() -> int64_t { return g.gapped_strides ? unit * static_cast<int64_t>(rng.below(4)) : 0; };
  const int64_t H = g.num_heads, bs = c.cache.block_size, nb = c.cache.num_blocks;
  c.cache = field_strides(g.layout, H, g.head_dim, bs, nb, gap);
  c.cache_k_offset = g.misaligned_bases ? 1 + 2 * static_cast<int64_t>(rng.below(4)) : 0;  // odd: misaligned base
  int64_t end = c.cache_k_offset + nb * c.cache.stride_block;
  c.cache_v_offset = 0;
  if (g.family == Family::kv_split) {
    c.value_head_dim = g.value_head_dim;
    c.value_cache = field_strides(g.layout, H, g.value_head_dim, bs, nb, gap);
    c.cache_v_offset = end + gap();
    end = c.cache_v_offset + nb * c.value_cache->stride_block;
  }
  c.cache_buffer_elems = end + (g.gapped_strides ? static_cast<int64_t>(rng.below(8)) : 0);
}

void lay_out_cache(const Genotype& g, Case& c) {
  SplitMix64 rng = stream(g.layout_seed, kCacheSalt);
  if (g.family != Family::kv) return lay_out_field_caches(g, rng, c);
  const int64_t unit = gap_unit(g, dtype_size(g.cache_dtype));
  auto gap = [&]() -> int64_t { return g.gapped_strides ? unit * static_cast<int64_t>(rng.below(4)) : 0; };
  const int64_t H = g.num_heads, D = g.head_dim, bs = c.cache.block_size, nb = c.cache.num_blocks;
  CacheGeometry& geo = c.cache;
  switch (g.layout) {
    case Layout::paged_nhd:
    case Layout::contiguous_bshd:  // [nb, bs, H, D]
      geo.stride_head = D + gap();
      geo.stride_pos = H * geo.stride_head + gap();
      geo.stride_block = bs * geo.stride_pos + gap();
      break;
    case Layout::paged_hnd:
    case Layout::contiguous_bhsd:  // [nb, H, bs, D]
      geo.stride_pos = D + gap();
      geo.stride_head = bs * geo.stride_pos + gap();
      geo.stride_block = H * geo.stride_head + gap();
      break;
    case Layout::packed_kv_nhd:  // [nb, 2, bs, H, D], K then V inside each block
      geo.stride_head = D;
      geo.stride_pos = H * D;
      geo.stride_block = 2 * bs * geo.stride_pos + gap();
      break;
    case Layout::packed_content_hnd:  // [nb, H, bs, 2D], K the first D of each row, V the last D
      geo.stride_pos = 2 * D + gap();
      geo.stride_head = bs * geo.stride_pos + gap();
      geo.stride_block = H * geo.stride_head + gap();
      break;
    case Layout::vllm_legacy:  // K [nb, H, D/x, bs, x], V [nb, H, D, bs]: dense within a head
      geo.stride_pos = c.xpack();
      geo.stride_head = D * bs + gap();
      geo.stride_block = H * geo.stride_head + gap();
      break;
  }
  c.cache_k_offset = g.misaligned_bases ? 1 + 2 * static_cast<int64_t>(rng.below(4)) : 0;  // odd: misaligned base
  int64_t end = 0;
  if (g.layout == Layout::packed_kv_nhd) {
    c.cache_v_offset = c.cache_k_offset + bs * geo.stride_pos;
    end = c.cache_k_offset + nb * geo.stride_block;
  } else if (g.layout == Layout::packed_content_hnd) {
    c.cache_v_offset = c.cache_k_offset + D;
    end = c.cache_k_offset + nb * geo.stride_block;
  } else {
    c.cache_v_offset = c.cache_k_offset + nb * geo.stride_block + gap();
    end = c.cache_v_offset + nb * geo.stride_block;
  }
  c.cache_buffer_elems = end + (g.gapped_strides ? static_cast<int64_t>(rng.below(8)) : 0);
}

// A quantised format's buffers (case/quant_fields.cpp): the cache in bytes, every row of a
// (token, head) `row` bytes wide (its codes; an inline format's codes and scale, padded to D + 4 or
// to 16 bytes; a ds_mla record; indexer_k's codes, its scales after each block's rows), laid out as
// the layout says; the scale cache (nvfp4, MX, asym) in elements of the scale dtype, one row of
// D / group scales (asym: a scale and a zero point) per (token, head). Gaps (0..3 units) and a tail
// only with gapped_strides, a base past 0 only with misaligned_bases; the unit is 4 bytes where
// fp32 scales sit among the codes, else 1. A swizzled NVFP4 scale cache is dense (its 4 x 4 tiles
// span whole rows).
void lay_out_format(const Genotype& g, Case& c) {
  SplitMix64 rng = stream(g.layout_seed, kCacheSalt);
  const QuantFormat f = g.quant_format;
  c.quant_format = f;
  c.quant_rules = g.quant_rules;
  const int64_t H = g.num_heads, D = g.head_dim, bs = c.cache.block_size, nb = c.cache.num_blocks;
  const int64_t unit = std::max<int64_t>(format_scales_in_cache(f) ? 4 : 1, g.stride_gap_bytes);
  const auto gap = [&]() -> int64_t { return g.gapped_strides ? unit * static_cast<int64_t>(rng.below(4)) : 0; };
  int64_t row = D * dtype_bits(format_code_dtype(f)) / 8;
  if (f == QuantFormat::fp8_inline || f == QuantFormat::int8_inline) row = rng.percent(50) ? D + 4 : (D + 4 + 15) / 16 * 16;
  if (f == QuantFormat::ds_mla) row = (D - g.rope_dim) + 4 * ((D - g.rope_dim) / 128) + 2 * g.rope_dim;
  CacheGeometry& geo = c.cache;
  if (f == QuantFormat::indexer_k) {  // [block: bs rows of D codes | bs * D/128 fp32 scales]
    geo.stride_pos = D;
    geo.stride_head = D;
    geo.stride_block = bs * (D + 4 * (D / 128)) + gap();
  } else {
    switch (g.layout) {
      case Layout::paged_hnd:
      case Layout::contiguous_bhsd:  // [nb, H, bs, row]
        geo.stride_pos = row + gap();
        geo.stride_head = bs * geo.stride_pos + gap();
        geo.stride_block = H * geo.stride_head + gap();
        break;
      case Layout::packed_kv_nhd:  // [nb, 2, bs, H, row]
        geo.stride_head = row;
        geo.stride_pos = H * row;
        geo.stride_block = 2 * bs * geo.stride_pos + gap();
        break;
      case Layout::packed_content_hnd:  // [nb, H, bs, 2 row]
        geo.stride_pos = 2 * row + gap();
        geo.stride_head = bs * geo.stride_pos + gap();
        geo.stride_block = H * geo.stride_head + gap();
        break;
      default:  // [nb, bs, H, row]
        geo.stride_head = row + gap();
        geo.stride_pos = H * geo.stride_head + gap();
        geo.stride_block = bs * geo.stride_pos + gap();
        break;
    }
  }
  c.cache_k_offset = g.misaligned_bases ? unit * (1 + static_cast<int64_t>(rng.below(4))) : 0;
  const bool has_value = g.family == Family::kv;
  int64_t end = c.cache_k_offset + nb * geo.stride_block;
  c.cache_v_offset = 0;
  if (has_value) {
    if (g.layout == Layout::packed_kv_nhd) {
      c.cache_v_offset = c.cache_k_offset + bs * geo.stride_pos;
    } else if (g.layout == Layout::packed_content_hnd) {
      c.cache_v_offset = c.cache_k_offset + row;
    } else {
      c.cache_v_offset = end + gap();
      end = c.cache_v_offset + nb * geo.stride_block;
    }
  }
  c.cache_buffer_elems = end + (g.gapped_strides ? unit * static_cast<int64_t>(rng.below(8)) : 0);

  c.scale_kind = g.scale_kind;
  c.scale_dist = g.scale_dist;
  if (format_scales_in_cache(f)) return;
  SplitMix64 srng = stream(g.layout_seed, kScalesSalt);
  const bool dense = f == QuantFormat::nvfp4 && g.quant_rules.scale_layout != ScaleLayout::linear;
  const auto sgap = [&]() -> int64_t { return g.gapped_strides && !dense ? static_cast<int64_t>(srng.below(4)) : 0; };
  const int64_t srow = format_has_zero(f) ? 2 : D / format_group(f, D);  // scale elements per (token, head)
  CacheGeometry& s = c.scale_cache;
  s.num_blocks = nb;
  s.block_size = bs;
  if (g.layout == Layout::paged_hnd || g.layout == Layout::contiguous_bhsd || g.layout == Layout::packed_content_hnd) {
    s.stride_pos = srow + sgap();
    s.stride_head = bs * s.stride_pos + sgap();
    s.stride_block = H * s.stride_head + sgap();
  } else {
    s.stride_head = srow + sgap();
    s.stride_pos = H * s.stride_head + sgap();
    s.stride_block = bs * s.stride_pos + sgap();
  }
  c.scale_k_offset = g.misaligned_bases && !dense ? 1 + static_cast<int64_t>(srng.below(4)) : 0;
  c.scale_v_offset = has_value ? c.scale_k_offset + nb * s.stride_block + sgap() : 0;
  c.scale_cache_elems = (has_value ? c.scale_v_offset : c.scale_k_offset) + nb * s.stride_block + (g.gapped_strides ? static_cast<int64_t>(srng.below(8)) : 0);
}

// The per_token_head scale caches: one fp32 per (block, pos, head), laid out like the KV cache
// without D: [nb, bs, H] for the NHD-like layouts (packed_kv_nhd included; its K and V scale caches
// are not interleaved), [nb, H, bs] for the HND-like ones. K's scale cache starts at
// scale_k_offset, V's after it; gaps (0..3) and a tail only with gapped_strides, an odd base only
// with misaligned_bases. Every other kind has no scale cache: all zero.
void lay_out_scales(const Genotype& g, Case& c) {
  c.scale_kind = g.scale_kind;
  c.scale_dist = g.scale_dist;
  if (g.scale_kind != ScaleKind::per_token_head) return;
  SplitMix64 rng = stream(g.layout_seed, kScalesSalt);
  auto gap = [&]() -> int64_t { return g.gapped_strides ? static_cast<int64_t>(rng.below(4)) : 0; };
  const int64_t H = g.num_heads, bs = c.cache.block_size, nb = c.cache.num_blocks;
  CacheGeometry& geo = c.scale_cache;
  geo.num_blocks = nb;
  geo.block_size = bs;
  switch (g.layout) {
    case Layout::paged_nhd:
    case Layout::contiguous_bshd:
    case Layout::packed_kv_nhd:  // [nb, bs, H]
      geo.stride_head = 1 + gap();
      geo.stride_pos = H * geo.stride_head + gap();
      geo.stride_block = bs * geo.stride_pos + gap();
      break;
    case Layout::paged_hnd:
    case Layout::contiguous_bhsd:
    case Layout::packed_content_hnd:
    case Layout::vllm_legacy:  // [nb, H, bs]
      geo.stride_pos = 1 + gap();
      geo.stride_head = bs * geo.stride_pos + gap();
      geo.stride_block = H * geo.stride_head + gap();
      break;
  }
  c.scale_k_offset = g.misaligned_bases ? 1 + 2 * static_cast<int64_t>(rng.below(4)) : 0;  // odd: misaligned base
  const bool has_value = g.family == Family::kv || g.family == Family::kv_split;
  c.scale_v_offset = has_value ? c.scale_k_offset + nb * geo.stride_block + gap() : 0;
  c.scale_cache_elems = (has_value ? c.scale_v_offset : c.scale_k_offset) + nb * geo.stride_block +
                        (g.gapped_strides ? static_cast<int64_t>(rng.below(8)) : 0);
}

// V as a tensor of its own for kv_views != alike: [T_in, H, D] rows starting past `end` (the end
// of K's region, or of the whole QKV buffer) with strides that differ from K's:
//   value_rows        head stride K's (D in a fused row), rows padded by 1..D + 3 elements;
//   value_heads       heads padded by 1..4 elements, rows by 0..3;
//   value_head_major  rows of D + 0..3 elements, heads T_in rows (+ 0..3) apart, so that the head
//                     stride is the larger one, as in a [H, T_in, D] tensor transposed.
// Paddings are in gap_unit()s (one element unless stride_gap_bytes says more).
// The token stride always differs from K's (nudged by one unit where the draws coincide), so a
// kernel that reads V with K's token stride reads the wrong row from t = 1 on. Returns V's end.
int64_t place_value(const Genotype& g, int64_t rows, int64_t end, Case& c) {
  SplitMix64 rng = stream(g.layout_seed, kViewsSalt);
  auto draw = [&](int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1)));
  };
  const int64_t H = g.num_heads, D = g.head_dim;
  const int64_t key_head = c.key.stride_head;  // D for a fused row
  InputView v;
  // V's base: 1..8 elements past `end` with misaligned_bases, else the next 16-byte boundary 0..8
  // elements past it (the input buffer itself is 16-byte aligned in every arena).
  const int64_t align = 16 / dtype_size(g.input_dtype);
  v.offset = g.misaligned_bases ? end + draw(1, 8) : (end + draw(0, 8) + align - 1) / align * align;
  const int64_t u = gap_unit(g, dtype_size(g.input_dtype));  // every padding in these units
  switch (g.kv_views) {
    case KvViews::alike:  // not called
    case KvViews::value_rows:
      v.stride_head = key_head;
      v.stride_token = H * key_head + u * draw(1, D + 3);
      if (v.stride_token == c.key.stride_token) v.stride_token += u;
      break;
    case KvViews::value_heads:
      v.stride_head = key_head + u * draw(1, 4);
      v.stride_token = H * v.stride_head + u * draw(0, 3);
      if (v.stride_token == c.key.stride_token) v.stride_token += u;
      break;
    case KvViews::value_head_major:
      v.stride_token = D + u * draw(0, 3);
      if (v.stride_token == c.key.stride_token) v.stride_token += u;
      v.stride_head = std::max<int64_t>(rows, 1) * v.stride_token + u * draw(0, 3);
      break;
  }
  c.value = v;
  // The element past V's last cell: offset + (rows - 1) * token + (H - 1) * head + D.
  if (rows == 0) return v.offset;
  return v.offset + (rows - 1) * v.stride_token + (H - 1) * v.stride_head + D;
}

// Key/value input views: a fused QKV projection [T_in, (H_q + 2 H) D] or separate [T_in, H, D]
// regions, with row/head gaps and a buffer tail with gapped_strides and an odd base with
// misaligned_bases (drawn in the order of the former `irregular` flag when both are set). With
// kv_views other than alike, V is a tensor of its own right after K's region (after the whole QKV
// buffer when fused) whose strides differ from K's, drawn from a stream of its own (place_value).
// The inputs of a family other than kv, as separate regions or (fused_qkv) slices of one row:
//   kv_split  [Q heads | K heads (D) | V heads (Dv) | gap] or K [T_in, H, D] then V [T_in, H, Dv];
//   k_only    [Q heads | K heads | gap] or K [T_in, H, D];
//   mla       one projection row [kv_c (D - rope_dim) | k_pe (rope_dim) | gap] (DeepSeek's kv_a_proj
//             output split in two), or kv_c [T_in, D - rope_dim] then k_pe [T_in, rope_dim].
void lay_out_field_inputs(const Genotype& g, int64_t rows, SplitMix64& rng, Case& c) {
  const int64_t unit = gap_unit(g, dtype_size(g.input_dtype));
  auto gap = [&]() -> int64_t { return g.gapped_strides ? unit * static_cast<int64_t>(rng.below(4)) : 0; };
  const int64_t H = g.num_heads, D = g.head_dim, Dv = g.family == Family::kv_split ? g.value_head_dim : 0;
  const int64_t base = g.misaligned_bases ? 1 + 2 * static_cast<int64_t>(rng.below(4)) : 0;
  c.value = {};
  c.rope = {};
  int64_t end = 0;
  if (g.family == Family::mla) {
    const int64_t Dc = D - g.rope_dim;
    if (g.fused_qkv) {
      const int64_t row = D + gap();
      c.key = {base, row, Dc};
      c.rope = {base + Dc, row, g.rope_dim};
      end = base + rows * row;
    } else {
      const int64_t key_row = Dc + gap();
      c.key = {base, key_row, key_row};
      const int64_t rope_base = base + rows * key_row + gap();
      const int64_t rope_row = g.rope_dim + gap();
      c.rope = {rope_base, rope_row, rope_row};
      end = rope_base + rows * rope_row;
    }
  } else if (g.fused_qkv) {
    const int64_t Hq = c.num_q_heads;
    const int64_t row = (Hq + H) * D + H * Dv + gap();
    c.key = {base + Hq * D, row, D};
    if (Dv > 0) c.value = {base + (Hq + H) * D, row, Dv};
    end = base + rows * row;
  } else {
    const int64_t head = D + gap();
    const int64_t row = H * head + gap();
    c.key = {base, row, head};
    end = base + rows * row;
    if (Dv > 0) {
      const int64_t v_head = Dv + gap();
      const int64_t v_row = H * v_head + gap();
      c.value = {end + gap(), v_row, v_head};
      end = c.value.offset + rows * v_row;
    }
  }
  c.input_buffer_elems = end + (g.gapped_strides ? static_cast<int64_t>(rng.below(8)) : 0);
}

void lay_out_inputs(const Genotype& g, int64_t num_slots, Case& c) {
  SplitMix64 rng = stream(g.layout_seed, kInputSalt);
  if (g.family != Family::kv) {
    c.num_input_rows = num_slots + g.extra_input_rows;
    return lay_out_field_inputs(g, c.num_input_rows, rng, c);
  }
  const int64_t unit = gap_unit(g, dtype_size(g.input_dtype));
  auto gap = [&]() -> int64_t { return g.gapped_strides ? unit * static_cast<int64_t>(rng.below(4)) : 0; };
  const int64_t H = g.num_heads, D = g.head_dim;
  const int64_t rows = num_slots + g.extra_input_rows;
  c.num_input_rows = rows;
  const int64_t base = g.misaligned_bases ? 1 + 2 * static_cast<int64_t>(rng.below(4)) : 0;
  int64_t key_end = 0, end = 0;  // past K's region (the whole QKV buffer when fused), past both
  if (g.fused_qkv) {
    const int64_t Hq = c.num_q_heads;
    const int64_t row = (Hq + 2 * H) * D + gap();  // [Q heads | K heads | V heads | gap]
    c.key = {base + Hq * D, row, D};
    c.value = {base + (Hq + H) * D, row, D};
    key_end = end = base + rows * row;
  } else {
    const int64_t head = D + gap();
    const int64_t row = H * head + gap();
    c.key = {base, row, head};
    key_end = base + rows * row;
    c.value = {key_end + gap(), row, head};
    end = c.value.offset + rows * row;
  }
  if (g.kv_views != KvViews::alike) end = place_value(g, rows, key_end, c);
  c.input_buffer_elems = end + (g.gapped_strides ? static_cast<int64_t>(rng.below(8)) : 0);
}

// slot_mapping: every new token's slot in request order (each request's in its positions' order), with padding and invalid entries
// inserted at pseudo-random positions and tail padding appended.
std::vector<int64_t> map_slots(const Genotype& g, const Case& c) {
  SplitMix64 rng = stream(g.layout_seed, kSlotsSalt);
  const int64_t bs = c.cache.block_size, capacity = c.capacity();
  const bool i32 = g.slot_dtype == IndexType::i32;
  const int64_t type_min = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  const int64_t type_max = i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  const int64_t two31 = int64_t{1} << 31, two32 = int64_t{1} << 32;

  std::vector<int64_t> slots;  // [T] flat slot per row
  const Window w = window_of(c);
  const Shards shards = shards_of(c);
  for (const Request& r : c.requests)
    for (const int64_t p : new_positions(r)) {
      if (c.has_cp()) {  // the slot of the token's local position on the rank that holds it
        const int64_t lp = shards.local(p);
        slots.push_back(r.blocks[static_cast<size_t>(lp / bs)] * bs + lp % bs);
        continue;
      }
      if (!c.has_window()) {
        slots.push_back(r.blocks[static_cast<size_t>(p / bs)] * bs + p % bs);
        continue;
      }
      // A ring: the token's ring slot; a token already outside the window is -1 when the caller
      // applies the window (window.h).
      const int64_t i = w.index(p);
      const bool skip = c.window_input == WindowInput::slot_mapping && !w.kept(p, r.context_len + r.new_len);
      slots.push_back(skip ? -1 : r.blocks[static_cast<size_t>(i / bs)] * bs + i % bs);
    }

  // Padding: -1; irregular cases also -2, -capacity, the type's minimum and (i64) -2^32 + s, which
  // a kernel narrowing slots to 32 bits reads as the valid slot s.
  auto padding = [&]() -> int64_t {
    if (g.padding == PaddingMode::sink) return 0;  // the sink slot, whatever `irregular` says
    if (!g.irregular) return -1;
    switch (rng.below(i32 ? 4 : 5)) {
      case 0: return -1;
      case 1: return -2;
      case 2: return -capacity;
      case 3: return type_min;
      default: return -two32 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(capacity)));
    }
  };
  // Invalid: capacity, capacity + small, the type's maximum, and for i64 2^31 + s and 2^32 + s
  // (s a valid slot: a kernel narrowing to 32 bits writes to s, or to a negative slot). Irregular
  // i64 cases always start with 2^32 + s.
  auto invalid = [&](bool first) -> int64_t {
    const int64_t s = static_cast<int64_t>(rng.below(static_cast<uint64_t>(capacity)));
    if (!i32 && g.irregular && first) return two32 + s;
    switch (rng.below(i32 ? 4 : 6)) {
      case 0: return capacity;
      case 1: return capacity + 1 + static_cast<int64_t>(rng.below(7));
      case 2: return type_max;
      case 3:
        if (i32) return capacity + static_cast<int64_t>(rng.below(static_cast<uint64_t>(type_max - capacity) + 1));
        return two31 + s;
      case 4: return two32 + s;
      default: return std::max(capacity, two31 - 1 - s);  // just below 2^31
    }
  };
  auto insert_at_random = [&](int64_t v) {
    slots.insert(slots.begin() + static_cast<int64_t>(rng.below(slots.size() + 1)), v);
  };
  if (g.addressing == Addressing::csr) return slots;  // a CSR call has no padding and no invalid rows
  for (int32_t i = 0; i < g.interleaved_padding; ++i) insert_at_random(padding());
  for (int32_t i = 0; i < g.invalid_slots; ++i) insert_at_random(invalid(i == 0));
  for (int32_t i = 0; i < g.tail_padding; ++i) slots.push_back(padding());
  return slots;
}

}  // namespace

Case materialize(const Genotype& g) {
  Case c;
  c.num_heads = g.num_heads;
  c.head_dim = g.head_dim;
  c.num_q_heads = g.fused_qkv && g.family != Family::mla ? g.num_heads * g.gqa_ratio : 0;  // an MLA row has no Q
  c.input_dtype = g.input_dtype;
  c.cache_dtype = g.cache_dtype;
  // CSR arrays are int32, and so are a ring's positions beside slot_mapping and sharded slot mappings.
  c.slot_dtype = g.addressing == Addressing::csr || g.window_input == WindowInput::positions || g.cp_input != CpInput::none
                     ? IndexType::i32
                     : g.slot_dtype;
  c.layout = g.layout;
  c.family = g.family;
  c.rope_dim = g.family == Family::mla ? g.rope_dim : 0;
  c.padding = g.padding;
  c.addressing = g.addressing;
  if (g.window_input != WindowInput::none) {
    c.window_input = g.window_input;
    c.window_size = g.window_size;
    c.window_sinks = g.window_sinks;
  }
  if (g.cp_input != CpInput::none) {
    c.cp_input = g.cp_input;
    c.cp_world_size = g.cp_world_size;
    c.cp_interleave = g.cp_interleave;
  }

  assign_blocks(g, c);
  place_tokens(g, c);
  if (g.quant_format != QuantFormat::none) {
    lay_out_format(g, c);
  } else {
    lay_out_cache(g, c);
    lay_out_scales(g, c);
  }
  c.slot_mapping = map_slots(g, c);
  lay_out_inputs(g, c.num_slots(), c);

  c.dist = g.dist;
  c.payload_seed = mix64(g.layout_seed ^ kPayloadSalt);
  c.genotype = g;
  return c;
}

}  // namespace kvf
