// case_json_test.cpp — corpus format v1: exact round trips, the canonical hash, the documented
// example.
//   ./build/tests/kvfuzz_case_tests --gtest_filter='CaseJson.*:CaseHash.*'
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "case/case_json.h"
#include "case/validate.h"
#include "case_fixture.h"

namespace kvf {
namespace {

using test::CaseOptions;
using test::expect_same_case;
using test::make_case;

Case round_trip(const Case& c) {
  // Through text, as a corpus file would go: pretty-printed, parsed strictly, validated.
  return case_from_text(case_to_json(c).dump(2), "round_trip.json");
}

TEST(CaseJson, handBuiltCasesOfEveryLayoutAreValid) {
  for (Layout l : {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                   Layout::packed_kv_nhd}) {
    for (bool fused : {false, true}) {
      const Case c = make_case({.layout = l, .fused_qkv = fused});
      const auto problems = validate(c);
      EXPECT_TRUE(problems.empty()) << to_string(l) << ": " << problems.front().json_path << ": "
                                    << problems.front().message;
    }
  }
}

TEST(CaseJson, roundTripsEveryLayoutExactly) {
  for (Layout l : {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                   Layout::packed_kv_nhd}) {
    SCOPED_TRACE(std::string(to_string(l)));
    const bool contiguous = l == Layout::contiguous_bshd || l == Layout::contiguous_bhsd;
    const Case c = make_case({.layout = l, .block_size = contiguous ? 16 : 4});
    expect_same_case(round_trip(c), c);
  }
}

constexpr Layout kLayouts[] = {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd,
                               Layout::contiguous_bhsd, Layout::packed_kv_nhd};

TEST(CaseJson, roundTripsQuantisedCasesOfEveryKindDTypeAndLayout) {
  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block, ScaleKind::per_token_head}) {
      for (Layout l : kLayouts) {
        SCOPED_TRACE(std::string(to_string(t)) + " " + std::string(to_string(k)) + " " + std::string(to_string(l)));
        const bool contiguous = l == Layout::contiguous_bshd || l == Layout::contiguous_bhsd;
        const ScaleDist d = k == ScaleKind::per_token_head ? ScaleDist::unit : ScaleDist::extreme;
        const Case c = make_case({.layout = l, .block_size = contiguous ? 16 : 4, .cache_dtype = t, .scale_kind = k,
                                  .scale_dist = d});
        const auto problems = validate(c);
        ASSERT_TRUE(problems.empty()) << problems.front().json_path << ": " << problems.front().message;
        expect_same_case(round_trip(c), c);
      }
    }
  }
}

TEST(CaseJson, writesTheQuantObject) {
  const nlohmann::json none = case_to_json(make_case());
  EXPECT_EQ(none.at("quant"), nlohmann::json::parse(R"({"scale_kind": "none", "scale_dist": "unit",
      "scale_cache": {"stride_block": 0, "stride_pos": 0, "stride_head": 0},
      "scale_k_offset": 0, "scale_v_offset": 0, "scale_cache_elems": 0})"));
  // per_token_head, [nb = 6, bs = 4, H = 2]; the scale cache's num_blocks and block_size are the
  // cache's and are not written.
  const nlohmann::json dynamic =
      case_to_json(make_case({.cache_dtype = DType::fp8_e5m2, .scale_kind = ScaleKind::per_token_head}));
  EXPECT_EQ(dynamic.at("quant"), nlohmann::json::parse(R"({"scale_kind": "per_token_head", "scale_dist": "unit",
      "scale_cache": {"stride_block": 8, "stride_pos": 2, "stride_head": 1},
      "scale_k_offset": 3, "scale_v_offset": 53, "scale_cache_elems": 102})"));
  EXPECT_EQ(dynamic.at("shape").at("cache_dtype"), "fp8_e5m2");
}

TEST(CaseJson, readsTheScaleCacheExtentFromTheCache) {
  const Case c = round_trip(make_case({.cache_dtype = DType::int8, .scale_kind = ScaleKind::per_token_head}));
  EXPECT_EQ(c.scale_cache.num_blocks, c.cache.num_blocks);
  EXPECT_EQ(c.scale_cache.block_size, c.cache.block_size);
  const Case s = round_trip(make_case({.cache_dtype = DType::int8, .scale_kind = ScaleKind::per_head}));
  EXPECT_EQ(s.scale_cache.num_blocks, 0);  // no scale cache without per_token_head
  EXPECT_EQ(s.scale_cache.block_size, 0);
}

TEST(CaseJson, roundTripsFusedInputsI32SlotsAndAFailExpectation) {
  Case c = make_case({.num_heads = 3, .head_dim = 72, .block_size = 5, .fused_qkv = true,
                      .slot_dtype = IndexType::i32});
  c.expect = {Expect::fail, "padding_leak"};
  c.payload_seed = 18446744073709551615ull;  // uint64 max survives as a string
  c.provenance = {"", -1, "", "kvfuzz \"quoted\" \\ and ünïcode", ""};
  expect_same_case(round_trip(c), c);
}

