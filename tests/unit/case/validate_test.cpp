// validate_test.cpp — semantic checks: block tables, slot_mapping, nested strides, buffer bounds.
// Cases are edited in memory and checked with validate(); the reader turns the same problems into
// InputError (case_json_hostile_test.cpp).
//   ./build/tests/kvfuzz_case_tests --gtest_filter='Validate.*'
#include <gtest/gtest.h>

#include <string>

#include "case/validate.h"
#include "case_fixture.h"

namespace kvf {
namespace {

using test::make_case;

// The first problem of an invalid case (fails the test if the case is valid).
ValidationProblem first_problem(const Case& c) {
  const auto problems = validate(c);
  if (problems.empty()) {
    ADD_FAILURE() << "the case was accepted";
    return {};
  }
  return problems.front();
}

#define EXPECT_PROBLEM(c, path, message_part)                                                    \
  do {                                                                                           \
    const ValidationProblem p = first_problem(c);                                                \
    EXPECT_EQ(p.json_path, path) << p.message;                                                   \
    EXPECT_NE(p.message.find(message_part), std::string::npos) << "message: " << p.message;      \
  } while (0)

// Fixture geometry (make_case defaults): H = 2, D = 8, block_size 4, 6 blocks; requests own
// blocks {5, 3}, {2}, {1, 0}; block 4 is free. slot_mapping = [23, 12, -1, 8, 9, 10, 0, 29, -7].

TEST(Validate, acceptsTheFixture) {
  const Case c = make_case();
  ASSERT_EQ(c.slot_mapping, (std::vector<int64_t>{23, 12, -1, 8, 9, 10, 0, 29, -7}));
  EXPECT_TRUE(validate(c).empty());
}

// --- requests --------------------------------------------------------------------------------

TEST(Validate, refusesABlockTablePointingPastTheCache) {
  Case c = make_case();
  c.requests[0].blocks[1] = 6;
  EXPECT_PROBLEM(c, "/requests/0/blocks/1", "expected a block in [0, 6) (num_blocks = 6), got 6");
  c.requests[0].blocks[1] = -1;
  EXPECT_PROBLEM(c, "/requests/0/blocks/1", "got -1");
}

TEST(Validate, refusesABlockInSeveralTablesThatIsNotFullContextOfEach) {
  Case c = make_case();
  c.requests[2].blocks[0] = 5;  // request 0's first block, which also holds its new token at bs - 1
  EXPECT_PROBLEM(c, "/requests/0/blocks/0",
                 "block 5 is shared with request 2 (/requests/2/blocks/0) but is not entirely context of request 0");
  Case d = make_case();
  d.requests[2].blocks[1] = 1;  // twice in one table
  EXPECT_PROBLEM(d, "/requests/2/blocks/1", "already in this block table at /requests/2/blocks/0");
}

TEST(Validate, acceptsAFullPrefixBlockSharedByTwoRequests) {
  Case c = make_case();
  // Request 2 (context_len = block_size, decode) shares its full first block with a new request 3.
  Request r = c.requests[2];
  r.blocks[1] = 4;  // its own second block, free in make_case()
  r.new_len = 0;
  c.requests.push_back(r);
  EXPECT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
}

TEST(Validate, refusesAShortBlockTable) {
  Case c = make_case();
  c.requests[0].blocks.pop_back();
  EXPECT_PROBLEM(c, "/requests/0/blocks",
                 "context_len + new_len = 5 tokens need 2 blocks of 4 slots, but the block table has 1");
}

TEST(Validate, acceptsAnIdleRequestWithNoBlocksAndExtraBlocks) {
  Case c = make_case();
  c.requests.push_back({0, 0, {}, {}});
  c.requests.push_back({0, 0, {4}, {}});  // owns a block it does not use yet
  EXPECT_TRUE(validate(c).empty());
}

TEST(Validate, refusesTooManyRequests) {
  Case c = make_case();
  Limits l;
  l.max_requests = 2;
  const auto problems = validate(c, l);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0].json_path, "/requests");
  EXPECT_EQ(problems[0].message, "3 requests; the limit is 2");
}

// --- slot_mapping ----------------------------------------------------------------------------

TEST(Validate, refusesADuplicateSlot) {
  Case c = make_case();
  c.slot_mapping[2] = 23;  // the padding row now repeats row 0
  EXPECT_PROBLEM(c, "/slot_mapping/2", "appears twice: also at /slot_mapping/0");
}

