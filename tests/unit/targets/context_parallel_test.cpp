// context_parallel_test.cpp — context-parallel shards (src/case/context_parallel.h, docs/contract.md
// "Serving conventions"): the sharding arithmetic by hand and as properties, the CUDA kernel's
// slot-mapping producer fuzzed on its own against the formula, a hand-built sharded case in both
// inputs through the validator, the golden model and the CUDA kernel, and generated twins (the two
// inputs of one genotype, and one rank against no shards) giving identical caches.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='ContextParallel*'
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "arena/arena.h"
#include "report/verdict.h"
#include "campaign/check.h"
#include "case/case_json.h"
#include "case/context_parallel.h"
#include "case/validate.h"
#include "cp_slot_mapping.cuh"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "golden/golden.h"
#include "values/payload.h"
#include "kv_append.h"
#include "kv_format.cuh"
#include "targets/target.h"

namespace kvf {
namespace {

// N = 2 ranks, interleave 2: positions 0 1 | 2 3 | 4 5 | 6 7 go to ranks 0 0 1 1 0 0 1 1 at local
// positions 0 1 0 1 2 3 2 3.
TEST(ContextParallel, shardArithmeticByHand) {
  const Shards s{2, 2};
  const int64_t owner[] = {0, 0, 1, 1, 0, 0, 1, 1, 0};
  const int64_t local[] = {0, 1, 0, 1, 2, 3, 2, 3, 4};
  for (int64_t p = 0; p < 9; ++p) {
    EXPECT_EQ(s.owner(p), owner[p]) << p;
    EXPECT_EQ(s.local(p), local[p]) << p;
    EXPECT_EQ(s.global(owner[p], local[p]), p) << p;
  }
  EXPECT_EQ(s.local_len(0, 9), 5);
  EXPECT_EQ(s.local_len(1, 9), 4);
  EXPECT_EQ(s.local_len(1, 3), 1);
  EXPECT_EQ(s.longest(0), 0);
  const Shards three{3, 4};  // 12-position cycles: 0..3 rank 0, 4..7 rank 1, 8..11 rank 2
  EXPECT_EQ(three.owner(13), 0);
  EXPECT_EQ(three.local(13), 5);
  EXPECT_EQ(three.local_len(2, 10), 2);
  EXPECT_EQ(three.local_len(2, 8), 0);
}

// Every position has one owner and one local position; each rank's local positions of [0, len) are
// exactly 0 .. local_len - 1, in increasing order of global position; rank 0's shard is the longest.
RC_GTEST_PROP(ContextParallel, ranksPartitionEverySequenceIntoDenseShards, ()) {
  const Shards s{*rc::gen::inRange<int64_t>(1, 9), *rc::gen::inRange<int64_t>(1, 20)};
  const int64_t len = *rc::gen::inRange<int64_t>(0, 400);
  std::vector<int64_t> next(static_cast<size_t>(s.world), 0);
  for (int64_t p = 0; p < len; ++p) {
    const int64_t r = s.owner(p);
    RC_ASSERT(r >= 0 && r < s.world);
    RC_ASSERT(s.local(p) == next[static_cast<size_t>(r)]++);
    RC_ASSERT(s.global(r, s.local(p)) == p);
  }
  int64_t total = 0;
  for (int64_t r = 0; r < s.world; ++r) {
    RC_ASSERT(s.local_len(r, len) == next[static_cast<size_t>(r)]);
    RC_ASSERT(s.local_len(r, len) <= s.longest(len));
    total += s.local_len(r, len);
  }
  RC_ASSERT(total == len);
}

// The CUDA kernel's producer (kernels/cuda/cp_slot_mapping.cuh, run by the CPU launcher cuda-emu
// uses) on random batches, fuzzed on its own against the formula: block tables, positions (up to
// 2^31 - 1), padding rows, any world size and interleave.
RC_GTEST_PROP(ContextParallel, theKernelsProducerGivesTheFormulasSlotMappings, ()) {
  const Shards s{*rc::gen::inRange<int64_t>(1, 65), *rc::gen::element<int64_t>(1, 2, 3, 7, 16, 1024, 1 << 20)};
  const int64_t bs = *rc::gen::inRange<int64_t>(1, 300);
  const int64_t requests = *rc::gen::inRange<int64_t>(1, 5);
  const bool near_limit = *rc::gen::arbitrary<bool>();
  std::vector<int32_t> lens, tables;
  int64_t width = 1;
  for (int64_t r = 0; r < requests; ++r) {
    const int64_t len = near_limit ? *rc::gen::inRange<int64_t>(int64_t{1} << 30, std::numeric_limits<int32_t>::max())
                                   : *rc::gen::inRange<int64_t>(0, 200);
    lens.push_back(static_cast<int32_t>(len));
    width = std::max<int64_t>(width, (s.longest(len) + bs - 1) / bs);
  }
  width = std::min<int64_t>(width, 1 << 16);  // near the limit: a table's first blocks only
  for (int64_t r = 0; r < requests; ++r)
    for (int64_t k = 0; k < width; ++k) tables.push_back(static_cast<int32_t>(r * width + k));
  std::vector<int32_t> positions, rows;
  const int64_t T = *rc::gen::inRange<int64_t>(0, 64);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = *rc::gen::inRange<int64_t>(0, requests);
    int64_t p = *rc::gen::inRange<int64_t>(-1, std::max<int32_t>(lens[static_cast<size_t>(r)], 1));
    if (p >= 0 && s.local(p) / bs >= width) p = s.global(s.owner(p), s.local(p) % (width * bs));  // inside the table
    positions.push_back(static_cast<int32_t>(p));
    rows.push_back(p < 0 ? -1 : static_cast<int32_t>(r));
  }
  for (int64_t rank = 0; rank < s.world; ++rank) {
    std::vector<int32_t> out(static_cast<size_t>(T), 0x5a5a5a5a);
    CpSlotMappingParams p;
    p.positions = positions.data();
    p.requests = rows.data();
    p.block_tables = tables.data();
    p.table_width = width;
    p.num_rows = T;
    p.block_size = bs;
    p.rank = static_cast<int32_t>(rank);
    p.world_size = static_cast<int32_t>(s.world);
    p.interleave = static_cast<int32_t>(s.interleave);
    p.slot_mapping = out.data();
    cp_slot_mapping_emu(p);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = positions[static_cast<size_t>(t)];
      int64_t want = -1;
      if (pos >= 0 && s.owner(pos) == rank) {
        const int64_t lp = s.local(pos);
        want = tables[static_cast<size_t>(rows[static_cast<size_t>(t)] * width + lp / bs)] * bs + lp % bs;
      }
      RC_ASSERT(out[static_cast<size_t>(t)] == want);
    }
  }
}

