// sink_test.cpp — the sink padding mode (docs/contract.md, "Serving conventions"): padding rows
// carry slot 0, which no request owns; slot 0's contents after the call are unconstrained and
// everything else stays exact. Generator, case JSON, validator, golden model and classifier.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='Sink*'
#include <gtest/gtest.h>

#include <filesystem>

#include "report/verdict.h"
#include "case/case_json.h"
#include "base/errors.h"
#include "case/validate.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "gen/shrink.h"
#include "golden/golden.h"
#include "kv_format.cuh"

namespace kvf {
namespace {

std::string describe(const Verdict& v) {
  std::string s;
  for (const Finding& f : v.findings) s += std::string(to_string(f.kind)) + ": " + f.sentence + "\n";
  return s;
}

Profile serving() { return load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "serving.json"); }

// The first sink case of configs/serving.json (seed 5) with at least `padding` padding rows and a
// block size above 1.
Case sink_case(int padding = 1) {
  const Profile p = serving();
  for (int64_t i = 0; i < 1000; ++i) {
    Case c = materialize(generate_case(p, 5, i));
    if (c.padding != PaddingMode::sink || c.cache.block_size < 2 || is_quantized(c.cache_dtype)) continue;
    int64_t rows = 0;
    for (const int64_t s : c.slot_mapping) rows += s == 0 ? 1 : 0;
    if (rows >= padding) return c;
  }
  ADD_FAILURE() << "configs/serving.json drew no sink case";
  return {};
}

// Every padding row of a sink case is slot 0, no block table holds block 0, and the case is valid;
// the default profile never draws the mode.
TEST(Sink, generatedCasesLeaveBlockZeroToTheSink) {
  const Profile p = serving();
  int sinks = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const Genotype g = generate_case(p, 9, i);
    const Case c = materialize(g);
    ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
    if (c.padding != PaddingMode::sink) continue;
    ++sinks;
    int64_t zeros = 0;
    for (const int64_t s : c.slot_mapping) {
      EXPECT_GE(s, 0);
      zeros += s == 0 ? 1 : 0;
    }
    EXPECT_EQ(zeros, g.tail_padding + g.interleaved_padding);
    for (const Request& r : c.requests)
      for (const int64_t b : r.blocks) EXPECT_NE(b, 0);
  }
  EXPECT_GT(sinks, 30);  // half the draws, less the CSR ones (no padding rows), the rings and the sharded ones
  for (int64_t i = 0; i < 200; ++i) EXPECT_EQ(materialize(generate_case(default_profile(), 9, i)).padding, PaddingMode::negative);
}

// A sink case is version 2 with "serving": {"padding": "sink"}, and reads back as one; the key is
// refused in a version-1 file and an unknown mode by name.
TEST(Sink, caseJsonCarriesTheMode) {
  const Case c = sink_case();
  nlohmann::json j = case_to_json(c);
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(j.at("serving"), nlohmann::json({{"padding", "sink"}}));
  EXPECT_EQ(j.at("genotype").at("padding"), "sink");
  EXPECT_EQ(case_from_json(j, "sink.json").padding, PaddingMode::sink);
  EXPECT_EQ(case_to_json(case_from_json(j, "sink.json")), j);

  nlohmann::json bad = j;
  bad["serving"]["padding"] = "zero";
  try {
    case_from_json(bad, "bad.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/serving/padding");
    EXPECT_NE(std::string(e.what()).find("\"negative\", \"sink\""), std::string::npos) << e.what();
  }
  nlohmann::json v1 = case_to_json(materialize(generate_case(default_profile(), 1, 0)));
  ASSERT_EQ(v1.at("version"), 1);
  v1["serving"] = {{"padding", "sink"}};
  try {
    case_from_json(v1, "v1.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/serving");
    EXPECT_NE(std::string(e.what()).find("version 2 key"), std::string::npos) << e.what();
  }
}

