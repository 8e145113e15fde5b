// materialize_test.cpp — materialize() on hand-picked genotypes: strides follow each layout's
// formula, block tables and slot_mapping are what the genotype says, and irregular i64 cases
// carry the 2^32 + s invalid slots that expose 32-bit slot arithmetic.
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='Materialize*'
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "case/case_json.h"
#include "case/validate.h"
#include "gen/materialize.h"

namespace kvf {
namespace {

// Two requests (a chunked prefill and a decode), 3 heads of 5 dims, blocks of 4 slots.
Genotype base_genotype(Layout layout) {
  Genotype g;
  g.layout = layout;
  g.block_size = 4;
  g.num_heads = 3;
  g.head_dim = 5;
  g.requests = {{6, 3}, {0, 1}};
  g.layout_seed = 12345;
  return g;
}

std::string problems(const Case& c) {
  std::string s;
  for (const ValidationProblem& p : validate(c)) s += p.json_path + ": " + p.message + "\n";
  return s;
}

TEST(Materialize, pagedNhdStridesAreDenseNhd) {
  const Case c = materialize(base_genotype(Layout::paged_nhd));
  EXPECT_EQ(c.cache.block_size, 4);
  EXPECT_EQ(c.cache.num_blocks, 3 + 1);  // ceil(9/4) + ceil(1/4)
  EXPECT_EQ(c.cache.stride_head, 5);
  EXPECT_EQ(c.cache.stride_pos, 3 * 5);
  EXPECT_EQ(c.cache.stride_block, 4 * 3 * 5);
  EXPECT_EQ(c.cache_k_offset, 0);
  EXPECT_EQ(c.cache_v_offset, 4 * 60);
  EXPECT_EQ(c.cache_buffer_elems, 2 * 4 * 60);
  EXPECT_EQ(problems(c), "");
}

TEST(Materialize, pagedHndStridesAreDenseHnd) {
  const Case c = materialize(base_genotype(Layout::paged_hnd));
  EXPECT_EQ(c.cache.stride_pos, 5);
  EXPECT_EQ(c.cache.stride_head, 4 * 5);
  EXPECT_EQ(c.cache.stride_block, 3 * 4 * 5);
  EXPECT_EQ(problems(c), "");
}

TEST(Materialize, packedKvPutsVRightAfterKInEachBlock) {
  const Case c = materialize(base_genotype(Layout::packed_kv_nhd));
  EXPECT_EQ(c.cache.stride_head, 5);
  EXPECT_EQ(c.cache.stride_pos, 15);
  EXPECT_EQ(c.cache.stride_block, 2 * 4 * 15);
  EXPECT_EQ(c.cache_v_offset - c.cache_k_offset, 4 * 15);
  EXPECT_EQ(c.cache_buffer_elems, c.cache.num_blocks * c.cache.stride_block);
  EXPECT_EQ(problems(c), "");
}

// [nb, H, bs, 2D]: K the first D elements of each row, V the last D, the addresses of the one
// tensor written out (H 3, D 5, block_size 4, as base_genotype draws them).
TEST(Materialize, packedContentPutsVInTheSecondHalfOfEveryRow) {
  const Case c = materialize(base_genotype(Layout::packed_content_hnd));
  const int64_t H = 3, D = 5, bs = 4;
  EXPECT_EQ(c.cache_v_offset - c.cache_k_offset, D);
  EXPECT_EQ(c.cache_buffer_elems, c.cache.num_blocks * H * bs * 2 * D);
  for (int64_t b = 0; b < c.cache.num_blocks; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t p = 0; p < bs; ++p)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t row = ((b * H + h) * bs + p) * 2 * D;
          ASSERT_EQ(c.cache_k_offset + cache_elem_offset(c.cache, b, p, h, d), c.cache_k_offset + row + d);
          ASSERT_EQ(c.cache_v_offset + cache_elem_offset(c.cache, b, p, h, d), c.cache_k_offset + row + D + d);
        }
  EXPECT_EQ(problems(c), "");
}

TEST(Materialize, contiguousLayoutsUseOneSequencePerRequest) {
  for (Layout l : {Layout::contiguous_bshd, Layout::contiguous_bhsd}) {
    const Case c = materialize(base_genotype(l));
    EXPECT_GE(c.cache.block_size, 9);  // longest sequence: 6 + 3
    EXPECT_LE(c.cache.block_size, 9 + 3);
    EXPECT_EQ(c.cache.num_blocks, 2);
    for (const Request& r : c.requests) EXPECT_EQ(r.blocks.size(), 1u);
    const int64_t S = c.cache.block_size;
    if (l == Layout::contiguous_bshd) {
      EXPECT_EQ(c.cache.stride_pos, 15);
      EXPECT_EQ(c.cache.stride_block, S * 15);
    } else {
      EXPECT_EQ(c.cache.stride_head, S * 5);
      EXPECT_EQ(c.cache.stride_block, 3 * S * 5);
    }
    EXPECT_EQ(problems(c), "");
  }
}

TEST(Materialize, irregularStridesAreGappedButNested) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Genotype g = base_genotype(Layout::paged_nhd);
    g.irregular = g.gapped_strides = g.misaligned_bases = true;
    g.layout_seed = seed;
    const Case c = materialize(g);
    EXPECT_GE(c.cache.stride_head - 5, 0);
    EXPECT_LE(c.cache.stride_head - 5, 3);
    EXPECT_GE(c.cache.stride_pos - 3 * c.cache.stride_head, 0);
    EXPECT_LE(c.cache.stride_pos - 3 * c.cache.stride_head, 3);
    EXPECT_GE(c.cache.stride_block - 4 * c.cache.stride_pos, 0);
    EXPECT_LE(c.cache.stride_block - 4 * c.cache.stride_pos, 3);
    EXPECT_EQ(c.cache_k_offset % 2, 1);  // misaligned base
    EXPECT_EQ(c.key.offset % 2, 1);
    EXPECT_EQ(problems(c), "") << "seed " << seed;
  }
}

