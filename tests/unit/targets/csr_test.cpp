// csr_test.cpp — FlashInfer's CSR addressing (src/case/csr.h, docs/contract.md "Serving
// conventions"): the arrays of a hand-built case, the case JSON and validator rules, and the two
// forms of one genotype — slot_mapping and CSR — giving identical caches on the CUDA kernel.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='Csr*'
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "../arena/test_cases.h"
#include "arena/arena.h"
#include "campaign/check.h"
#include "case/csr.h"
#include "case/case_json.h"
#include "case/validate.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "targets/target.h"

namespace kvf {
namespace {

// test::paged_nhd_case() without its padding and invalid rows (bs 4):
//   request 0: context 3, new 2, blocks {5, 2} -> positions 3, 4 at slots 23, 8
//   request 1: context 5, new 1, blocks {0, 7} -> position 5 at slot 29
//   request 2: context 0, new 3, blocks {4}    -> positions 0..2 at slots 16..18
Case csr_case() {
  Case c = test::paged_nhd_case();
  c.addressing = Addressing::csr;
  c.slot_dtype = IndexType::i32;
  c.slot_mapping = {23, 8, 29, 16, 17, 18};
  c.num_input_rows = 8;
  return c;
}

TEST(Csr, arraysOfAHandBuiltCase) {
  const Case c = csr_case();
  ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
  const CsrArrays a = csr_arrays(c);
  EXPECT_EQ(a.batch_indices, (std::vector<int32_t>{0, 0, 1, 2, 2, 2}));
  EXPECT_EQ(a.positions, (std::vector<int32_t>{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(a.kv_indptr, (std::vector<int32_t>{0, 2, 4, 5}));
  EXPECT_EQ(a.kv_indices, (std::vector<int32_t>{5, 2, 0, 7, 4}));  // each request's pages, no more
  EXPECT_EQ(a.kv_last_page_len, (std::vector<int32_t>{1, 2, 3}));  // extents 5, 6, 3 in pages of 4
  EXPECT_EQ(a.size(), 6 + 6 + 4 + 3 + 5);
  EXPECT_EQ(csr_element_name(a, a.kv_indices_at() + 3), "kv_indices[3]");
  EXPECT_EQ(csr_element_name(a, 7), "positions[1]");
  // The arena's slots section holds them, packed, for the kernel (slot_mapping is not passed).
  const Arena arena = make_initial_arena(c);
  ASSERT_EQ(arena.layout().slots_bytes, a.size() * 4);
  const std::vector<int32_t> packed = a.packed();
  EXPECT_EQ(std::memcmp(arena.slots(), packed.data(), packed.size() * 4), 0);
}

TEST(Csr, validatorRefusesWhatACsrCallCannotCarry) {
  Case padded = csr_case();
  padded.slot_mapping.push_back(-1);
  const auto p1 = validate(padded);
  ASSERT_FALSE(p1.empty());
  EXPECT_EQ(p1.front().json_path, "/slot_mapping/6");
  EXPECT_NE(p1.front().message.find("no padding and no invalid rows"), std::string::npos) << p1.front().message;
  Case wide = csr_case();
  wide.slot_dtype = IndexType::i64;
  ASSERT_FALSE(validate(wide).empty());
  EXPECT_EQ(validate(wide).front().json_path, "/shape/slot_dtype");
  Case sink = csr_case();
  sink.padding = PaddingMode::sink;
  bool named = false;
  for (const ValidationProblem& p : validate(sink)) named |= p.json_path == "/serving/padding";
  EXPECT_TRUE(named);
}

TEST(Csr, caseJsonCarriesTheAddressing) {
  const Case c = csr_case();
  const nlohmann::json j = case_to_json(c);
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(j.at("serving"), nlohmann::json({{"addressing", "csr"}}));
  const Case back = case_from_json(j, "csr.json");
  EXPECT_EQ(back.addressing, Addressing::csr);
  EXPECT_EQ(case_to_json(back), j);
}

// The slot_mapping twin of a CSR genotype (the same genotype, addressing slot_mapping) has the
// same rows; the CUDA kernel leaves both caches byte for byte the same, and both pass.
TEST(Csr, bothFormsOfOneGenotypeGiveIdenticalCaches) {
  const Profile p = load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "serving.json");
  auto target = make_target("cuda-emu");
  int twins = 0;
  for (int64_t i = 0; i < 400 && twins < 60; ++i) {
    const Genotype g = generate_case(p, 21, i);
    if (g.addressing != Addressing::csr) continue;
    Genotype slot_twin = g;
    slot_twin.addressing = Addressing::slot_mapping;
    const Case csr = materialize(g), slots = materialize(slot_twin);
    ASSERT_EQ(csr.slot_mapping, slots.slot_mapping);
    ASSERT_TRUE(validate(csr).empty()) << validate(csr).front().json_path << ": " << validate(csr).front().message;
    Arena a = make_initial_arena(csr), b = make_initial_arena(slots);
    ASSERT_EQ(std::memcmp(a.cache(), b.cache(), static_cast<size_t>(a.layout().cache_bytes)), 0);
    ASSERT_EQ(target->run(csr, a.data(), a.layout()).status, RunStatus::ok);
    ASSERT_EQ(target->run(slots, b.data(), b.layout()).status, RunStatus::ok);
    EXPECT_EQ(std::memcmp(a.cache(), b.cache(), static_cast<size_t>(a.layout().cache_bytes)), 0) << "case " << i;
    EXPECT_TRUE(check_case(*target, csr, CheckOptions{}).pass()) << "case " << i;
    ++twins;
  }
  EXPECT_GE(twins, 60);
}

}  // namespace
}  // namespace kvf
