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

TEST(Validate, refusesABlockOwnedTwice) {
  Case c = make_case();
  c.requests[2].blocks[0] = 5;
  EXPECT_PROBLEM(c, "/requests/2/blocks/0",
                 "block 5 is already in a block table at /requests/0/blocks/0; a block belongs to at most one request");
  Case d = make_case();
  d.requests[2].blocks[1] = 1;  // twice in one table
  EXPECT_PROBLEM(d, "/requests/2/blocks/1", "already in a block table at /requests/2/blocks/0");
}

TEST(Validate, refusesAShortBlockTable) {
  Case c = make_case();
  c.requests[0].blocks.pop_back();
  EXPECT_PROBLEM(c, "/requests/0/blocks",
                 "context_len + new_len = 5 tokens need 2 blocks of 4 slots, but the block table has 1");
}

TEST(Validate, acceptsAnIdleRequestWithNoBlocksAndExtraBlocks) {
  Case c = make_case();
  c.requests.push_back({0, 0, {}});
  c.requests.push_back({0, 0, {4}});  // owns a block it does not use yet
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

// --- bookkeeping and genotype ----------------------------------------------------------------

TEST(Validate, refusesOutOfRangeEnumValues) {
  Case c = make_case();
  c.layout = static_cast<Layout>(77);
  EXPECT_PROBLEM(c, "/cache/layout", "not a valid layout (enum value 77)");
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

}  // namespace
}  // namespace kvf