// One request, context 3, appending positions 3..7 over N = 2 ranks with interleave 2, block size 2,
// table {2, 0} (shard-local; 3 blocks per shard). Positions 3 (rank 1, local 1), 4, 5 (rank 0,
// local 2, 3), 6, 7 (rank 1, local 2, 3); a padding row after the first token.
Case sharded_case(CpInput input) {
  Case c;
  c.num_heads = 1;
  c.head_dim = 4;
  c.input_dtype = c.cache_dtype = DType::f16;
  c.slot_dtype = IndexType::i32;
  c.layout = Layout::paged_nhd;
  c.cache = CacheGeometry{6, 2, 2 * 4, 4, 4};
  c.cache_k_offset = 0;
  c.cache_v_offset = 6 * 2 * 4;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  c.cp_input = input;
  c.cp_world_size = 2;
  c.cp_interleave = 2;
  c.requests = {Request{3, 5, {2, 0}, {}}};
  const auto slot = [&](int64_t p) { const int64_t lp = Shards{2, 2}.local(p); return c.requests[0].blocks[lp / 2] * 2 + lp % 2; };
  c.slot_mapping = {slot(3), -1, slot(4), slot(5), slot(6), slot(7)};
  c.num_input_rows = 6;
  c.key = InputView{0, 8, 4};
  c.value = InputView{4, 8, 4};
  c.input_buffer_elems = 6 * 8;
  c.payload_seed = 77;
  return c;
}