TEST(Validate, refusesAMissingNewTokenSlot) {
  Case c = make_case();
  c.slot_mapping[4] = -1;  // slot 9, request 1's token 1
  EXPECT_PROBLEM(c, "/slot_mapping",
                 "slot 9 of request 1's new token at position 1 is missing; each new-token slot must appear exactly once");
}

TEST(Validate, refusesASlotInAFreeBlock) {
  Case c = make_case();
  c.slot_mapping[2] = 17;  // block 4, offset 1
  EXPECT_PROBLEM(c, "/slot_mapping/2", "slot 17 (block 4, offset 1) is in a free block");
}

TEST(Validate, refusesASlotOverwritingContext) {
  Case c = make_case();
  c.slot_mapping[2] = 20;  // request 0's block 5, position 0 < context_len 3
  EXPECT_PROBLEM(c, "/slot_mapping/2", "holds request 0's context token 0, which this call must not overwrite");
}

TEST(Validate, refusesASlotPastTheNewTokens) {
  Case c = make_case();
  c.slot_mapping[2] = 13;  // request 0's position 5, past context_len + new_len = 5
  EXPECT_PROBLEM(c, "/slot_mapping/2", "is request 0's position 5, past its last new token");
}

TEST(Validate, acceptsInvalidAndPaddingValuesAnywhere) {
  Case c = make_case();
  // 24 == capacity: invalid, never written.
  c.slot_mapping.insert(c.slot_mapping.begin(), {INT64_MAX, INT64_MIN, 24});
  c.slot_mapping.resize(c.slot_mapping.size() - 2);  // drop the invalid and tail padding entries
  EXPECT_TRUE(validate(c).empty()) << first_problem(c).message;
}

TEST(Validate, refusesSlotsOutsideTheI32Range) {
  Case c = make_case({.slot_dtype = IndexType::i32});
  EXPECT_TRUE(validate(c).empty());
  c.slot_mapping[7] = int64_t{1} << 40;  // invalid (>= capacity) would be fine, but not representable
  EXPECT_PROBLEM(c, "/slot_mapping/7", "slot_dtype is i32 but 1099511627776 does not fit in 32 bits");
}

TEST(Validate, refusesMoreSlotsThanInputRows) {
  Case c = make_case();
  c.num_input_rows = c.num_slots() - 1;
  EXPECT_PROBLEM(c, "/input/num_rows", "expected num_rows >= 9 (the number of slot_mapping entries), got 8");
}

TEST(Validate, refusesMoreNewTokensThanSlots) {
  Case c = make_case();
  c.requests[1].new_len = 8;
  c.requests[1].blocks = {2, 4};  // enough blocks, but not enough slot_mapping entries
  EXPECT_PROBLEM(c, "/slot_mapping", "the requests append more new tokens than slot_mapping has entries (9)");
}

TEST(Validate, refusesTooManySlots) {
  Case c = make_case();
  Limits l;
  l.max_slots = 4;
  const auto problems = validate(c, l);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0].json_path, "/slot_mapping");
  EXPECT_EQ(problems[0].message, "9 slot_mapping entries; the limit is 4");
}

// --- cache geometry --------------------------------------------------------------------------

TEST(Validate, refusesOverlappingCacheStrides) {
  Case c = make_case();
  c.cache.stride_pos = 8;  // == stride_head: two heads of one slot alias two slots of one head
  EXPECT_PROBLEM(c, "/cache/stride_pos", "K/V cache cells overlap: stride_pos = 8 must be >= 16");
  Case d = make_case();
  d.cache.stride_head = 4;  // < head_dim
  EXPECT_PROBLEM(d, "/cache/stride_head", "stride_head = 4 must be >= 8");
  Case e = make_case();
  e.cache.stride_block = 0;
  EXPECT_PROBLEM(e, "/cache/stride_block", "stride_block = 0 must be >= 1");
}

TEST(Validate, refusesVOverlappingK) {
  Case c = make_case();
  c.cache_v_offset = 100;  // K spans [0, 384)
  EXPECT_PROBLEM(c, "/cache/v_offset", "v_offset - k_offset = 100 must be >= 384");
  c.cache_v_offset = 0;
  EXPECT_PROBLEM(c, "/cache/v_offset", "expected v_offset > k_offset");
}