// A negative slot, or block 0 in a block table, is refused in the sink mode, by path.
TEST(Sink, validatorNamesWhatTheModeForbids) {
  Case c = sink_case();
  size_t row = 0;
  while (c.slot_mapping[row] != 0) ++row;
  Case negative = c;
  negative.slot_mapping[row] = -1;
  const auto p1 = validate(negative);
  ASSERT_EQ(p1.size(), 1u);
  EXPECT_EQ(p1[0].json_path, "/slot_mapping/" + std::to_string(row));
  EXPECT_NE(p1[0].message.find("padding rows carry slot 0"), std::string::npos) << p1[0].message;

  Case owned = c;
  size_t r = 0;
  while (owned.requests[r].blocks.empty()) ++r;
  const int64_t taken = owned.requests[r].blocks[0];
  owned.requests[r].blocks[0] = 0;
  for (int64_t& s : owned.slot_mapping)  // the request's slots follow its block to block 0
    if (s / c.cache.block_size == taken) s = s % c.cache.block_size;
  bool named = false;
  for (const ValidationProblem& p : validate(owned))
    named |= p.json_path == "/requests/" + std::to_string(r) + "/blocks/0" && p.message.find("sink slot 0") != std::string::npos;
  EXPECT_TRUE(named);
  c.padding = PaddingMode::negative;  // the same slots in the default mode: slot 0 is a free block's
  EXPECT_FALSE(validate(c).empty());
}

// The golden model writes nothing for padding rows at the sink; whatever a kernel leaves in slot
// 0 (every field, head and dim) passes, while a write into block 0's slot 1 (a free block cell)
// is still a finding.
TEST(Sink, slotZeroIsUnconstrainedAndNothingElse) {
  const Case c = sink_case(2);
  const Arena initial = make_initial_arena(c);
  Arena expected = initial;
  golden::golden_append(c, expected);
  const int size = dtype_size(c.cache_dtype);
  for (const CacheField& f : c.fields())
    for (int64_t h = 0; h < f.num_heads; ++h)
      for (int64_t d = 0; d < f.head_dim; ++d) {
        const int64_t e = field_offset(f.layout, 0, 0, h, d);
        EXPECT_EQ(load_elem(expected.cache(), e, size), load_elem(initial.cache(), e, size));
      }
  Arena actual = expected;
  for (const CacheField& f : c.fields())
    for (int64_t h = 0; h < f.num_heads; ++h)
      for (int64_t d = 0; d < f.head_dim; ++d) store_elem(actual.cache(), field_offset(f.layout, 0, 0, h, d), size, 0x7fffu);
  const Verdict pass = compare_arenas(c, initial, expected, actual);
  EXPECT_TRUE(pass.pass()) << describe(pass);

  const CacheField& k = c.fields().field[0];
  store_elem(actual.cache(), field_offset(k.layout, 0, 1, 0, 0), size, load_elem(expected.cache(), field_offset(k.layout, 0, 0, 0, 0), size) ^ 1u);
  const Verdict fail = compare_arenas(c, initial, expected, actual);
  ASSERT_FALSE(fail.pass());
  EXPECT_EQ(fail.findings.front().kind, FindingKind::stray_write) << describe(fail);

  Case strict = c;  // the same garbage in the default mode's slot 0 (a free block) is a finding
  strict.padding = PaddingMode::negative;
  EXPECT_FALSE(compare_arenas(strict, initial, expected, actual).pass());
}

// The shrinker offers the default mode first: a failure that does not need the sink loses it.
TEST(Sink, shrinksTowardsNegativePadding) {
  const Case c = sink_case();
  ASSERT_TRUE(c.genotype);
  bool offered = false;
  for (const Genotype& g : shrink_genotype(*c.genotype, serving())) {
    if (g.padding != PaddingMode::negative) continue;
    offered = true;
    EXPECT_TRUE(simpler_than(g, *c.genotype, serving()));
  }
  EXPECT_TRUE(offered);
}

}  // namespace
}  // namespace kvf
