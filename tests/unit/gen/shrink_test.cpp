// shrink_test.cpp — shrink_genotype() candidates on hand-picked genotypes, and the greedy descent
// reaching the true minimum of a planted block-boundary bug.
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='Shrink*'
#include <gtest/gtest.h>

#include "gen/profile.h"
#include "gen/shrink.h"

namespace kvf {
namespace {

// Planted bug: a paged append that crosses a block boundary with blocks of 8 slots or more.
bool crosses_block(const Genotype& g) {
  if (g.layout != Layout::paged_nhd || g.block_size < 8) return false;
  for (const RequestGene& r : g.requests)
    if (r.context_len % g.block_size + r.new_len > g.block_size) return true;
  return false;
}

Genotype busy_genotype() {
  Genotype g;
  g.layout = Layout::paged_nhd;
  g.block_size = 32;
  g.num_heads = 13;
  g.head_dim = 100;
  g.gqa_ratio = 4;
  g.fused_qkv = true;
  g.input_dtype = DType::bf16;
  g.cache_dtype = DType::f32;
  g.slot_dtype = IndexType::i32;
  g.requests = {{0, 1}, {100, 40}, {7, 0}, {3, 1}};
  g.tail_padding = 3;
  g.interleaved_padding = 2;
  g.invalid_slots = 2;
  g.extra_input_rows = 1;
  g.spare_blocks = 4;
  g.irregular = g.gapped_strides = g.misaligned_bases = true;
  g.kv_views = KvViews::value_head_major;
  g.dist = ValueDist::special;
  g.layout_seed = 99;
  return g;
}

TEST(Shrink, candidatesStartByDroppingRequests) {
  const Genotype g = busy_genotype();
  const auto cands = shrink_genotype(g, default_profile());
  ASSERT_FALSE(cands.empty());
  EXPECT_EQ(cands[0].requests.size(), 1u);
  for (const Genotype& c : cands) {
    EXPECT_FALSE(c == g);
    EXPECT_TRUE(simpler_than(c, g, default_profile()));
    EXPECT_FALSE(c.requests.empty());
  }
}

TEST(Shrink, theSimplestGenotypeHasNoCandidates) {
  const Profile p = default_profile();
  Genotype g;
  g.block_size = p.block_sizes.values[0];
  g.num_heads = p.num_heads.values[0];
  g.head_dim = p.head_dims.values[0];
  g.gqa_ratio = p.gqa_ratios.values[0];
  g.input_dtype = g.cache_dtype = p.input_dtypes.values[0];
  g.requests = {{0, 0}};
  EXPECT_TRUE(shrink_genotype(g, p).empty());
}

TEST(Shrink, valuesOutsideTheProfileMoveTowardsOne) {
  Genotype g = busy_genotype();
  g.head_dim = 1000;  // not in the default list
  bool saw_half = false;
  for (const Genotype& c : shrink_genotype(g, default_profile())) saw_half = saw_half || c.head_dim == 500;
  EXPECT_TRUE(saw_half);
}

TEST(Shrink, descendsToTheTrueMinimumOfAPlantedBug) {
  const Profile p = default_profile();
  Genotype g = busy_genotype();
  g.requests = {{0, 1}, {21, 4}, {7, 0}, {250, 30}};  // 250 % 32 + 30 = 56 > 32
  ASSERT_TRUE(crosses_block(g));
  ShrinkStats stats;
  const Genotype m = shrink_to_minimal(g, p, crosses_block, &stats, 100000);
  EXPECT_TRUE(crosses_block(m));
  // Every field the bug does not depend on is at its simplest; block_size is the smallest that
  // still fails; the request crosses a block boundary by exactly one token.
  Genotype expected;
  expected.layout = Layout::paged_nhd;
  expected.block_size = 8;
  expected.num_heads = 1;
  expected.head_dim = 1;
  expected.gqa_ratio = 1;
  expected.requests = {m.requests.at(0)};
  expected.layout_seed = g.layout_seed;
  EXPECT_TRUE(m == expected);
  const RequestGene r = m.requests.at(0);
  EXPECT_LT(r.context_len, 8);
  EXPECT_EQ(r.context_len + r.new_len, 9);
  EXPECT_GT(stats.accepted, 5);
  EXPECT_LT(stats.tried, 2000);
}

// --- quantisation ----------------------------------------------------------------------------

Genotype quant_genotype() {
  Genotype g = busy_genotype();
  g.cache_dtype = DType::fp8_e5m2;
  g.scale_kind = ScaleKind::per_block;
  g.scale_dist = ScaleDist::extreme;
  return g;
}

TEST(Shrink, keepsAQuantisedCacheDTypeAndSimplifiesItsScales) {
  const Genotype g = quant_genotype();
  bool per_tensor = false, per_head = false, unit = false, input = false;
  for (const Genotype& c : shrink_genotype(g, default_profile())) {
    EXPECT_EQ(c.cache_dtype, DType::fp8_e5m2);
    EXPECT_NE(c.scale_kind, ScaleKind::per_token_head);  // never more complex
    EXPECT_NE(c.scale_kind, ScaleKind::none);
    EXPECT_TRUE(simpler_than(c, g, default_profile()));
    per_tensor = per_tensor || c.scale_kind == ScaleKind::per_tensor;
    per_head = per_head || c.scale_kind == ScaleKind::per_head;
    unit = unit || c.scale_dist == ScaleDist::unit;
    input = input || c.input_dtype == DType::f16;
  }
  EXPECT_TRUE(per_tensor && per_head && unit && input);
}

TEST(Shrink, givesPerTokenHeadScalesTheStaticKinds) {
  Genotype g = quant_genotype();
  g.scale_kind = ScaleKind::per_token_head;
  g.scale_dist = ScaleDist::unit;
  std::vector<ScaleKind> kinds;
  for (const Genotype& c : shrink_genotype(g, default_profile()))
    if (c.scale_kind != g.scale_kind) kinds.push_back(c.scale_kind);
  EXPECT_EQ(kinds, (std::vector<ScaleKind>{ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block}));
}

TEST(Shrink, orderScaleKindsAndDistsSimplestFirst) {
  const Profile p = default_profile();
  Genotype a = quant_genotype();
  a.scale_kind = ScaleKind::per_tensor;
  a.scale_dist = ScaleDist::unit;
  Genotype b = a;
  for (ScaleKind k : {ScaleKind::per_head, ScaleKind::per_block, ScaleKind::per_token_head}) {
    b.scale_kind = k;
    EXPECT_TRUE(simpler_than(a, b, p)) << to_string(k);
    a = b;
  }
  a = b = quant_genotype();
  a.scale_dist = ScaleDist::unit;
  for (ScaleDist d : {ScaleDist::pow2, ScaleDist::random, ScaleDist::extreme}) {
    b.scale_dist = d;
    EXPECT_TRUE(simpler_than(a, b, p)) << to_string(d);
    a = b;
  }
}

TEST(Shrink, descendsAQuantisedFailureToItsMinimum) {
  // Planted bug: fp8_e5m2 with per-head or per-block scales crossing a block boundary.
  auto fails = [](const Genotype& g) {
    return g.cache_dtype == DType::fp8_e5m2 && (g.scale_kind == ScaleKind::per_head || g.scale_kind == ScaleKind::per_block) &&
           crosses_block(g);
  };
  Genotype g = quant_genotype();
  g.requests = {{0, 1}, {21, 4}, {250, 30}};
  ASSERT_TRUE(fails(g));
  const Genotype m = shrink_to_minimal(g, default_profile(), fails, nullptr, 100000);
  EXPECT_EQ(m.cache_dtype, DType::fp8_e5m2);
  EXPECT_EQ(m.scale_kind, ScaleKind::per_head);
  EXPECT_EQ(m.scale_dist, ScaleDist::unit);
  EXPECT_EQ(m.input_dtype, DType::f16);
  EXPECT_EQ(m.requests.size(), 1u);
  EXPECT_EQ(m.block_size, 8);
}

TEST(Shrink, stopsAfterMaxTries) {
  ShrinkStats stats;
  shrink_to_minimal(busy_genotype(), default_profile(), [](const Genotype&) { return false; }, &stats, 3);
  EXPECT_EQ(stats.tried, 3);
  EXPECT_EQ(stats.accepted, 0);
}

}  // namespace
}  // namespace kvf