TEST(CaseJson, roundTripsTheGenotype) {
  Case c = make_case();
  c.genotype = test::make_genotype();
  const Case back = round_trip(c);
  expect_same_case(back, c);
  ASSERT_TRUE(back.genotype.has_value());
  EXPECT_EQ(back.genotype->layout_seed, 18446744073709551615ull);
}

TEST(CaseJson, roundTripsTheLayoutFeaturesOfAGenotype) {
  Case c = make_case();
  c.genotype = test::make_genotype();  // irregular, gapped and misaligned, K/V alike
  nlohmann::json j = case_to_json(c);
  // Written only where they differ from what a file without them means (irregular's value; alike).
  EXPECT_FALSE(j.at("genotype").contains("gapped_strides"));
  EXPECT_FALSE(j.at("genotype").contains("misaligned_bases"));
  EXPECT_FALSE(j.at("genotype").contains("kv_views"));
  c.genotype->misaligned_bases = false;
  c.genotype->kv_views = KvViews::value_head_major;
  j = case_to_json(c);
  EXPECT_FALSE(j.at("genotype").contains("gapped_strides"));
  EXPECT_EQ(j.at("genotype").at("misaligned_bases"), false);
  EXPECT_EQ(j.at("genotype").at("kv_views"), "value_head_major");
  expect_same_case(round_trip(c), c);
  c.genotype->irregular = false;
  c.genotype->gapped_strides = true;
  expect_same_case(round_trip(c), c);
}

TEST(CaseJson, readsAGenotypeWithoutLayoutFeatureKeysAsTheFormerIrregularFlag) {
  Case c = make_case();
  c.genotype = test::make_genotype();
  for (const bool irregular : {false, true}) {
    nlohmann::json j = case_to_json(c);
    j["genotype"]["irregular"] = irregular;
    const Case back = case_from_json(j, "old.json");
    ASSERT_TRUE(back.genotype.has_value());
    EXPECT_EQ(back.genotype->gapped_strides, irregular);
    EXPECT_EQ(back.genotype->misaligned_bases, irregular);
    EXPECT_EQ(back.genotype->kv_views, KvViews::alike);
  }
  nlohmann::json j = case_to_json(c);
  j["genotype"]["kv_views"] = "value_columns";
  try {
    case_from_json(j, "bad.json");
    ADD_FAILURE() << "accepted an unknown kv_views";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/genotype/kv_views") << e.what();
    EXPECT_NE(e.message().find("value_head_major"), std::string::npos) << e.what();
  }
}

TEST(CaseJson, roundTripsAQuantisedGenotype) {
  Case c = make_case({.cache_dtype = DType::int8, .scale_kind = ScaleKind::per_block, .scale_dist = ScaleDist::random});
  c.genotype = test::make_quant_genotype();
  const Case back = round_trip(c);
  expect_same_case(back, c);
  const nlohmann::json j = case_to_json(c);
  EXPECT_EQ(j.at("genotype").at("scale_kind"), "per_block");
  EXPECT_EQ(j.at("genotype").at("scale_dist"), "random");
  EXPECT_EQ(j.at("genotype").at("cache_dtype"), "int8");
  EXPECT_EQ(j.at("genotype").at("dist"), "ties");
}

TEST(CaseJson, roundTripsAnEmptyQuantisedCache) {
  Case c = make_case({.cache_dtype = DType::fp8_e4m3, .scale_kind = ScaleKind::per_token_head});
  c.requests.clear();
  c.slot_mapping = {0, -1};  // >= capacity 0: invalid
  c.cache.num_blocks = 0;
  c.scale_cache.num_blocks = 0;
  expect_same_case(round_trip(c), c);
}

TEST(CaseJson, roundTripsAnEmptyBatch) {
  Case c = make_case();
  c.requests.clear();
  c.slot_mapping = {-1, -1};
  expect_same_case(round_trip(c), c);
  c.slot_mapping.clear();
  c.cache.num_blocks = 0;
  expect_same_case(round_trip(c), c);
}

TEST(CaseJson, writesSeedsAsDecimalStrings) {
  Case c = make_case();
  c.genotype = test::make_genotype();
  const nlohmann::json j = case_to_json(c);
  EXPECT_EQ(j.at("payload").at("seed"), "18364758544493064720");
  EXPECT_EQ(j.at("genotype").at("layout_seed"), "18446744073709551615");
  EXPECT_EQ(j.at("schema"), "kvfuzz-case");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("expect"), nlohmann::json({{"outcome", "pass"}}));
}

TEST(CaseJson, readsTheExampleInTheCorpusFormatDocument) {
  std::ifstream in(std::string(KVFUZZ_SOURCE_DIR) + "/docs/corpus-format.md");
  ASSERT_TRUE(in) << "docs/corpus-format.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t start = doc.find("```json\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = doc.find("```", start + 8);
  ASSERT_NE(end, std::string::npos);
  const Case c = case_from_text(doc.substr(start + 8, end - start - 8), "docs/corpus-format.md");
  EXPECT_EQ(c.layout, Layout::paged_nhd);
  EXPECT_EQ(c.cache_dtype, DType::fp8_e4m3);
  EXPECT_EQ(c.scale_kind, ScaleKind::per_token_head);
  EXPECT_EQ(c.scale_cache_elems, 16);
  EXPECT_TRUE(c.genotype.has_value());
}