TEST(ContextParallel, handBuiltShardsInBothInputs) {
  for (const CpInput input : {CpInput::slot_mapping, CpInput::positions}) {
    SCOPED_TRACE(std::string(to_string(input)));
    const Case c = sharded_case(input);
    ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
    EXPECT_EQ(case_to_json(case_from_json(case_to_json(c), "cp.json")), case_to_json(c));
    EXPECT_EQ(c.slot_mapping, (std::vector<int64_t>{5, -1, 0, 1, 0, 1}));  // local slots, shared by both ranks
    Arena expected = make_initial_arena(c);
    const Arena initial = expected;
    golden::golden_append(c, expected);
    // Shard r is blocks [3r, 3r + 3): local position lp of rank r at block 3r + table[lp / 2].
    const FieldLayout k = c.cache_field(false);
    const auto at = [&](int64_t rank, int64_t lp) { return field_offset(k, 3 * rank + c.requests[0].blocks[lp / 2], lp % 2, 0, 1); };
    const auto row_bits = [&](int64_t row) { return golden::input_bits(c, golden::Tensor::key, row, 0, 1); };
    EXPECT_EQ(load_elem(expected.cache(), at(1, 1), 2), row_bits(0));  // position 3
    EXPECT_EQ(load_elem(expected.cache(), at(0, 2), 2), row_bits(2));  // position 4
    EXPECT_EQ(load_elem(expected.cache(), at(0, 3), 2), row_bits(3));  // position 5
    EXPECT_EQ(load_elem(expected.cache(), at(1, 2), 2), row_bits(4));  // position 6
    EXPECT_EQ(load_elem(expected.cache(), at(1, 3), 2), row_bits(5));  // position 7
    for (const auto& [rank, lp] : {std::pair{0, 0}, {0, 1}, {1, 0}})  // context positions 0, 1 and 2
      EXPECT_EQ(load_elem(expected.cache(), at(rank, lp), 2), load_elem(initial.cache(), at(rank, lp), 2));
    // The locator names shard 1's local position 2 request 0's new token at position 6.
    const CacheCell cell = CacheLocator(c).cell(false, 3 + c.requests[0].blocks[1], 0, 0, 0);
    EXPECT_EQ(cell.role, CacheCell::Role::new_token);
    EXPECT_EQ(cell.token, 6);
    EXPECT_EQ(cell.rank, 1);
    EXPECT_EQ(CacheLocator(c).cell(false, c.requests[0].blocks[0], 1, 0, 0).token, 1);  // rank 0, local 1: context
    // The CUDA kernel (and, with input slot_mapping, its producer) keeps the contract.
    auto target = make_target("cuda-emu");
    EXPECT_TRUE(check_case(*target, c, CheckOptions{}).pass());
  }
}

// A producer that leaves one entry unwritten, or writes a foreign token's slot, is named as the cause.
TEST(ContextParallel, aWrongProducerOutputIsASlotMappingMismatch) {
  const Case c = sharded_case(CpInput::slot_mapping);
  Arena expected = make_initial_arena(c);
  const Arena initial = expected;
  golden::golden_append(c, expected);
  Arena actual = expected;
  const CpSection s = cp_section(c);
  store_elem(actual.slots(), s.rank_mappings + 1 * c.num_slots() + 2, 4, 0);  // rank 1 gets rank 0's position 4
  const Verdict v = compare_arenas(c, initial, expected, actual);
  ASSERT_FALSE(v.pass());
  EXPECT_EQ(v.findings.front().kind, FindingKind::slot_mapping_mismatch);
  EXPECT_NE(v.findings.front().sentence.find("rank 1"), std::string::npos) << v.findings.front().sentence;
  EXPECT_NE(v.findings.front().sentence.find("position 4, held by rank 0"), std::string::npos) << v.findings.front().sentence;
  Arena unwritten = expected;
  store_elem(unwritten.slots(), s.rank_mappings + 3, 4, kCpMappingCanary);
  const Verdict u = compare_arenas(c, initial, expected, unwritten);
  ASSERT_FALSE(u.pass());
  EXPECT_NE(u.findings.front().sentence.find("never written"), std::string::npos) << u.findings.front().sentence;
}