TEST(Validate, acceptsGappedStridesAndTheKvDimensionAnywhereInTheNest) {
  Case c = make_case({.layout = Layout::packed_kv_nhd});
  CacheGeometry& g = c.cache;
  g.stride_head = 11;  // D = 8: gaps between heads, slots and blocks; K/V between pos and block
  g.stride_pos = 23;
  c.cache_k_offset = 7;
  c.cache_v_offset = c.cache_k_offset + 92;
  g.stride_block = 189;
  const int64_t exact = c.cache_k_offset + 1 + 7 + g.stride_head + 3 * g.stride_pos + 92 + 5 * g.stride_block;
  c.cache_buffer_elems = exact;
  EXPECT_TRUE(validate(c).empty()) << first_problem(c).message;
  c.cache_buffer_elems = exact - 1;
  EXPECT_PROBLEM(c, "/cache/buffer_elems",
                 "K and V need " + std::to_string(exact) + " elements of the cache buffer, which has " +
                     std::to_string(exact - 1));
}

TEST(Validate, refusesACacheBufferTooSmall) {
  Case c = make_case();
  c.cache_buffer_elems -= 1;
  EXPECT_PROBLEM(c, "/cache/buffer_elems", "K and V need 768 elements of the cache buffer, which has 767");
}

TEST(Validate, refusesAbsurdSizesWithTheLimitNamed) {
  Case c = make_case();
  c.cache.num_blocks = int64_t{1} << 50;
  c.cache_buffer_elems = INT64_MAX;
  EXPECT_PROBLEM(c, "/cache/buffer_elems", "cache buffer needs 16 EiB; the limit is 1 GiB (--max-case-mib)");
  Case d = make_case();
  d.cache.num_blocks = INT64_MAX;
  d.cache.stride_block = INT64_MAX;
  EXPECT_PROBLEM(d, "/cache/buffer_elems", "K and V need more than 2^120 elements of the cache buffer");
  Case e = make_case();
  e.num_heads = 5000;
  EXPECT_PROBLEM(e, "/shape/num_heads", "expected an integer in [1, 1024], got 5000");
}

TEST(Validate, acceptsAnEmptyCache) {
  Case c = make_case();
  c.requests.clear();
  c.slot_mapping = {0, 5, -1};  // all >= capacity 0: invalid, never written
  c.cache.num_blocks = 0;
  c.cache_buffer_elems = 0;
  EXPECT_TRUE(validate(c).empty()) << first_problem(c).message;
}

// --- input views -----------------------------------------------------------------------------

TEST(Validate, refusesAViewOutsideTheBuffer) {
  Case c = make_case();
  c.input_buffer_elems -= 1;
  EXPECT_PROBLEM(c, "/input/value/offset",
                 "the value view needs 355 elements of the input buffer (through row 10, its last head and dim), which has 354");
}

TEST(Validate, refusesAViewWhoseRowsOverlap) {
  Case c = make_case();
  c.key.stride_token = 8;  // rows of 16 elements, 8 apart
  EXPECT_PROBLEM(c, "/input/key/stride_token", "key view cells overlap: stride_token = 8 must be >= 16");
}

TEST(Validate, refusesKeyAndValueSharingCells) {
  Case c = make_case();
  c.value.offset = c.key.offset + 8;  // value head 0 == key head 1
  EXPECT_PROBLEM(c, "/input/value/offset", "key and value cells overlap");
  Case d = make_case();
  d.value = {4, 2 * 16 + 1, 8};  // different strides, ranges intersect
  d.input_buffer_elems = 1000;
  EXPECT_PROBLEM(d, "/input/value", "key and value views overlap in the input buffer");
}

TEST(Validate, acceptsKeyAndValueInterleavedPerRow) {
  Case c = make_case();
  c.key = {0, 32, 8};  // [T_in, 2 (k/v), H, D]
  c.value = {16, 32, 8};
  c.input_buffer_elems = c.num_input_rows * 32;
  EXPECT_TRUE(validate(c).empty()) << first_problem(c).message;
}

// --- quantisation ----------------------------------------------------------------------------

// Whether validate() reports a problem at `path` whose message contains `part` (not necessarily the
// first problem).
bool has_problem(const Case& c, const std::string& path, const std::string& part, const Limits& l = {}) {
  for (const ValidationProblem& p : validate(c, l))
    if (p.json_path == path && p.message.find(part) != std::string::npos) return true;
  return false;
}

Case quant_case(ScaleKind k, DType t = DType::fp8_e4m3) {
  return make_case({.cache_dtype = t, .scale_kind = k,
                    .scale_dist = k == ScaleKind::per_token_head ? ScaleDist::unit : ScaleDist::pow2});
}