// --- hash ------------------------------------------------------------------------------------

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return h;
}

TEST(CaseHash, isFnv1aOfTheCanonicalJsonWithoutProvenanceAndExpect) {
  const Case c = make_case();
  nlohmann::json j = case_to_json(c);
  j.erase("provenance");
  j.erase("expect");
  char want[17];
  std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(fnv1a(j.dump())));
  EXPECT_EQ(case_hash(c), want);
}

TEST(CaseHash, isSixteenLowercaseHexDigits) {
  const std::string h = case_hash(make_case());
  ASSERT_EQ(h.size(), 16u);
  for (char ch : h) EXPECT_TRUE((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')) << h;
}

TEST(CaseHash, isPinnedForAFixedCase) {
  // Changing this value renames every corpus file: only with a schema version bump. (Changed once
  // without a bump, before any release, when the required "quant" object was added to v1 and the
  // corpus was regenerated: f875d6875fff41e0 -> the value below.)
  EXPECT_EQ(case_hash(make_case()), "a5e2b67ea7312244");
}

// Request 1 of make_case() (fresh prefill of 3 tokens in a block of 4) with its new tokens at
// `positions`, slot_mapping rows 3..5 following them.
Case with_positions(std::vector<int64_t> positions) {
  Case c = make_case({.block_size = 4});
  Request& r = c.requests[1];
  for (size_t i = 0; i < positions.size(); ++i) c.slot_mapping[3 + i] = r.blocks[0] * 4 + positions[i];
  r.positions = std::move(positions);
  return c;
}

TEST(CaseHash, isUnchangedByPositionsThatAreTheConsecutiveRange) {
  const Case plain = make_case({.block_size = 4});
  EXPECT_EQ(case_hash(with_positions({0, 1, 2})), case_hash(plain));
  EXPECT_FALSE(case_to_json(with_positions({0, 1, 2}))["requests"][1].contains("positions"));
}

TEST(CaseJson, roundTripsScatteredPositionsAndTheyChangeTheHash) {
  const Case c = with_positions({3, 0, 2});  // position 1 is a hole
  ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
  expect_same_case(round_trip(c), c);
  EXPECT_EQ(case_to_json(c)["requests"][1]["positions"], nlohmann::json::array({3, 0, 2}));
  EXPECT_NE(case_hash(c), case_hash(make_case({.block_size = 4})));
}

TEST(CaseHash, ignoresProvenanceAndExpectation) {
  const Case a = make_case();
  Case b = a;
  b.provenance = {"999", 1, "9.9.9", "other command", "cuda"};
  b.expect = {Expect::fail, "wrong_value"};
  EXPECT_EQ(case_hash(a), case_hash(b));
}

TEST(CaseHash, changesWithTheBatch) {
  const Case a = make_case();
  Case b = a;
  std::swap(b.slot_mapping[0], b.slot_mapping[1]);
  EXPECT_NE(case_hash(a), case_hash(b));
  Case c = a;
  c.payload_seed += 1;
  EXPECT_NE(case_hash(a), case_hash(c));
  Case d = a;
  d.genotype = test::make_genotype();
  EXPECT_NE(case_hash(a), case_hash(d));
  const Case q = make_case({.cache_dtype = DType::fp8_e4m3, .scale_kind = ScaleKind::per_tensor});
  Case r = q;
  r.scale_dist = ScaleDist::pow2;  // other static scales, same layout
  EXPECT_NE(case_hash(q), case_hash(r));
}

TEST(CaseHash, survivesARoundTrip) {
  Case c = make_case({.layout = Layout::packed_kv_nhd});
  c.genotype = test::make_genotype();
  EXPECT_EQ(case_hash(round_trip(c)), case_hash(c));
}

// Version 2's format object is a version-2 key: a version-1 file holding one is refused by path.
TEST(CaseJson, refusesAFormatInAVersion1File) {
  nlohmann::json j = case_to_json(test::make_case());
  ASSERT_EQ(j.at("version"), 1);
  j["format"] = {{"family", "k_only"}};
  try {
    case_from_json(j, "v1.json");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/format");
    EXPECT_NE(std::string(e.what()).find("version 2 key"), std::string::npos) << e.what();
  }
}

// A key another family has is refused with the family named.
TEST(CaseJson, refusesAFormatKeyTheFamilyHasNot) {
  nlohmann::json j = case_to_json(test::make_case());
  j["version"] = 2;
  j["format"] = {{"family", "kv"}, {"rope_dim", 64}};
  try {
    case_from_json(j, "v2.json");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/format/rope_dim");
    EXPECT_NE(std::string(e.what()).find("family kv has no rope_dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvf
