// case_wire_test.cpp — the worker hand-off's binary case (case/case_wire.h): every generated case
// comes back whole but for its genotype, and malformed bytes are refused with an InputError, never
// a crash. Here rather than in unit/case because the round trip draws cases from the generator.
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='CaseWire*'
//   RC_PARAMS="max_success=2000" ./build/tests/kvfuzz_gen_tests --gtest_filter='CaseWire*'
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "case/case_json.h"
#include "case/case_wire.h"
#include "gen/generate.h"
#include "gen/materialize.h"

namespace kvf {
namespace {

// The profiles between them reach every layout, family, format, serving convention and placement.
const std::vector<Profile>& profiles() {
  static const std::vector<Profile> p = [] {
    std::vector<Profile> out{default_profile()};
    for (const char* name : {"formats", "quant", "quant-formats", "serving", "placement"})
      out.push_back(load_profile(std::string(KVFUZZ_SOURCE_DIR) + "/configs/" + name + ".json"));
    return out;
  }();
  return p;
}

// The JSON text of a case without its genotype (what the wire carries), plus the two geometries whose
// num_blocks and block_size JSON leaves out (they are derived from the cache's when it is read).
std::string without_genotype(const Case& c) {
  nlohmann::json j = case_to_json(c);
  j.erase("genotype");
  j.erase("version");  // the oldest version that expresses the case, its genotype included
  const auto geometry = [](const CacheGeometry& g) {
    return nlohmann::json::array({g.num_blocks, g.block_size, g.stride_block, g.stride_pos, g.stride_head});
  };
  j["derived"] = {{"value_cache", c.value_cache ? geometry(*c.value_cache) : nlohmann::json()}, {"scale_cache", geometry(c.scale_cache)}};
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);  // provenance may hold any bytes
}

Case drawn_case() {
  const auto& all = profiles();
  const size_t which = *rc::gen::inRange<size_t>(0, all.size());
  Case c = materialize(*gen_genotype(all[which]));
  c.provenance.seed = *rc::gen::arbitrary<std::string>();
  c.provenance.command_line = *rc::gen::arbitrary<std::string>();
  c.provenance.case_index = *rc::gen::arbitrary<int64_t>();
  if (*rc::gen::arbitrary<bool>()) c.expect = {Expect::fail, *rc::gen::arbitrary<std::string>()};
  return c;
}

RC_GTEST_PROP(CaseWire, givesBackEveryGeneratedCaseButItsGenotype, ()) {
  const Case c = drawn_case();
  const Case back = decode_case_wire(encode_case_wire(c), "<test>");
  RC_ASSERT(!back.genotype.has_value());
  RC_ASSERT(without_genotype(back) == without_genotype(c));
}

RC_GTEST_PROP(CaseWire, refusesEveryTruncationWithAnInputError, ()) {
  const std::string wire = encode_case_wire(drawn_case());
  const size_t cut = *rc::gen::inRange<size_t>(0, wire.size());
  try {
    decode_case_wire(std::string_view(wire).substr(0, cut), "<test>");
    RC_FAIL("a truncated hand-off was accepted");
  } catch (const InputError& e) {
    RC_ASSERT(std::string(e.what()).find("<test>") == 0);
  }
}

// A byte changed anywhere is refused with an InputError or decodes to some case; nothing else
// escapes (no crash, no std::length_error or bad_alloc from a wild count).
RC_GTEST_PROP(CaseWire, survivesAnyChangedByte, ()) {
  std::string wire = encode_case_wire(drawn_case());
  const size_t at = *rc::gen::inRange<size_t>(0, wire.size());
  wire[at] = static_cast<char>(*rc::gen::arbitrary<uint8_t>());
  try {
    decode_case_wire(wire, "<test>");
  } catch (const InputError&) {
  }
}

TEST(CaseWire, refusesEveryPrefixOfAHandOff) {
  Genotype g;
  g.requests = {{5, 3}, {0, 1}};
  g.tail_padding = 2;
  g.layout_seed = 7;
  const std::string wire = encode_case_wire(materialize(g));
  for (size_t cut = 0; cut < wire.size(); ++cut)
    EXPECT_THROW(decode_case_wire(std::string_view(wire).substr(0, cut), "<test>"), InputError) << "cut at " << cut;
  EXPECT_NO_THROW(decode_case_wire(wire, "<test>"));
}

TEST(CaseWire, saysWhereAndWhatWasWrong) {
  Genotype g;
  g.requests = {{2, 2}};
  g.layout_seed = 3;
  const std::string wire = encode_case_wire(materialize(g));
  const auto message = [](std::string_view bytes) {
    try {
      decode_case_wire(bytes, "<worker>");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(""), "<worker>: malformed case hand-off (0 bytes), at byte 0: cut short reading the magic number (4 bytes needed, 0 left)");
  EXPECT_EQ(message("{\"schema\": \"kvfuzz-case\"}"), "<worker>: malformed case hand-off (25 bytes), at byte 0: not a case hand-off (wrong magic number)");
  EXPECT_NE(message(wire + "x").find("1 bytes follow the end of the case"), std::string::npos);
  // Byte 16 is input_dtype (after the magic number and three int32s).
  std::string bad_dtype = wire;
  bad_dtype[16] = static_cast<char>(200);
  EXPECT_NE(message(bad_dtype).find("at byte 16: input_dtype is 200, not a value it can have"), std::string::npos) << message(bad_dtype);
  // A count past the end: the slot_mapping claims 2^60 entries.
  const Case c = materialize(g);
  std::string counted = wire;
  const uint64_t n = c.slot_mapping.size();
  std::string needle(reinterpret_cast<const char*>(&n), sizeof n);
  for (int64_t s : c.slot_mapping) needle.append(reinterpret_cast<const char*>(&s), sizeof s);
  const size_t at = counted.find(needle);
  ASSERT_NE(at, std::string::npos);
  const uint64_t huge = uint64_t{1} << 60;
  counted.replace(at, sizeof huge, reinterpret_cast<const char*>(&huge), sizeof huge);
  EXPECT_NE(message(counted).find("slot_mapping claims 1152921504606846976 elements"), std::string::npos) << message(counted);
}

}  // namespace
}  // namespace kvf