TEST(Validate, acceptsQuantisedCasesOfEveryKind) {
  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block, ScaleKind::per_token_head}) {
      const Case c = quant_case(k, t);
      EXPECT_TRUE(validate(c).empty()) << to_string(t) << " " << to_string(k) << ": " << first_problem(c).message;
    }
  }
}

TEST(Validate, refusesAQuantisedInputDType) {
  Case c = quant_case(ScaleKind::per_tensor);
  c.input_dtype = DType::fp8_e4m3;
  EXPECT_PROBLEM(c, "/shape/input_dtype",
                 "expected \"f16\", \"bf16\" or \"f32\", got \"fp8_e4m3\"; quantised dtypes are cache-only");
  c.input_dtype = DType::int8;
  EXPECT_PROBLEM(c, "/shape/input_dtype", "got \"int8\"");
}

// Bug classes B13/B28 need these inputs; the contract defines neither, so they are invalid cases.
TEST(Validate, refusesAQuantisedCacheWithoutScales) {
  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    Case c = make_case({.cache_dtype = t});
    EXPECT_PROBLEM(c, "/quant/scale_kind",
                   "cache_dtype \"" + std::string(to_string(t)) + "\" is quantised and needs scales: expected scale_kind "
                   "\"per_tensor\", \"per_head\", \"per_block\" or \"per_token_head\", got \"none\"");
  }
}

TEST(Validate, refusesScalesOnAFloatCache) {
  for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block, ScaleKind::per_token_head}) {
    Case c = quant_case(k);
    c.cache_dtype = DType::f16;
    EXPECT_PROBLEM(c, "/quant/scale_kind",
                   "cache_dtype \"f16\" is not quantised: expected scale_kind \"none\", got \"" +
                       std::string(to_string(k)) + "\"");
  }
}

TEST(Validate, refusesAScaleDistWithoutStaticScales) {
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_dist = ScaleDist::pow2;
  EXPECT_PROBLEM(c, "/quant/scale_dist",
                 "scale_kind \"per_token_head\" has no static scales: expected scale_dist \"unit\", got \"pow2\"");
  Case d = make_case();
  d.scale_dist = ScaleDist::extreme;
  EXPECT_PROBLEM(d, "/quant/scale_dist", "scale_kind \"none\" has no static scales");
}

TEST(Validate, refusesScaleCacheFieldsForKindsWithoutAScaleCache) {
  const Case dynamic = quant_case(ScaleKind::per_token_head);
  for (ScaleKind k : {ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block}) {
    Case c = dynamic;  // a full scale cache
    c.scale_kind = k;
    c.scale_cache.num_blocks = c.scale_cache.block_size = 0;
    EXPECT_PROBLEM(c, "/quant/scale_cache/stride_block",
                   "expected 0, got 8: only scale_kind \"per_token_head\" has a scale cache (scale_kind is \"" +
                       std::string(to_string(k)) + "\")");
    EXPECT_EQ(validate(c).size(), 6u);  // three strides, two offsets, the buffer size
  }
  Case n = make_case();
  n.scale_cache_elems = 5;
  EXPECT_PROBLEM(n, "/quant/scale_cache_elems", "expected 0, got 5");
  Case m = make_case();
  m.scale_cache.num_blocks = 6;  // in memory only: the reader never sets it without per_token_head
  EXPECT_PROBLEM(m, "/quant/scale_cache", "expected 0 and 0");
}

TEST(Validate, refusesAScaleCacheWhoseExtentIsNotTheCaches) {
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_cache.block_size = 3;
  EXPECT_PROBLEM(c, "/quant/scale_cache", "expected the cache's (6 and 4)");
}

TEST(Validate, refusesOverlappingScaleCacheStrides) {
  // [nb = 6, bs = 4, H = 2]: stride_head 1, stride_pos 2, stride_block 8.
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_cache.stride_pos = 1;  // == stride_head: slot 1 head 0 is slot 0 head 1
  EXPECT_PROBLEM(c, "/quant/scale_cache/stride_pos", "K/V scale cache cells overlap: stride_pos = 1 must be >= 2");
  Case d = quant_case(ScaleKind::per_token_head);
  d.scale_cache.stride_block = 7;  // < 4 slots * 2 heads
  EXPECT_PROBLEM(d, "/quant/scale_cache/stride_block", "stride_block = 7 must be >= 8");
  Case e = quant_case(ScaleKind::per_token_head);
  e.scale_cache.stride_head = 0;
  EXPECT_PROBLEM(e, "/quant/scale_cache/stride_head", "stride_head = 0 must be >= 1");
}

TEST(Validate, refusesScaleVOverlappingK) {
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_v_offset = c.scale_k_offset + 47;  // K's scales span 48 elements
  EXPECT_PROBLEM(c, "/quant/scale_v_offset", "scale_v_offset - scale_k_offset = 47 must be >= 48");
  c.scale_v_offset = c.scale_k_offset;
  EXPECT_PROBLEM(c, "/quant/scale_v_offset", "expected scale_v_offset > scale_k_offset");
}

TEST(Validate, acceptsAGappedScaleCacheInAnyNestOrder) {
  Case c = quant_case(ScaleKind::per_token_head);
  CacheGeometry& g = c.scale_cache;
  g.stride_pos = 1;  // [nb, 2 (k/v), H, bs] with gaps: K/V between head and block
  g.stride_head = 5;
  c.scale_k_offset = 0;
  c.scale_v_offset = 11;
  g.stride_block = 23;
  const int64_t exact = 1 + 3 * g.stride_pos + g.stride_head + 11 + 5 * g.stride_block;
  c.scale_cache_elems = exact;
  EXPECT_TRUE(validate(c).empty()) << first_problem(c).message;
  c.scale_cache_elems = exact - 1;
  EXPECT_PROBLEM(c, "/quant/scale_cache_elems",
                 "the K and V scale caches need " + std::to_string(exact) +
                     " elements of the scale cache buffer, which has " + std::to_string(exact - 1));
}

TEST(Validate, refusesAScaleCacheOutsideItsBuffer) {
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_cache_elems = 100;  // V's scales end at 53 + 47
  EXPECT_PROBLEM(c, "/quant/scale_cache_elems", "the K and V scale caches need 101 elements");
}

TEST(Validate, refusesNegativeScaleCacheFields) {
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_k_offset = -3;
  EXPECT_PROBLEM(c, "/quant/scale_k_offset", "expected an integer >= 0, got -3");
  Case d = quant_case(ScaleKind::per_token_head);
  d.scale_cache.stride_pos = -2;
  EXPECT_PROBLEM(d, "/quant/scale_cache/stride_pos", "expected an integer >= 0, got -2");
  Case e = quant_case(ScaleKind::per_token_head);
  e.scale_cache_elems = -1;
  EXPECT_PROBLEM(e, "/quant/scale_cache_elems", "expected an integer >= 0, got -1");
}

TEST(Validate, refusesAbsurdScaleBuffersWithTheLimitNamed) {
  Case c = quant_case(ScaleKind::per_token_head);
  c.scale_cache_elems = INT64_MAX;
  EXPECT_PROBLEM(c, "/quant/scale_cache_elems", "scale cache buffer needs 32 EiB; the limit is 1 GiB (--max-case-mib)");
  // per_block: num_blocks * H fp32 scales for each of K and V, computed without overflow.
  Case d = quant_case(ScaleKind::per_block);
  d.cache.num_blocks = int64_t{1} << 40;
  EXPECT_TRUE(has_problem(d, "/quant/scale_kind", "the static scale buffer (K and V) needs 16 TiB; the limit is 1 GiB"));
  d.cache.num_blocks = INT64_MAX;
  EXPECT_TRUE(has_problem(d, "/quant/scale_kind", "needs 128 EiB"));  // 2^63 * 2 heads * 2 * 4 B, no overflow
  Case e = quant_case(ScaleKind::per_block);
  Limits l;
  l.max_buffer_bytes = 95;  // 6 blocks * 2 heads * 2 tensors * 4 bytes = 96
  EXPECT_TRUE(has_problem(e, "/quant/scale_kind", "needs 96 B; the limit is 95 B", l));
  l.max_buffer_bytes = 96;
  EXPECT_FALSE(has_problem(e, "/quant/scale_kind", "", l));
}