TEST(Materialize, fusedQkvViewsSitInsideOneRow) {
  Genotype g = base_genotype(Layout::paged_nhd);
  g.fused_qkv = true;
  g.gqa_ratio = 4;
  const Case c = materialize(g);
  EXPECT_EQ(c.num_q_heads, 12);
  EXPECT_EQ(c.key.offset, 12 * 5);
  EXPECT_EQ(c.value.offset, (12 + 3) * 5);
  EXPECT_EQ(c.key.stride_token, (12 + 6) * 5);
  EXPECT_EQ(c.value.stride_token, c.key.stride_token);
  EXPECT_EQ(c.key.stride_head, 5);
  EXPECT_EQ(c.input_buffer_elems, c.num_input_rows * c.key.stride_token);
  EXPECT_EQ(problems(c), "");
}

TEST(Materialize, valueRowsGiveVPaddedRowsOfItsOwnPastK) {
  for (const bool fused : {false, true}) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      Genotype g = base_genotype(Layout::paged_nhd);
      g.fused_qkv = fused;
      g.gqa_ratio = 2;
      g.kv_views = KvViews::value_rows;
      g.layout_seed = seed;
      const Case c = materialize(g);
      const int64_t rows = c.num_input_rows;  // 4
      EXPECT_EQ(c.key.stride_head, 5);
      EXPECT_EQ(c.key.stride_token, fused ? (6 + 6) * 5 : 3 * 5);
      EXPECT_EQ(c.value.stride_head, 5);
      EXPECT_GT(c.value.stride_token, 3 * 5);           // rows padded
      EXPECT_LE(c.value.stride_token, 3 * 5 + 5 + 3 + 1);  // by 1..D + 3 (+ 1 where it met K's)
      EXPECT_NE(c.value.stride_token, c.key.stride_token);
      EXPECT_GE(c.value.offset, fused ? rows * c.key.stride_token : c.key.offset + rows * c.key.stride_token);
      EXPECT_EQ(c.value.offset % 8, 0) << "aligned bases: V starts on a 16-byte boundary";
      EXPECT_EQ(c.input_buffer_elems, c.value.offset + (rows - 1) * c.value.stride_token + 2 * 5 + 5);
      EXPECT_EQ(problems(c), "") << "seed " << seed;
    }
  }
}

TEST(Materialize, valueHeadsAndValueHeadMajorGiveVItsOwnHeadStride) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Genotype g = base_genotype(Layout::paged_hnd);
    g.layout_seed = seed;
    g.kv_views = KvViews::value_heads;
    const Case h = materialize(g);
    EXPECT_GE(h.value.stride_head, 5 + 1);
    EXPECT_LE(h.value.stride_head, 5 + 4);
    EXPECT_GE(h.value.stride_token, 3 * h.value.stride_head);
    EXPECT_NE(h.value.stride_token, h.key.stride_token);
    EXPECT_EQ(problems(h), "") << "seed " << seed;
    g.kv_views = KvViews::value_head_major;
    const Case m = materialize(g);
    EXPECT_GE(m.value.stride_token, 5);
    EXPECT_LE(m.value.stride_token, 5 + 3 + 1);
    EXPECT_NE(m.value.stride_token, m.key.stride_token);
    EXPECT_GE(m.value.stride_head, m.num_input_rows * m.value.stride_token);  // [H, T_in, D] storage
    EXPECT_EQ(problems(m), "") << "seed " << seed;
  }
}

TEST(Materialize, gappedStridesAndMisalignedBasesAreSeparateFeatures) {
  int gapped = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Genotype g = base_genotype(Layout::paged_nhd);
    g.layout_seed = seed;
    g.gapped_strides = true;
    const Case a = materialize(g);  // gaps, aligned bases
    EXPECT_EQ(a.cache_k_offset, 0);
    EXPECT_EQ(a.key.offset, 0);
    gapped += a.cache.stride_head > 5 || a.cache.stride_pos > 3 * a.cache.stride_head || a.key.stride_head > 5;
    EXPECT_EQ(problems(a), "") << "seed " << seed;
    g.gapped_strides = false;
    g.misaligned_bases = true;
    const Case b = materialize(g);  // odd bases, dense strides
    EXPECT_EQ(b.cache_k_offset % 2, 1);
    EXPECT_EQ(b.key.offset % 2, 1);
    EXPECT_EQ(b.cache.stride_head, 5);
    EXPECT_EQ(b.cache.stride_pos, 15);
    EXPECT_EQ(b.cache.stride_block, 60);
    EXPECT_EQ(b.cache_v_offset, b.cache_k_offset + 4 * 60);
    EXPECT_EQ(b.key.stride_token, 15);
    EXPECT_EQ(b.value.offset, b.key.offset + b.num_input_rows * 15);
    EXPECT_EQ(problems(b), "") << "seed " << seed;
  }
  EXPECT_GT(gapped, 40);  // each of 5 gaps is 0 with probability 1/4
}

TEST(Materialize, everyCorpusGenotypeStillMaterialisesToItsStoredBatch) {
  // Genotypes saved before gapped_strides, misaligned_bases and kv_views existed read as
  // irregular-driven and K/V alike; they must still give their stored batch (kvfuzz shrink
  // refuses a case whose genotype does not).
  int with_genotype = 0, irregular = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(KVFUZZ_SOURCE_DIR) + "/corpus")) {
    if (entry.path().extension() != ".json") continue;
    const Case c = read_case_file(entry.path());
    if (!c.genotype) continue;
    ++with_genotype;
    irregular += c.genotype->irregular;
    EXPECT_EQ(case_hash(materialize(*c.genotype)), case_hash(c)) << entry.path();
  }
  EXPECT_GT(with_genotype, 10);
  EXPECT_GT(irregular, 5);
}

TEST(Materialize, slotMappingHoldsEveryNewTokenSlotPaddingAndInvalidRows) {
  Genotype g = base_genotype(Layout::paged_nhd);
  g.tail_padding = 2;
  g.interleaved_padding = 3;
  g.invalid_slots = 2;
  g.extra_input_rows = 5;
  const Case c = materialize(g);
  ASSERT_EQ(c.num_slots(), 4 + 2 + 3 + 2);
  EXPECT_EQ(c.num_input_rows, c.num_slots() + 5);
  // Tail padding is last; padding is -1 in regular cases.
  EXPECT_EQ(c.slot_mapping[c.slot_mapping.size() - 1], -1);
  EXPECT_EQ(c.slot_mapping[c.slot_mapping.size() - 2], -1);
  std::vector<int64_t> expected;  // the new tokens' slots in request order
  for (const Request& r : c.requests)
    for (int64_t p = r.context_len; p < r.context_len + r.new_len; ++p)
      expected.push_back(r.blocks[p / 4] * 4 + p % 4);
  std::vector<int64_t> valid;
  int padding = 0, invalid = 0;
  for (int64_t s : c.slot_mapping) {
    if (s < 0) ++padding;
    else if (s >= c.capacity()) ++invalid;
    else valid.push_back(s);
  }
  EXPECT_EQ(valid, expected);  // in order, interleaved rows aside
  EXPECT_EQ(padding, 5);
  EXPECT_EQ(invalid, 2);
  EXPECT_EQ(problems(c), "");
}

