// gen_properties.cpp — properties of the generator, materialize() and the shrinker over random
// genotypes of the default, smoke and quant profiles (RapidCheck, 100 cases each by default).
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='*RapidCheck*:Generate*:Shrink*:Materialize*'
//   RC_PARAMS="seed=1 max_success=1000" ./build/tests/kvfuzz_gen_tests
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "case/placement.h"
#include "case/validate.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/shrink.h"

namespace kvf {
namespace {

const Profile& smoke() {
  static const Profile p = load_profile(std::string(KVFUZZ_SOURCE_DIR) + "/configs/smoke.json");
  return p;
}

const Profile& quant() {
  static const Profile p = load_profile(std::string(KVFUZZ_SOURCE_DIR) + "/configs/quant.json");
  return p;
}

std::string problems(const Case& c) {
  std::string s;
  for (const ValidationProblem& p : validate(c)) s += p.json_path + ": " + p.message + "\n";
  return s;
}

bool same_view(const InputView& a, const InputView& b) {
  return a.offset == b.offset && a.stride_token == b.stride_token && a.stride_head == b.stride_head;
}

// Field-by-field equality of two materialised cases (Case has no operator==).
bool same_case(const Case& a, const Case& b) {
  bool same = a.num_heads == b.num_heads && a.head_dim == b.head_dim && a.num_q_heads == b.num_q_heads &&
              a.input_dtype == b.input_dtype && a.cache_dtype == b.cache_dtype && a.slot_dtype == b.slot_dtype &&
              a.layout == b.layout && a.cache.num_blocks == b.cache.num_blocks &&
              a.cache.block_size == b.cache.block_size && a.cache.stride_block == b.cache.stride_block &&
              a.cache.stride_pos == b.cache.stride_pos && a.cache.stride_head == b.cache.stride_head &&
              a.cache_k_offset == b.cache_k_offset && a.cache_v_offset == b.cache_v_offset &&
              a.cache_buffer_elems == b.cache_buffer_elems && a.scale_kind == b.scale_kind &&
              a.scale_dist == b.scale_dist && a.scale_cache.num_blocks == b.scale_cache.num_blocks &&
              a.scale_cache.block_size == b.scale_cache.block_size &&
              a.scale_cache.stride_block == b.scale_cache.stride_block &&
              a.scale_cache.stride_pos == b.scale_cache.stride_pos &&
              a.scale_cache.stride_head == b.scale_cache.stride_head && a.scale_k_offset == b.scale_k_offset &&
              a.scale_v_offset == b.scale_v_offset && a.scale_cache_elems == b.scale_cache_elems &&
              a.num_input_rows == b.num_input_rows &&
              a.input_buffer_elems == b.input_buffer_elems && same_view(a.key, b.key) &&
              same_view(a.value, b.value) && a.slot_mapping == b.slot_mapping && a.dist == b.dist &&
              a.payload_seed == b.payload_seed && a.requests.size() == b.requests.size() &&
              a.genotype == b.genotype;
  for (size_t i = 0; same && i < a.requests.size(); ++i)
    same = a.requests[i].context_len == b.requests[i].context_len && a.requests[i].new_len == b.requests[i].new_len &&
           a.requests[i].blocks == b.requests[i].blocks && a.requests[i].positions == b.requests[i].positions;
  return same;
}

RC_GTEST_PROP(Generate, defaultGenotypesMaterialiseToValidCases, ()) {
  const Genotype g = *gen_genotype(default_profile());
  const Case c = materialize(g);
  RC_ASSERT(problems(c) == "");
  RC_ASSERT(!g.requests.empty());
}

RC_GTEST_PROP(Generate, smokeGenotypesMaterialiseToValidCases, ()) {
  const Genotype g = *gen_genotype(smoke());
  RC_ASSERT(problems(materialize(g)) == "");
}

RC_GTEST_PROP(Generate, quantGenotypesMaterialiseToValidQuantisedCases, ()) {
  const Genotype g = *gen_genotype(quant());
  const Case c = materialize(g);
  RC_ASSERT(problems(c) == "");
  RC_ASSERT(is_quantized(c.cache_dtype));
  RC_ASSERT(c.scale_kind != ScaleKind::none);
  RC_ASSERT((c.scale_cache_elems > 0) == (c.scale_kind == ScaleKind::per_token_head));
}

// scale_kind is none exactly for float caches, and scale_dist is unit where there are no static
// scales, in every profile.
RC_GTEST_PROP(Generate, drawsScalesExactlyForQuantisedCaches, ()) {
  const Profile d = default_profile();
  for (const Profile* p : {&d, &smoke(), &quant()}) {
    const Genotype g = *gen_genotype(*p);
    RC_ASSERT(!is_quantized(g.input_dtype));
    RC_ASSERT(is_quantized(g.cache_dtype) == (g.scale_kind != ScaleKind::none));
    if (g.scale_kind == ScaleKind::none || g.scale_kind == ScaleKind::per_token_head)
      RC_ASSERT(g.scale_dist == ScaleDist::unit);
  }
}

RC_GTEST_PROP(Generate, casesStayWithinTheElementBudget, ()) {
  const Profile& p = default_profile();
  const Genotype g = *gen_genotype(p);
  const Case c = materialize(g);
  const int64_t per_slot = int64_t{c.num_heads} * c.head_dim;
  int64_t new_tokens = 0;
  for (const RequestGene& r : g.requests) new_tokens += r.new_len;
  // New tokens within the budget; the cache (with spare blocks and slack) within twice it.
  RC_ASSERT(new_tokens * per_slot <= p.max_elements_per_case);
  RC_ASSERT(c.capacity() * per_slot <= p.max_elements_per_case * 2);
}

RC_GTEST_PROP(Generate, generateCaseIsAFunctionOfProfileSeedAndIndex, (uint64_t seed)) {
  const int64_t index = *rc::gen::inRange<int64_t>(0, 1'000'000);
  const Genotype a = generate_case(smoke(), seed, index);
  const Genotype b = generate_case(smoke(), seed, index);
  RC_ASSERT(a == b);
  RC_ASSERT(problems(materialize(a)) == "");
}

// Coverage of the campaign's case source (deterministic: fixed seed, fixed indices).
TEST(GenerateCoverage, quantProfileCoversEveryDTypeScaleKindAndScaleDist) {
  std::set<std::pair<DType, ScaleKind>> pairs;
  std::set<ScaleDist> static_dists;
  std::set<ValueDist> dists;
  for (int64_t i = 0; i < 1000; ++i) {
    const Genotype g = generate_case(quant(), 7, i);
    ASSERT_TRUE(is_quantized(g.cache_dtype)) << i;
    pairs.insert({g.cache_dtype, g.scale_kind});
    if (g.scale_kind != ScaleKind::per_token_head) static_dists.insert(g.scale_dist);
    dists.insert(g.dist);
  }
  EXPECT_EQ(pairs.size(), 3u * 4u);  // fp8_e4m3, fp8_e5m2, int8 x per_tensor, per_head, per_block, per_token_head
  EXPECT_EQ(static_dists.size(), 4u);
  EXPECT_TRUE(dists.count(ValueDist::ties));
}

TEST(GenerateCoverage, defaultProfileQuantisesAboutItsQuantPercent) {
  const Profile& p = default_profile();
  int quantised = 0, ties = 0;
  std::set<DType> dtypes;
  std::set<ScaleKind> kinds;
  for (int64_t i = 0; i < 2000; ++i) {
    const Genotype g = generate_case(p, 11, i);
    if (is_quantized(g.cache_dtype)) ++quantised;
    ties += g.dist == ValueDist::ties;
    dtypes.insert(g.cache_dtype);
    kinds.insert(g.scale_kind);
  }
  EXPECT_NEAR(quantised / 2000.0, p.quant_percent / 100.0, 0.04);
  EXPECT_EQ(dtypes.size(), 6u);
  EXPECT_EQ(kinds.size(), 5u);  // none and the four quantised kinds
  EXPECT_GT(ties, 100);
}

// The blind spots of the single `irregular` flag: K and V views always alike (0 of 3000 default
// cases differed), padded strides only with odd bases. Counted on materialised cases, not genes.
TEST(GenerateCoverage, defaultProfileDrawsDistinctKvViewsAndGapsWithAlignedBases) {
  const Profile& p = default_profile();
  const int n = 2000;
  int token_differs = 0, head_differs = 0, head_major = 0, gaps_aligned = 0, odd_dense = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Case c = materialize(generate_case(p, 13, i));
    token_differs += c.key.stride_token != c.value.stride_token;
    head_differs += c.num_heads > 1 && c.key.stride_head != c.value.stride_head;
    head_major += c.num_heads > 1 && c.value.stride_head > c.value.stride_token;
    const bool aligned = c.cache_k_offset == 0 && c.key.offset % 2 == 0;
    const bool gapped_cache = c.cache.stride_head > c.head_dim && c.layout == Layout::paged_nhd;
    gaps_aligned += aligned && gapped_cache;
    odd_dense += c.cache_k_offset % 2 == 1 && c.cache.stride_head == c.head_dim && c.layout == Layout::paged_nhd;
  }
  int distinct_weight = 0, total_weight = 0;
  for (size_t i = 0; i < p.kv_views.values.size(); ++i) {
    total_weight += p.kv_views.weights[i];
    if (p.kv_views.values[i] != KvViews::alike) distinct_weight += p.kv_views.weights[i];
  }
  EXPECT_NEAR(token_differs / double(n), distinct_weight / double(total_weight), 0.04);
  EXPECT_GT(head_differs, n / 20);
  EXPECT_GT(head_major, n / 50);
  EXPECT_GT(gaps_aligned, n / 50);  // paged_nhd with a head gap: about 4/11 * 3/4 * 1/4 * 1/4 of cases
  EXPECT_GT(odd_dense, n / 50);
}

RC_GTEST_PROP(Materialize, isDeterministic, ()) {
  const Genotype g = *gen_genotype(default_profile());
  RC_ASSERT(same_case(materialize(g), materialize(g)));
}

RC_GTEST_PROP(Shrink, everyCandidateIsValidDifferentAndSimpler, ()) {
  for (const Profile* p : {&smoke(), &quant()}) {
    const Genotype g = *gen_genotype(*p);
    for (const Genotype& c : shrink_genotype(g, *p)) {
      RC_ASSERT(!(c == g));
      RC_ASSERT(simpler_than(c, g, *p));
      RC_ASSERT(!simpler_than(g, c, *p));
      RC_ASSERT(!c.requests.empty());
      RC_ASSERT(problems(materialize(c)) == "");
    }
  }
}

// A quantised case shrinks within its cache dtype: the failure may be in that format's conversion.
RC_GTEST_PROP(Shrink, keepsTheCacheDTypeOfAQuantisedCase, ()) {
  const Profile& p = quant();
  const Genotype g = *gen_genotype(p);
  for (const Genotype& c : shrink_genotype(g, p)) {
    RC_ASSERT(c.cache_dtype == g.cache_dtype);
    RC_ASSERT(c.scale_kind != ScaleKind::none);
  }
}

// Planted quantisation bug: any int8 cache fails. The descent keeps int8 and reaches per-tensor
// unit scales with everything else simplest.
RC_GTEST_PROP(Shrink, reducesAQuantisedFailureToPerTensorUnitScales, ()) {
  const Profile& p = quant();
  Genotype g = *gen_genotype(p);
  g.cache_dtype = DType::int8;
  auto fails = [](const Genotype& x) { return x.cache_dtype == DType::int8; };
  const Genotype m = shrink_to_minimal(g, p, fails, nullptr, 1'000'000);
  RC_ASSERT(m.cache_dtype == DType::int8);
  RC_ASSERT(m.scale_kind == ScaleKind::per_tensor && m.scale_dist == ScaleDist::unit);
  RC_ASSERT(m.input_dtype == p.input_dtypes.values[0]);
  RC_ASSERT(m.requests.size() == 1u && m.requests[0].context_len == 0 && m.requests[0].new_len == 0);
  RC_ASSERT(m.dist == ValueDist::finite && !m.irregular && m.layout == Layout::paged_nhd);
  RC_ASSERT(!m.gapped_strides && !m.misaligned_bases && m.kv_views == KvViews::alike);
  RC_ASSERT(problems(materialize(m)) == "");
}

// Planted bug: a paged append crossing a block boundary. From any failing genotype the descent
// ends at one request crossing the boundary by exactly one token, everything else simplest.
RC_GTEST_PROP(Shrink, findsTheMinimumOfAPlantedBlockBoundaryBug, ()) {
  const Profile& p = default_profile();
  Genotype g = *gen_genotype(p);
  g.layout = Layout::paged_nhd;
  const int64_t bs = g.block_size;
  // Plant one request that crosses a boundary: context ends one slot before a block end.
  const int64_t k = *rc::gen::inRange<int64_t>(0, 3);
  g.requests.insert(g.requests.begin() + static_cast<int64_t>(g.requests.size() / 2),
                    RequestGene{k * bs + bs - 1, *rc::gen::inRange<int64_t>(2, 40)});
  auto fails = [](const Genotype& x) {
    if (x.layout != Layout::paged_nhd) return false;
    for (const RequestGene& r : x.requests)
      if (r.context_len % x.block_size + r.new_len > x.block_size) return true;
    return false;
  };
  RC_ASSERT(fails(g));
  ShrinkStats stats;
  const Genotype m = shrink_to_minimal(g, p, fails, &stats, 1'000'000);
  RC_ASSERT(fails(m));
  RC_ASSERT(m.requests.size() == 1u);
  const RequestGene r = m.requests[0];
  RC_ASSERT(r.context_len < m.block_size);
  RC_ASSERT(r.context_len + r.new_len == m.block_size + 1);
  // Locally minimal: no candidate still fails.
  for (const Genotype& c : shrink_genotype(m, p)) RC_ASSERT(!fails(c));
  // Every field the bug does not depend on is at its simplest.
  RC_ASSERT(m.num_heads == p.num_heads.values[0]);
  RC_ASSERT(m.head_dim == p.head_dims.values[0]);
  RC_ASSERT(!m.fused_qkv && m.gqa_ratio == p.gqa_ratios.values[0]);
  RC_ASSERT(m.input_dtype == p.input_dtypes.values[0]);
  if (is_quantized(g.cache_dtype)) {  // kept, with the simplest scales
    RC_ASSERT(m.cache_dtype == g.cache_dtype);
    RC_ASSERT(m.scale_kind == ScaleKind::per_tensor && m.scale_dist == ScaleDist::unit);
  } else {
    RC_ASSERT(m.cache_dtype == m.input_dtype && m.scale_kind == ScaleKind::none);
  }
  RC_ASSERT(m.slot_dtype == IndexType::i64 && m.dist == ValueDist::finite && !m.irregular);
  RC_ASSERT(!m.gapped_strides && !m.misaligned_bases && m.kv_views == KvViews::alike);
  RC_ASSERT(m.tail_padding + m.interleaved_padding + m.invalid_slots + m.extra_input_rows + m.spare_blocks == 0);
  RC_ASSERT(m.layout_seed == g.layout_seed);
}

// Planted bug: V read with K's token stride (the mutant v-read-with-k-token-stride) shows exactly
// when the materialised views' token strides differ and some valid row t >= 1 is appended. The
// descent keeps V distinct but reaches its simplest form (value_rows), at most two tokens, dense
// strides, aligned bases and separate K/V inputs.
RC_GTEST_PROP(Shrink, keepsDistinctKvViewsAtTheirSimplestForAVReadWithKStride, ()) {
  const Profile& p = default_profile();
  Genotype g = *gen_genotype(p);
  g.kv_views = *rc::gen::element(KvViews::value_rows, KvViews::value_heads, KvViews::value_head_major);
  g.requests.push_back(RequestGene{0, 2});
  auto fails = [](const Genotype& x) {
    const Case c = materialize(x);
    if (c.key.stride_token == c.value.stride_token) return false;
    for (size_t t = 1; t < c.slot_mapping.size(); ++t)
      if (c.slot_mapping[t] >= 0 && c.slot_mapping[t] < c.capacity()) return true;
    return false;
  };
  RC_ASSERT(fails(g));
  const Genotype m = shrink_to_minimal(g, p, fails, nullptr, 1'000'000);
  RC_ASSERT(fails(m));
  RC_ASSERT(m.kv_views == KvViews::value_rows);
  // At most two valid rows (one at t >= 1); padding may stand in for the first. No context.
  int64_t new_tokens = 0;
  for (const RequestGene& r : m.requests) {
    RC_ASSERT(r.context_len == 0);
    new_tokens += r.new_len;
  }
  RC_ASSERT(new_tokens <= 2);
  for (const Genotype& c : shrink_genotype(m, p)) RC_ASSERT(!fails(c));  // locally minimal
  // (irregular may stay: its odd padding values take draws that move where padding rows land.)
  RC_ASSERT(!m.gapped_strides && !m.misaligned_bases && !m.fused_qkv);
  RC_ASSERT(problems(materialize(m)) == "");
}

// Distinct views: V's token stride differs from K's, value_heads also has its own head stride,
// value_head_major puts heads further apart than tokens; V lies past K (past the whole QKV
// buffer when fused), so the views are disjoint.
RC_GTEST_PROP(Materialize, distinctKvViewsHaveTheirOwnStridesPastTheKeyRegion, ()) {
  Genotype g = *gen_genotype(default_profile());
  g.kv_views = *rc::gen::element(KvViews::value_rows, KvViews::value_heads, KvViews::value_head_major);
  const Case c = materialize(g);
  RC_ASSERT(problems(c) == "");
  RC_ASSERT(c.value.stride_token != c.key.stride_token);
  if (c.num_input_rows > 0) {  // past K's last cell
    const int64_t key_last = c.key.offset + (c.num_input_rows - 1) * c.key.stride_token +
                             (c.num_heads - 1) * c.key.stride_head + c.head_dim - 1;
    RC_ASSERT(c.value.offset > key_last);
  }
  if (g.kv_views == KvViews::value_heads) RC_ASSERT(c.value.stride_head > c.key.stride_head);
  if (g.kv_views == KvViews::value_head_major && c.num_input_rows > 1) RC_ASSERT(c.value.stride_head > c.value.stride_token);
  // Only V moves: K's view and every other concern are those of the alike twin.
  Genotype alike = g;
  alike.kv_views = KvViews::alike;
  const Case a = materialize(alike);
  RC_ASSERT(same_view(a.key, c.key));
  RC_ASSERT(a.slot_mapping == c.slot_mapping && a.cache_k_offset == c.cache_k_offset &&
            a.cache.stride_block == c.cache.stride_block && a.payload_seed == c.payload_seed);
}

// Gapped strides and misaligned bases are separate: gaps alone keep every base aligned, odd bases
// alone keep every stride dense.
RC_GTEST_PROP(Materialize, gapsAndOddBasesComeOnlyWithTheirOwnFlag, ()) {
  Genotype g = *gen_genotype(default_profile());
  g.kv_views = KvViews::alike;
  g.gapped_strides = *rc::gen::arbitrary<bool>();
  g.misaligned_bases = !g.gapped_strides;
  const Case c = materialize(g);
  RC_ASSERT(problems(c) == "");
  const int64_t H = c.num_heads, D = c.head_dim;
  if (!g.misaligned_bases) {
    RC_ASSERT(c.cache_k_offset == 0 && c.scale_k_offset == 0);
    RC_ASSERT(c.key.offset == (g.fused_qkv ? int64_t{c.num_q_heads} * D : 0));
  } else {
    RC_ASSERT(c.cache_k_offset % 2 == 1 && c.key.offset % 2 == (g.fused_qkv ? (1 + c.num_q_heads * D) % 2 : 1));
  }
  if (!g.gapped_strides) {
    const int64_t row = g.fused_qkv ? (int64_t{c.num_q_heads} + 2 * H) * D : H * D;
    RC_ASSERT(c.key.stride_head == D && c.key.stride_token == row);
    if (g.layout == Layout::paged_nhd || g.layout == Layout::contiguous_bshd) {
      RC_ASSERT(c.cache.stride_head == D && c.cache.stride_pos == H * D);
      RC_ASSERT(c.cache.stride_block == c.cache.block_size * H * D);
    }
  }
}

// The default profile with both placement genes drawn in every case (configs/placement.json).
const Profile& placement() {
  static const Profile p = load_profile(std::string(KVFUZZ_SOURCE_DIR) + "/configs/placement.json");
  return p;
}

// Scattered positions are the request's own unwritten positions, each once, inside the table the
// consecutive placement would have; every shared block is full context of each request holding it.
RC_GTEST_PROP(Materialize, placesScatteredTokensInTheirOwnBlocksAndSharesOnlyFullContextBlocks, ()) {
  const Genotype g = *gen_genotype(placement());
  const Case c = materialize(g);
  RC_ASSERT(problems(c) == "");
  const int64_t bs = c.cache.block_size;
  for (const Request& r : c.requests) {
    std::vector<int64_t> p = new_positions(r);
    RC_ASSERT(static_cast<int64_t>(p.size()) == r.new_len);
    std::sort(p.begin(), p.end());
    RC_ASSERT(std::adjacent_find(p.begin(), p.end()) == p.end());
    for (const int64_t x : p) RC_ASSERT(x >= r.context_len && x < static_cast<int64_t>(r.blocks.size()) * bs);
    const bool contiguous = c.layout == Layout::contiguous_bshd || c.layout == Layout::contiguous_bhsd;  // one sequence each
    RC_ASSERT(static_cast<int64_t>(r.blocks.size()) == (contiguous ? 1 : (r.context_len + r.new_len + bs - 1) / bs));
    if (!g.scattered_positions) RC_ASSERT(r.positions.empty());
  }
  for (const auto& [block, owners] : shared_blocks(c)) {
    RC_ASSERT(g.shared_prefix_blocks > 0 && owners.size() >= 2u);
    for (const int64_t o : owners) {
      const Request& r = c.requests[static_cast<size_t>(o)];
      const auto at = std::find(r.blocks.begin(), r.blocks.end(), block) - r.blocks.begin();
      RC_ASSERT((at + 1) * bs <= r.context_len);
      RC_ASSERT(at < g.shared_prefix_blocks);
    }
  }
}

// Placement shrinks towards today's: consecutive positions and no shared block are candidates, and
// a genotype without the genes materialises exactly as before them (same slots, no positions).
RC_GTEST_PROP(Shrink, movesTowardsConsecutiveUnsharedPlacement, ()) {
  Genotype g = *gen_genotype(placement());
  g.scattered_positions = true;
  g.shared_prefix_blocks = 2;
  const auto candidates = shrink_genotype(g, placement());
  Genotype plain = g;
  plain.scattered_positions = false;
  RC_ASSERT(std::find(candidates.begin(), candidates.end(), plain) != candidates.end());
  plain = g;
  plain.shared_prefix_blocks = 0;
  RC_ASSERT(std::find(candidates.begin(), candidates.end(), plain) != candidates.end());
  plain.scattered_positions = false;
  const Case c = materialize(plain);
  for (const Request& r : c.requests) RC_ASSERT(r.positions.empty());
  RC_ASSERT(shared_blocks(c).empty());
}

}  // namespace
}  // namespace kvf