TEST(Validate, refusesAnInconsistentQuantisedGenotype) {
  Case c = make_case();
  c.genotype = test::make_quant_genotype();
  EXPECT_TRUE(validate(c).empty()) << first_problem(c).message;
  c.genotype->scale_kind = ScaleKind::none;
  EXPECT_PROBLEM(c, "/genotype/scale_kind", "cache_dtype \"int8\" is quantised and needs scales");
  c.genotype = test::make_genotype();  // bf16 cache
  c.genotype->scale_kind = ScaleKind::per_head;
  EXPECT_PROBLEM(c, "/genotype/scale_kind", "cache_dtype \"bf16\" is not quantised");
  c.genotype = test::make_quant_genotype();
  c.genotype->input_dtype = DType::fp8_e5m2;
  EXPECT_PROBLEM(c, "/genotype/input_dtype", "quantised dtypes are cache-only");
  c.genotype = test::make_quant_genotype();
  c.genotype->scale_kind = ScaleKind::per_token_head;  // scale_dist random: no static scales
  EXPECT_PROBLEM(c, "/genotype/scale_dist", "expected scale_dist \"unit\", got \"random\"");
}

// --- bookkeeping and genotype ----------------------------------------------------------------

TEST(Validate, refusesOutOfRangeEnumValues) {
  Case c = make_case();
  c.layout = static_cast<Layout>(77);
  EXPECT_PROBLEM(c, "/cache/layout", "not a valid layout (enum value 77)");
  Case d = make_case();
  d.scale_kind = static_cast<ScaleKind>(9);
  EXPECT_PROBLEM(d, "/quant/scale_kind", "not a valid scale kind (enum value 9)");
  Case e = make_case();
  e.scale_dist = static_cast<ScaleDist>(9);
  EXPECT_PROBLEM(e, "/quant/scale_dist", "not a valid scale distribution (enum value 9)");
}

TEST(Validate, refusesAFindingKindOnAPassingCase) {
  Case c = make_case();
  c.expect.finding_kind = "wrong_value";
  EXPECT_PROBLEM(c, "/expect/finding_kind", "a case expected to pass has no finding kind");
}

TEST(Validate, refusesANegativeQHeadCount) {
  Case c = make_case();
  c.num_q_heads = -1;
  EXPECT_PROBLEM(c, "/shape/num_q_heads", "expected an integer >= 0, got -1");
}

TEST(Validate, refusesAGenotypeWithAbsurdSizes) {
  Case c = make_case();
  c.genotype = test::make_genotype();
  EXPECT_TRUE(validate(c).empty());
  c.genotype->extra_input_rows = 2000000000;
  EXPECT_PROBLEM(c, "/genotype/requests", "the input buffer of this genotype needs");
  c.genotype = test::make_genotype();
  c.genotype->head_dim = 0;
  EXPECT_PROBLEM(c, "/genotype/head_dim", "expected an integer in [1, 4096], got 0");
}

TEST(Validate, capsTheNumberOfProblems) {
  Case c = make_case();
  c.slot_mapping.assign(5000, 17);  // every row in the free block
  c.num_input_rows = 5000;
  c.key = {0, 16, 8};
  c.value = {5000 * 16, 16, 8};
  c.input_buffer_elems = 2 * 5000 * 16;
  const auto problems = validate(c);
  EXPECT_EQ(problems.size(), 101u);
  EXPECT_EQ(problems.back().message, "too many problems; stopped after 100");
}

// Format families: what the family has not must not be described, what it needs must be.
TEST(Validate, refusesAVOffsetForAKOnlyCache) {
  Case c = make_case();
  c.family = Family::k_only;
  c.value = InputView{};
  EXPECT_PROBLEM(c, "/cache/v_offset", "family k_only has no V");
}

TEST(Validate, refusesAnMlaCacheOfSeveralHeads) {
  Case c = make_case();
  c.family = Family::mla;
  c.rope_dim = 2;
  EXPECT_PROBLEM(c, "/shape/num_heads", "an MLA latent cache has one head");
}

TEST(Validate, refusesAKvSplitCaseWithoutVStrides) {
  Case c = make_case();
  c.family = Family::kv_split;
  c.value_head_dim = 4;
  EXPECT_PROBLEM(c, "/format/value_cache", "needs V's strides");
}

TEST(Validate, refusesARopeDimOutsideMla) {
  Case c = make_case();
  c.rope_dim = 2;
  EXPECT_PROBLEM(c, "/format/rope_dim", "only an MLA entry");
}

TEST(Validate, refusesAFamilyOnAPairedLayout) {
  Case c = make_case(test::CaseOptions{.layout = Layout::packed_kv_nhd});
  c.family = Family::kv_split;
  c.value_head_dim = 4;
  c.value_cache = c.cache;
  EXPECT_PROBLEM(c, "/cache/layout", "family kv_split takes the layouts");
}

}  // namespace
}  // namespace kvf