TEST(Materialize, irregularI64CasesCarry2To32PlusValidSlot) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Genotype g = base_genotype(Layout::paged_hnd);
    g.irregular = true;
    g.invalid_slots = 2;
    g.slot_dtype = IndexType::i64;
    g.layout_seed = seed;
    const Case c = materialize(g);
    const int64_t two32 = int64_t{1} << 32;
    const bool found = std::any_of(c.slot_mapping.begin(), c.slot_mapping.end(),
                                   [&](int64_t s) { return s >= two32 && s - two32 < c.capacity(); });
    EXPECT_TRUE(found) << "seed " << seed;
    EXPECT_EQ(problems(c), "") << "seed " << seed;
  }
}

TEST(Materialize, i32InvalidAndPaddingSlotsFitIn32Bits) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Genotype g = base_genotype(Layout::paged_nhd);
    g.irregular = true;
    g.invalid_slots = 3;
    g.tail_padding = 3;
    g.slot_dtype = IndexType::i32;
    g.layout_seed = seed;
    const Case c = materialize(g);
    for (int64_t s : c.slot_mapping) {
      EXPECT_GE(s, INT32_MIN);
      EXPECT_LE(s, INT32_MAX);
    }
    EXPECT_EQ(problems(c), "") << "seed " << seed;
  }
}

TEST(Materialize, blocksAreDistinctAndSomeIrregularCasesUseTheLastBlock) {
  int used_last = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Genotype g = base_genotype(Layout::paged_nhd);
    g.irregular = true;
    g.spare_blocks = 6;
    g.layout_seed = seed;
    const Case c = materialize(g);
    std::set<int64_t> seen;
    for (const Request& r : c.requests)
      for (int64_t b : r.blocks) {
        EXPECT_TRUE(seen.insert(b).second) << "block " << b << " owned twice";
        used_last += b == c.cache.num_blocks - 1;
      }
  }
  EXPECT_GE(used_last, 15);  // half the irregular cases force it, plus chance
}

TEST(Materialize, emptyBatchesAreValid) {
  Genotype g = base_genotype(Layout::paged_nhd);
  g.requests = {{0, 0}};
  const Case c = materialize(g);
  EXPECT_EQ(c.num_slots(), 0);
  EXPECT_GE(c.cache.num_blocks, 1);
  EXPECT_EQ(problems(c), "");
}

// --- quantisation ----------------------------------------------------------------------------

Genotype quant_genotype(Layout layout, ScaleKind kind) {
  Genotype g = base_genotype(layout);
  g.cache_dtype = DType::fp8_e4m3;
  g.scale_kind = kind;
  g.scale_dist = kind == ScaleKind::per_token_head ? ScaleDist::unit : ScaleDist::random;
  return g;
}

TEST(Materialize, nhdLikeLayoutsGetAnNhdScaleCache) {
  for (Layout l : {Layout::paged_nhd, Layout::contiguous_bshd, Layout::packed_kv_nhd}) {
    SCOPED_TRACE(std::string(to_string(l)));
    const Case c = materialize(quant_genotype(l, ScaleKind::per_token_head));
    const int64_t H = 3, bs = c.cache.block_size, nb = c.cache.num_blocks;
    EXPECT_EQ(c.scale_kind, ScaleKind::per_token_head);
    EXPECT_EQ(c.scale_cache.num_blocks, nb);
    EXPECT_EQ(c.scale_cache.block_size, bs);
    EXPECT_EQ(c.scale_cache.stride_head, 1);  // [nb, bs, H]
    EXPECT_EQ(c.scale_cache.stride_pos, H);
    EXPECT_EQ(c.scale_cache.stride_block, bs * H);
    EXPECT_EQ(c.scale_k_offset, 0);
    EXPECT_EQ(c.scale_v_offset, nb * bs * H);  // V's scales right after K's
    EXPECT_EQ(c.scale_cache_elems, 2 * nb * bs * H);
    EXPECT_EQ(problems(c), "");
  }
}

TEST(Materialize, hndLikeLayoutsGetAnHndScaleCache) {
  for (Layout l : {Layout::paged_hnd, Layout::contiguous_bhsd, Layout::packed_content_hnd}) {
    SCOPED_TRACE(std::string(to_string(l)));
    const Case c = materialize(quant_genotype(l, ScaleKind::per_token_head));
    const int64_t H = 3, bs = c.cache.block_size, nb = c.cache.num_blocks;
    EXPECT_EQ(c.scale_cache.stride_pos, 1);  // [nb, H, bs]
    EXPECT_EQ(c.scale_cache.stride_head, bs);
    EXPECT_EQ(c.scale_cache.stride_block, H * bs);
    EXPECT_EQ(c.scale_v_offset - c.scale_k_offset, nb * H * bs);
    EXPECT_EQ(problems(c), "");
  }
}

TEST(Materialize, irregularScaleCachesAreGappedMisalignedAndNested) {
  bool gapped = false;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    for (Layout l : {Layout::paged_nhd, Layout::paged_hnd}) {
      Genotype g = quant_genotype(l, ScaleKind::per_token_head);
      g.irregular = g.gapped_strides = g.misaligned_bases = true;
      g.layout_seed = seed;
      const Case c = materialize(g);
      const CacheGeometry& s = c.scale_cache;
      const int64_t inner = l == Layout::paged_nhd ? s.stride_head : s.stride_pos;
      EXPECT_GE(inner, 1);
      EXPECT_LE(inner, 4);
      EXPECT_EQ(c.scale_k_offset % 2, 1);  // misaligned base
      EXPECT_GE(c.scale_v_offset - c.scale_k_offset, c.cache.num_blocks * s.stride_block);
      EXPECT_GE(c.scale_cache_elems, c.scale_v_offset + c.cache.num_blocks * s.stride_block);
      gapped = gapped || inner > 1;
      EXPECT_EQ(problems(c), "") << "seed " << seed;
    }
  }
  EXPECT_TRUE(gapped);
}

TEST(Materialize, staticScalesAndFloatCachesHaveNoScaleCache) {
  for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block}) {
    Genotype g = quant_genotype(Layout::paged_hnd, k);
    g.irregular = g.gapped_strides = g.misaligned_bases = true;
    const Case c = materialize(g);
    EXPECT_EQ(c.scale_kind, k);
    EXPECT_EQ(c.scale_dist, ScaleDist::random);
    EXPECT_EQ(c.scale_cache.stride_block + c.scale_cache.stride_pos + c.scale_cache.stride_head, 0);
    EXPECT_EQ(c.scale_cache.num_blocks + c.scale_cache.block_size, 0);
    EXPECT_EQ(c.scale_k_offset + c.scale_v_offset + c.scale_cache_elems, 0);
    EXPECT_EQ(problems(c), "");
  }
  const Case f = materialize(base_genotype(Layout::paged_nhd));
  EXPECT_EQ(f.scale_kind, ScaleKind::none);
  EXPECT_EQ(f.scale_cache_elems, 0);
}

TEST(Materialize, addingScalesLeavesTheRestOfTheCaseUnchanged) {
  // The scale cache draws from its own stream: a quantised genotype lays out blocks, strides and
  // slots exactly like its float twin.
  Genotype g = base_genotype(Layout::paged_nhd);
  g.irregular = g.gapped_strides = g.misaligned_bases = true;
  g.kv_views = KvViews::value_heads;
  g.invalid_slots = 2;
  Genotype q = g;
  q.cache_dtype = DType::int8;
  q.scale_kind = ScaleKind::per_token_head;
  const Case a = materialize(g), b = materialize(q);
  EXPECT_EQ(a.slot_mapping, b.slot_mapping);
  EXPECT_EQ(a.cache.stride_block, b.cache.stride_block);
  EXPECT_EQ(a.cache_k_offset, b.cache_k_offset);
  EXPECT_EQ(a.cache_buffer_elems, b.cache_buffer_elems);
  EXPECT_EQ(a.key.offset, b.key.offset);
  EXPECT_EQ(a.payload_seed, b.payload_seed);
}

TEST(Materialize, isAFunctionOfTheGenotypeAndRecordsIt) {
  Genotype g = base_genotype(Layout::packed_kv_nhd);
  g.irregular = g.gapped_strides = g.misaligned_bases = true;
  g.kv_views = KvViews::value_rows;
  g.invalid_slots = 1;
  const Case a = materialize(g), b = materialize(g);
  EXPECT_EQ(a.slot_mapping, b.slot_mapping);
  EXPECT_EQ(a.payload_seed, b.payload_seed);
  ASSERT_TRUE(a.genotype.has_value());
  EXPECT_TRUE(*a.genotype == g);
  g.layout_seed += 1;
  EXPECT_NE(materialize(g).payload_seed, a.payload_seed);
}

// Every format family, with every plain layout, separate and fused inputs, dense and gapped strides,
// aligned and odd bases: the case validates, writes as the version its family needs, and reads back
// equal (hash included).
TEST(Materialize, everyFamilyMakesValidCasesThatRoundTrip) {
  const Layout layouts[] = {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd};
  for (const Family family : {Family::kv_split, Family::k_only, Family::mla}) {
    for (const Layout layout : layouts) {
      for (const bool fused : {false, true}) {
        for (const bool irregular : {false, true}) {
          Genotype g = base_genotype(layout);
          g.family = family;
          g.fused_qkv = fused;
          g.gqa_ratio = 2;
          g.irregular = g.gapped_strides = g.misaligned_bases = irregular;
          if (family == Family::kv_split) g.value_head_dim = 7;
          if (family == Family::mla) {
            g.num_heads = 1;
            g.rope_dim = 2;
            g.head_dim = 5 + 2;
          }
          const Case c = materialize(g);
          const std::string what = std::string(to_string(family)) + " " + std::string(to_string(layout)) + (fused ? " fused" : "") +
                                   (irregular ? " irregular" : "");
          ASSERT_EQ(problems(c), "") << what;
          EXPECT_EQ(c.family, family) << what;
          EXPECT_EQ(c.num_fields(), family == Family::kv_split ? 2 : 1) << what;
          const nlohmann::json j = case_to_json(c);
          EXPECT_EQ(j.at("version"), 2) << what;
          EXPECT_EQ(j.at("format").at("family"), std::string(to_string(family))) << what;
          const Case back = case_from_json(j, "<test>");
          EXPECT_EQ(case_hash(back), case_hash(c)) << what;
          EXPECT_EQ(case_to_json(back), j) << what;
        }
      }
    }
  }
}

// A kv case stays version 1 with no format object: existing corpus files, names and hashes are
// unchanged by version 2.
TEST(Materialize, aKvCaseIsStillWrittenAsVersion1) {
  const nlohmann::json j = case_to_json(materialize(base_genotype(Layout::paged_nhd)));
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_FALSE(j.contains("format"));
}

// MLA: kv_c and k_pe are two views (separate) or two slices of one projection row (fused); V absent.
TEST(Materialize, mlaReadsKvCAndKPeAndHasNoValue) {
  Genotype g = base_genotype(Layout::paged_nhd);
  g.family = Family::mla;
  g.num_heads = 1;
  g.rope_dim = 3;
  g.head_dim = 8 + 3;
  g.fused_qkv = true;
  const Case c = materialize(g);
  ASSERT_EQ(problems(c), "");
  EXPECT_EQ(c.num_q_heads, 0);
  EXPECT_EQ(c.rope.offset, c.key.offset + 8);  // k_pe right after kv_c in the row
  EXPECT_EQ(c.rope.stride_token, c.key.stride_token);
  EXPECT_EQ(c.cache_v_offset, 0);
  EXPECT_EQ(c.value.stride_token, 0);
  const CacheFields f = c.fields();
  ASSERT_EQ(f.count, 1);
  EXPECT_STREQ(f.field[0].name, "latent");
  ASSERT_EQ(f.field[0].num_parts, 2);
  EXPECT_EQ(f.field[0].parts[0].width, 8);
  EXPECT_EQ(f.field[0].parts[1].width, 3);
}

}  // namespace
}  // namespace kvf