TEST(ContextParallel, validatorHoldsTheCaseToTheShardContract) {
  const auto first_path = [](const Case& c) { const auto p = validate(c); return p.empty() ? std::string("(valid)") : p.front().json_path; };
  const auto names = [](const Case& c, const std::string& path) {
    for (const ValidationProblem& p : validate(c))
      if (p.json_path == path) return true;
    return false;
  };
  Case wrong = sharded_case(CpInput::positions);
  wrong.slot_mapping[2] = wrong.slot_mapping[0];  // position 4 at position 3's local slot
  EXPECT_EQ(first_path(wrong), "/slot_mapping/2");
  EXPECT_NE(validate(wrong).front().message.find("local position 2 of rank 0"), std::string::npos) << validate(wrong).front().message;
  Case uneven = sharded_case(CpInput::positions);
  uneven.cache.num_blocks = 5;
  EXPECT_TRUE(names(uneven, "/cache/num_blocks"));
  Case foreign = sharded_case(CpInput::slot_mapping);
  foreign.requests[0].blocks[1] = 3;  // a block of shard 1, not a shard-local id
  EXPECT_EQ(first_path(foreign), "/requests/0/blocks/1");
  Case short_table = sharded_case(CpInput::slot_mapping);
  short_table.requests[0].blocks.pop_back();  // rank 0 holds 4 positions: 2 blocks of 2
  EXPECT_EQ(first_path(short_table), "/requests/0/blocks");
  Case invalid = sharded_case(CpInput::slot_mapping);
  invalid.slot_mapping[1] = 6;  // >= a shard's capacity
  EXPECT_EQ(first_path(invalid), "/slot_mapping/1");
  Case wide = sharded_case(CpInput::positions);
  wide.slot_dtype = IndexType::i64;
  EXPECT_EQ(first_path(wide), "/shape/slot_dtype");
  Case sink = sharded_case(CpInput::positions);
  sink.padding = PaddingMode::sink;
  EXPECT_TRUE(names(sink, "/serving/padding"));
  Case world = sharded_case(CpInput::positions);
  world.cp_world_size = 0;
  EXPECT_TRUE(names(world, "/serving/context_parallel/world_size"));
}

// configs/serving.json's sharded cases: valid and passing on the CUDA kernel; a genotype with input
// positions gives the caches its slot_mapping twin gives, and one rank gives the cache of no shards.
TEST(ContextParallel, twinsOfOneGenotypeGiveIdenticalCaches) {
  const Profile p = load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "serving.json");
  auto target = make_target("cuda-emu");
  int twins = 0, foreign = 0;
  const auto run = [&](const Case& c) {
    EXPECT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
    Arena a = make_initial_arena(c);
    EXPECT_EQ(target->run(c, a.data(), a.layout()).status, RunStatus::ok);
    return a;
  };
  for (int64_t i = 0; i < 2000 && twins < 60; ++i) {
    const Genotype g = generate_case(p, 41, i);
    if (g.cp_input != CpInput::positions) continue;
    Genotype twin = g;
    twin.cp_input = CpInput::slot_mapping;
    const Case a = materialize(g), b = materialize(twin);
    const Arena x = run(a), y = run(b);
    ASSERT_EQ(x.layout().cache_bytes, y.layout().cache_bytes);
    EXPECT_EQ(std::memcmp(x.cache(), y.cache(), static_cast<size_t>(x.layout().cache_bytes)), 0) << "case " << i;
    EXPECT_TRUE(check_case(*target, a, CheckOptions{}).pass()) << "case " << i;
    EXPECT_TRUE(check_case(*target, b, CheckOptions{}).pass()) << "case " << i;
    const CpRows rows = cp_rows(a);
    for (const int32_t pos : rows.position) foreign += pos >= 0 && Shards{a.cp_world_size, a.cp_interleave}.owner(pos) != 0 ? 1 : 0;
    // One rank: the shard is the whole cache, the call the plain append.
    Genotype one = g, none = g;
    one.cp_world_size = 1;
    none.cp_input = CpInput::none;
    none.cp_world_size = none.cp_interleave = 0;
    const Case c1 = materialize(one), c0 = materialize(none);
    const Arena z1 = run(c1), z0 = run(c0);
    ASSERT_EQ(z1.layout().cache_bytes, z0.layout().cache_bytes);
    EXPECT_EQ(std::memcmp(z1.cache(), z0.cache(), static_cast<size_t>(z1.layout().cache_bytes)), 0) << "case " << i;
    ++twins;
  }
  EXPECT_GE(twins, 60);
  EXPECT_GT(foreign, 100);  // tokens rank 0 must skip: the case the rank filter exists for
}

}  // namespace
}  // namespace kvf
