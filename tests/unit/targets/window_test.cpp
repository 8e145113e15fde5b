// window_test.cpp — sliding-window ring caches (src/case/window.h, docs/contract.md "Serving
// conventions"): the ring arithmetic by hand, a hand-built ring case in both window inputs through
// the validator, the golden model and the CUDA kernel, and generated twins giving identical caches.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='Window*'
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "arena/arena.h"
#include "campaign/check.h"
#include "case/case_json.h"
#include "case/validate.h"
#include "case/window.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "golden/golden.h"
#include "values/payload.h"
#include "kv_format.cuh"
#include "targets/target.h"

namespace kvf {
namespace {

// W = 5, S = 2: the ring past the sinks has R = 3 slots, indices 2, 3, 4.
TEST(Window, ringArithmetic) {
  const Window w{5, 2};
  const int64_t index[] = {0, 1, 2, 3, 4, 2, 3, 4, 2};
  for (int64_t p = 0; p < 9; ++p) EXPECT_EQ(w.index(p), index[p]) << p;
  // At length 9: sinks 0, 1 and the last three positions 6, 7, 8.
  for (int64_t p = 0; p < 9; ++p) EXPECT_EQ(w.kept(p, 9), p < 2 || p >= 6) << p;
  EXPECT_EQ(w.held(0, 9), 0);
  EXPECT_EQ(w.held(2, 9), 8);
  EXPECT_EQ(w.held(3, 9), 6);
  EXPECT_EQ(w.held(4, 9), 7);
  EXPECT_EQ(w.held(4, 4), -1);  // not reached yet
  EXPECT_EQ(w.held(3, 4), 3);
  EXPECT_EQ(w.held(5, 9), -1);  // past the ring
}

// One request, context 4, appending positions 4..8 into the W = 5, S = 2 ring of blocks {3, 0, 2}
// (block size 2: ring index i at block blocks[i / 2], offset i % 2). Positions 4 and 5 are evicted
// by 7 and 8 in the same call; 6, 7, 8 land on ring indices 3, 4, 2. Rows in the order 8, 4, 6, 5, 7.
Case ring_case(WindowInput input) {
  Case c;
  c.num_heads = 1;
  c.head_dim = 4;
  c.input_dtype = c.cache_dtype = DType::f16;
  c.slot_dtype = IndexType::i32;
  c.layout = Layout::paged_nhd;
  c.cache = CacheGeometry{4, 2, 2 * 4, 4, 4};
  c.cache_k_offset = 0;
  c.cache_v_offset = 4 * 2 * 4;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  c.window_input = input;
  c.window_size = 5;
  c.window_sinks = 2;
  c.requests = {Request{4, 5, {3, 0, 2}, {8, 4, 6, 5, 7}}};
  const auto slot = [&](int64_t p) { const int64_t i = Window{5, 2}.index(p); return c.requests[0].blocks[i / 2] * 2 + i % 2; };
  for (const int64_t p : c.requests[0].positions)
    c.slot_mapping.push_back(input == WindowInput::slot_mapping && (p == 4 || p == 5) ? -1 : slot(p));
  c.num_input_rows = 5;
  c.key = InputView{0, 8, 4};
  c.value = InputView{4, 8, 4};
  c.input_buffer_elems = 5 * 8;
  c.payload_seed = 99;
  return c;
}

TEST(Window, handBuiltRingInBothInputs) {
  for (const WindowInput input : {WindowInput::slot_mapping, WindowInput::positions}) {
    SCOPED_TRACE(std::string(to_string(input)));
    const Case c = ring_case(input);
    ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
    EXPECT_EQ(case_to_json(case_from_json(case_to_json(c), "ring.json")), case_to_json(c));
    Arena expected = make_initial_arena(c);
    const Arena initial = expected;
    golden::golden_append(c, expected);
    // Ring index i holds (after the call): 0, 1 context (unchanged); 2 <- position 8 (row 0),
    // 3 <- 6 (row 2), 4 <- 7 (row 4).
    const FieldLayout k = c.cache_field(false);
    const auto at = [&](int64_t i) { return field_offset(k, c.requests[0].blocks[i / 2], i % 2, 0, 1); };
    const auto row_bits = [&](int64_t row) { return golden::input_bits(c, golden::Tensor::key, row, 0, 1); };
    EXPECT_EQ(load_elem(expected.cache(), at(2), 2), row_bits(0));
    EXPECT_EQ(load_elem(expected.cache(), at(3), 2), row_bits(2));
    EXPECT_EQ(load_elem(expected.cache(), at(4), 2), row_bits(4));
    for (const int64_t i : {0, 1}) EXPECT_EQ(load_elem(expected.cache(), at(i), 2), load_elem(initial.cache(), at(i), 2));
    // The CUDA kernel keeps the contract; the locator calls ring index 2 request 0's new token 8.
    auto target = make_target("cuda-emu");
    EXPECT_TRUE(check_case(*target, c, CheckOptions{}).pass());
    const CacheCell cell = CacheLocator(c).cell(false, c.requests[0].blocks[1], 0, 0, 0);
    EXPECT_EQ(cell.role, CacheCell::Role::new_token);
    EXPECT_EQ(cell.token, 8);
    EXPECT_EQ(CacheLocator(c).cell(false, c.requests[0].blocks[0], 1, 0, 0).role, CacheCell::Role::context);
  }
}

TEST(Window, validatorHoldsSlotMappingToThePositionalContract) {
  Case evicted = ring_case(WindowInput::slot_mapping);  // position 4's ring slot, though 7 evicts it
  evicted.slot_mapping[1] = evicted.slot_mapping[4];
  bool named = false;
  for (const ValidationProblem& p : validate(evicted)) named |= p.json_path == "/slot_mapping/1" || p.json_path == "/slot_mapping/4";
  EXPECT_TRUE(named);
  Case wrong = ring_case(WindowInput::positions);  // row 1 (position 4) at ring index 3 instead of 4
  wrong.slot_mapping[1] = wrong.slot_mapping[2];
  const auto problems = validate(wrong);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems.front().json_path, "/slot_mapping/1");
  EXPECT_NE(problems.front().message.find("ring index is 4"), std::string::npos) << problems.front().message;
  Case sinks = ring_case(WindowInput::positions);
  sinks.window_sinks = 5;
  EXPECT_FALSE(validate(sinks).empty());
}

// configs/serving.json's rings: valid, passing on the CUDA kernel, and a ring genotype with window
// input positions gives the cache its slot_mapping twin gives.
TEST(Window, bothInputsOfOneGenotypeGiveIdenticalCaches) {
  const Profile p = load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "serving.json");
  auto target = make_target("cuda-emu");
  int twins = 0, evicting = 0;
  for (int64_t i = 0; i < 1500 && twins < 60; ++i) {
    const Genotype g = generate_case(p, 31, i);
    if (g.window_input != WindowInput::positions) continue;
    Genotype twin = g;
    twin.window_input = WindowInput::slot_mapping;
    const Case a = materialize(g), b = materialize(twin);
    ASSERT_TRUE(validate(a).empty()) << validate(a).front().json_path << ": " << validate(a).front().message;
    ASSERT_TRUE(validate(b).empty()) << validate(b).front().json_path << ": " << validate(b).front().message;
    for (const int64_t s : b.slot_mapping) evicting += s == -1 ? 1 : 0;
    Arena x = make_initial_arena(a), y = make_initial_arena(b);
    ASSERT_EQ(target->run(a, x.data(), x.layout()).status, RunStatus::ok);
    ASSERT_EQ(target->run(b, y.data(), y.layout()).status, RunStatus::ok);
    ASSERT_EQ(x.layout().cache_bytes, y.layout().cache_bytes);
    EXPECT_EQ(std::memcmp(x.cache(), y.cache(), static_cast<size_t>(x.layout().cache_bytes)), 0) << "case " << i;
    EXPECT_TRUE(check_case(*target, a, CheckOptions{}).pass()) << "case " << i;
    ++twins;
  }
  EXPECT_GE(twins, 60);
  EXPECT_GT(evicting, 20);  // tokens evicted within their own call: the case the window input exists for
}

}  // namespace
}  // namespace kvf
