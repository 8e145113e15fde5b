// case_json_hostile_test.cpp — the strict reader against hostile and mistaken files: every refusal
// is an InputError naming the file, the JSON path and what was expected.
//   ./build/tests/kvfuzz_case_tests --gtest_filter='CaseJsonHostile.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <string>

#include "case/case_json.h"
#include "case_fixture.h"

// Largest single allocation made through operator new in this test binary since the last reset, so
// tests can show that absurd declared sizes are refused without allocating for them.
// GCC's -Wmismatched-new-delete cannot see that these replacements pair malloc with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
size_t g_largest_allocation = 0;
}
void* operator new(size_t n) {
  if (n > g_largest_allocation) g_largest_allocation = n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): otherwise a sanitizer's
// own nothrow new would pair with the free() above (ASan: alloc-dealloc-mismatch).
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace kvf {
namespace {

using nlohmann::json;
using test::edited;
using test::make_case;
using test::read_error;

#define EXPECT_REFUSED(text, path, message_part)                                          \
  do {                                                                                    \
    const InputError e = read_error(text);                                                \
    EXPECT_EQ(e.file(), "bad.json");                                                      \
    EXPECT_EQ(e.json_path(), path);                                                       \
    EXPECT_NE(e.message().find(message_part), std::string::npos) << "message: " << e.message(); \
  } while (0)

// --- not JSON --------------------------------------------------------------------------------

TEST(CaseJsonHostile, refusesAnEmptyFile) {
  EXPECT_REFUSED("", "", "the file is empty; expected a JSON object");
  EXPECT_REFUSED(" \n\t ", "", "the file is empty");
}

TEST(CaseJsonHostile, refusesTruncatedJsonWithTheByteOffset) {
  const std::string text = case_to_json(make_case()).dump(2);
  const std::string cut = text.substr(0, text.size() / 2);
  const InputError e = read_error(cut);
  EXPECT_EQ(e.json_path(), "");
  EXPECT_NE(e.message().find("not valid JSON at byte offset " + std::to_string(cut.size())), std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("the file looks truncated"), std::string::npos) << e.message();
  EXPECT_NE(std::string(e.what()).find("bad.json: not valid JSON"), std::string::npos) << e.what();
}

TEST(CaseJsonHostile, refusesBinaryGarbage) {
  std::string garbage;
  uint32_t x = 12345;
  for (int i = 0; i < 4096; ++i) {
    x = x * 1664525u + 1013904223u;
    garbage.push_back(static_cast<char>(x >> 24));
  }
  garbage[0] = '\x7f';
  garbage[10] = '\0';
  EXPECT_REFUSED(garbage, "", "not valid JSON at byte offset 0 (line 1, column 1)");
  EXPECT_REFUSED(garbage, "", "looks binary");
}

TEST(CaseJsonHostile, refusesNonUtf8BytesInAString) {
  const std::string text = edited([](json& j) { j["provenance"]["target"] = "cuda"; });
  std::string bad = text;
  bad.replace(bad.find("\"cuda\""), 6, "\"cu\xff\xfe\"");
  const InputError e = read_error(bad);
  EXPECT_EQ(e.json_path(), "");
  EXPECT_NE(e.message().find("not valid UTF-8"), std::string::npos) << e.message();
  // Echoed bytes are escaped: the message itself is printable ASCII.
  for (char ch : e.message()) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << e.message();
}

TEST(CaseJsonHostile, refusesTrailingContent) {
  EXPECT_REFUSED(case_to_json(make_case()).dump() + " {}", "", "not valid JSON at byte offset");
}

TEST(CaseJsonHostile, refusesNestingDepthOfAThousand) {
  const std::string arrays = std::string(1000, '[') + std::string(1000, ']');
  std::string path;
  for (int i = 0; i < kMaxJsonDepth; ++i) path += "/0";
  EXPECT_REFUSED(arrays, path, "JSON nested deeper than 64 levels");

  std::string objects;
  for (int i = 0; i < 1000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(1000, '}');
  const InputError e = read_error(objects);
  EXPECT_EQ(e.json_path().size(), 64u * 2);  // "/a" 64 times
  EXPECT_NE(e.message().find("deeper than 64"), std::string::npos);
}

TEST(CaseJsonHostile, acceptsNestingOfExactlyTheLimitAsJson) {
  const std::string arrays = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parse_json_strict(arrays, "deep.json"));
}

TEST(CaseJsonHostile, refusesDuplicateKeys) {
  std::string text = case_to_json(make_case()).dump();
  EXPECT_REFUSED("{\"schema\":\"kvfuzz-case\",\"schema\":\"kvfuzz-case\"}", "/schema", "duplicate key \"schema\"");
  text.replace(text.find("\"shape\":{"), 9, "\"shape\":{\"num_heads\":2,");
  EXPECT_REFUSED(text, "/shape/num_heads", "duplicate key \"num_heads\"");
}

TEST(CaseJsonHostile, refusesDuplicateKeysInsideArrays) {
  std::string text = case_to_json(make_case()).dump();
  const size_t second = text.find("{\"blocks\"", text.find("{\"blocks\"") + 1);
  ASSERT_NE(second, std::string::npos);
  text.replace(second, 9, "{\"new_len\":1,\"blocks\"");
  const InputError e = read_error(text);
  EXPECT_EQ(e.json_path(), "/requests/1/new_len");
  EXPECT_NE(e.message().find("duplicate key \"new_len\""), std::string::npos) << e.message();
}

// --- schema ----------------------------------------------------------------------------------

TEST(CaseJsonHostile, refusesANewerSchemaVersion) {
  const InputError e = read_error(edited([](json& j) {
    j["version"] = 3;
    j["new_v3_section"] = json::object();  // a newer file may have keys v2 does not know
  }));
  EXPECT_EQ(e.json_path(), "/version");
  EXPECT_EQ(e.message(), "case schema version 3 was written by a newer kvfuzz; this kvfuzz reads version 2");
}

TEST(CaseJsonHostile, refusesVersionZeroAndNonIntegerVersions) {
  EXPECT_REFUSED(edited([](json& j) { j["version"] = 0; }), "/version", "is not one kvfuzz ever wrote");
  EXPECT_REFUSED(edited([](json& j) { j["version"] = "1"; }), "/version", "expected the integer 1 or 2, got the string \"1\"");
  EXPECT_REFUSED(edited([](json& j) { j["version"] = 1.0; }), "/version", "expected the integer 1");
}

TEST(CaseJsonHostile, refusesAWrongSchemaName) {
  EXPECT_REFUSED(edited([](json& j) { j["schema"] = "kvfuzz-profile"; }), "/schema",
                 "expected \"kvfuzz-case\", got the string \"kvfuzz-profile\"; is this a kvfuzz case file?");
  EXPECT_REFUSED(edited([](json& j) { j.erase("schema"); }), "/schema", "missing key \"schema\"");
}

TEST(CaseJsonHostile, refusesATopLevelThatIsNotAnObject) {
  EXPECT_REFUSED("[1, 2, 3]", "", "expected a JSON object (a kvfuzz case), got an array");
  EXPECT_REFUSED("42", "", "got the integer 42");
}

TEST(CaseJsonHostile, refusesAMissingKey) {
  EXPECT_REFUSED(edited([](json& j) { j["cache"].erase("stride_pos"); }), "/cache/stride_pos",
                 "missing key \"stride_pos\"");
  EXPECT_REFUSED(edited([](json& j) { j.erase("requests"); }), "/requests", "missing key \"requests\"");
  EXPECT_REFUSED(edited([](json& j) { j["provenance"].erase("target"); }), "/provenance/target", "missing key");
  EXPECT_REFUSED(edited([](json& j) { j["requests"][0].erase("blocks"); }), "/requests/0/blocks", "missing key");
}

TEST(CaseJsonHostile, refusesAnUnknownKey) {
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["foo"] = 1; }), "/shape/foo",
                 "unknown key \"foo\"; expected one of \"num_heads\", \"head_dim\"");
  EXPECT_REFUSED(edited([](json& j) { j["extra"] = 1; }), "/extra", "(optional: \"genotype\", \"format\", \"serving\", \"explicit_inputs\")");
  EXPECT_REFUSED(edited([](json& j) { j["input"]["key"]["a/b~c"] = 1; }), "/input/key/a~1b~0c", "unknown key");
}

TEST(CaseJsonHostile, refusesAFindingKindOnAPassingCase) {
  EXPECT_REFUSED(edited([](json& j) { j["expect"]["finding_kind"] = "padding_leak"; }), "/expect/finding_kind",
                 "a case expected to pass has no finding_kind");
  EXPECT_REFUSED(edited([](json& j) { j["expect"] = {{"outcome", "fail"}}; }), "/expect/finding_kind",
                 "missing key");
  EXPECT_REFUSED(edited([](json& j) { j["expect"] = {{"outcome", "crash"}}; }), "/expect/outcome",
                 "expected \"pass\" or \"fail\"");
}

TEST(CaseJsonHostile, refusesAnUnknownEnumName) {
  EXPECT_REFUSED(edited([](json& j) { j["cache"]["layout"] = "paged_xyz"; }), "/cache/layout",
                 "unknown layout \"paged_xyz\"; expected one of \"paged_nhd\", \"paged_hnd\"");
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["cache_dtype"] = "fp8"; }), "/shape/cache_dtype",
                 "unknown dtype \"fp8\"; expected one of \"f16\", \"bf16\", \"f32\"");
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["slot_dtype"] = 64; }), "/shape/slot_dtype",
                 "expected a string, one of \"i32\", \"i64\", got the integer 64");
  EXPECT_REFUSED(edited([](json& j) { j["payload"]["dist"] = "normal"; }), "/payload/dist", "unknown value distribution");
}

// --- types -----------------------------------------------------------------------------------

TEST(CaseJsonHostile, refusesAStringForAnInteger) {
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["num_heads"] = "12"; }), "/shape/num_heads",
                 "expected an integer, got the string \"12\"");
}

TEST(CaseJsonHostile, refusesAFloatForAnInteger) {
  EXPECT_REFUSED(edited([](json& j) { j["cache"]["block_size"] = 16.0; }), "/cache/block_size",
                 "expected an integer, got the non-integer number 16.0");
  EXPECT_REFUSED("{\"schema\":\"kvfuzz-case\",\"version\":1e0}", "/version", "expected the integer 1");
}

TEST(CaseJsonHostile, refusesABoolOrNullForAnInteger) {
  EXPECT_REFUSED(edited([](json& j) { j["input"]["num_rows"] = true; }), "/input/num_rows",
                 "expected an integer, got true");
  EXPECT_REFUSED(edited([](json& j) { j["slot_mapping"][2] = nullptr; }), "/slot_mapping/2",
                 "expected an integer, got null");
}

TEST(CaseJsonHostile, refusesANegativeSize) {
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["num_heads"] = -3; }), "/shape/num_heads",
                 "expected an integer in [1, 1024], got -3");
  EXPECT_REFUSED(edited([](json& j) { j["cache"]["block_size"] = -3; }), "/cache/block_size",
                 "expected an integer >= 1, got -3");
  EXPECT_REFUSED(edited([](json& j) { j["requests"][1]["new_len"] = -1; }), "/requests/1/new_len",
                 "expected an integer >= 0, got -1");
}

TEST(CaseJsonHostile, refusesIntegersOutsideTheFieldType) {
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["head_dim"] = 3000000000LL; }), "/shape/head_dim",
                 "expected an integer in [-2147483648, 2147483647] (int32), got 3000000000");
  EXPECT_REFUSED(edited([](json& j) { j["cache"]["num_blocks"] = 18446744073709551615ull; }), "/cache/num_blocks",
                 "(int64), got 18446744073709551615");
  // Beyond uint64, nlohmann reads a float: still not an integer.
  std::string text = edited([](json& j) { j["cache"]["num_blocks"] = 7; });
  text.replace(text.find("\"num_blocks\":7"), 14, "\"num_blocks\":123456789012345678901234567890");
  EXPECT_REFUSED(text, "/cache/num_blocks", "expected an integer, got the non-integer number");
  std::string huge = text;
  huge.replace(huge.find("123456789012345678901234567890"), 30, "1e999");
  EXPECT_REFUSED(huge, "", "not valid JSON at byte offset");
}

TEST(CaseJsonHostile, refusesMalformedSeeds) {
  EXPECT_REFUSED(edited([](json& j) { j["payload"]["seed"] = 42; }), "/payload/seed",
                 "expected a uint64 as a string of decimal digits (e.g. \"42\"), got the integer 42");
  EXPECT_REFUSED(edited([](json& j) { j["payload"]["seed"] = "-1"; }), "/payload/seed", "decimal digits");
  EXPECT_REFUSED(edited([](json& j) { j["payload"]["seed"] = ""; }), "/payload/seed", "decimal digits");
  EXPECT_REFUSED(edited([](json& j) { j["payload"]["seed"] = "0x10"; }), "/payload/seed", "decimal digits");
  EXPECT_REFUSED(edited([](json& j) { j["payload"]["seed"] = "18446744073709551616"; }), "/payload/seed",
                 "(too large)");
  const Case c = case_from_text(edited([](json& j) { j["payload"]["seed"] = "18446744073709551615"; }), "ok.json");
  EXPECT_EQ(c.payload_seed, 18446744073709551615ull);
}

TEST(CaseJsonHostile, refusesWrongContainerTypes) {
  EXPECT_REFUSED(edited([](json& j) { j["shape"] = json::array(); }), "/shape", "expected an object, got an array");
  EXPECT_REFUSED(edited([](json& j) { j["slot_mapping"] = json::object(); }), "/slot_mapping",
                 "expected an array, got an object");
  EXPECT_REFUSED(edited([](json& j) { j["requests"][0] = 5; }), "/requests/0", "expected an object");
  EXPECT_REFUSED(edited([](json& j) { j["provenance"]["seed"] = 5; }), "/provenance/seed", "expected a string");
}

TEST(CaseJsonHostile, refusesABadGenotype) {
  Case c = make_case();
  c.genotype = test::make_genotype();
  EXPECT_REFUSED(edited([](json& j) { j["genotype"]["fused_qkv"] = 1; }, c), "/genotype/fused_qkv",
                 "expected true or false, got the integer 1");
  EXPECT_REFUSED(edited([](json& j) { j["genotype"]["requests"][1]["x"] = 1; }, c), "/genotype/requests/1/x",
                 "unknown key \"x\"; expected one of \"context_len\", \"new_len\"");
  EXPECT_REFUSED(edited([](json& j) { j["genotype"]["block_size"] = 0; }, c), "/genotype/block_size",
                 "expected an integer >= 1, got 0");
  EXPECT_REFUSED(edited([](json& j) { j["genotype"]["requests"][0]["context_len"] = 1LL << 50; }, c),
                 "/genotype/requests", "the cache buffer of this genotype needs");
}

// --- quantisation ----------------------------------------------------------------------------

TEST(CaseJsonHostile, refusesAFileWithoutTheQuantObject) {
  // Files written before quantisation existed (the format has no default for it).
  EXPECT_REFUSED(edited([](json& j) { j.erase("quant"); }), "/quant", "missing key \"quant\"");
  EXPECT_REFUSED(edited([](json& j) { j["quant"].erase("scale_cache_elems"); }), "/quant/scale_cache_elems",
                 "missing key");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_cache"].erase("stride_pos"); }),
                 "/quant/scale_cache/stride_pos", "missing key");
  Case c = make_case();
  c.genotype = test::make_genotype();
  EXPECT_REFUSED(edited([](json& j) { j["genotype"].erase("scale_kind"); }, c), "/genotype/scale_kind",
                 "missing key");
}

TEST(CaseJsonHostile, refusesUnknownOrMistypedQuantFields) {
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_cache"]["num_blocks"] = 6; }),
                 "/quant/scale_cache/num_blocks",
                 "unknown key \"num_blocks\"; expected one of \"stride_block\", \"stride_pos\", \"stride_head\"");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale"] = 1.0; }), "/quant/scale", "unknown key");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_kind"] = "per_channel"; }), "/quant/scale_kind",
                 "unknown scale kind \"per_channel\"; expected one of \"none\", \"per_tensor\", \"per_head\", "
                 "\"per_block\", \"per_token_head\"");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_dist"] = 1; }), "/quant/scale_dist",
                 "expected a string, one of \"unit\", \"pow2\", \"random\", \"extreme\", got the integer 1");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_k_offset"] = "0"; }), "/quant/scale_k_offset",
                 "expected an integer, got the string \"0\"");
  EXPECT_REFUSED(edited([](json& j) { j["quant"] = json::array(); }), "/quant", "expected an object, got an array");
}

TEST(CaseJsonHostile, refusesQuantisationTheContractDoesNotDefine) {
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["input_dtype"] = "fp8_e5m2"; }), "/shape/input_dtype",
                 "quantised dtypes are cache-only");
  EXPECT_REFUSED(edited([](json& j) { j["shape"]["cache_dtype"] = "fp8_e4m3"; }), "/quant/scale_kind",
                 "cache_dtype \"fp8_e4m3\" is quantised and needs scales");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_kind"] = "per_head"; }), "/quant/scale_kind",
                 "cache_dtype \"f16\" is not quantised: expected scale_kind \"none\", got \"per_head\"");
  const Case q = make_case({.cache_dtype = DType::int8, .scale_kind = ScaleKind::per_head});
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_cache"]["stride_pos"] = 2; }, q),
                 "/quant/scale_cache/stride_pos", "expected 0, got 2: only scale_kind \"per_token_head\" has a scale cache");
  const Case d = make_case({.cache_dtype = DType::int8, .scale_kind = ScaleKind::per_token_head});
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_cache"]["stride_pos"] = 1; }, d),
                 "/quant/scale_cache/stride_pos", "K/V scale cache cells overlap");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_cache_elems"] = 1LL << 62; }, d), "/quant/scale_cache_elems",
                 "scale cache buffer needs 16 EiB; the limit is 1 GiB (--max-case-mib)");
  EXPECT_REFUSED(edited([](json& j) { j["quant"]["scale_dist"] = "random"; }, d), "/quant/scale_dist",
                 "has no static scales");
}

// --- absurd sizes ----------------------------------------------------------------------------

TEST(CaseJsonHostile, refusesTerabyteBuffersWithoutAllocatingForThem) {
  const std::string input = edited([](json& j) { j["input"]["buffer_elems"] = 1000000000000000LL; });
  const std::string cache = edited([](json& j) {
    j["cache"]["num_blocks"] = 1LL << 40;
    j["cache"]["buffer_elems"] = 1LL << 62;
  });
  const std::string context = edited([](json& j) { j["requests"][0]["context_len"] = 1LL << 60; });
  g_largest_allocation = 0;
  const InputError a = read_error(input);
  const InputError b = read_error(cache);
  const InputError c = read_error(context);
  EXPECT_LT(g_largest_allocation, size_t{1} << 20);  // the files are small; nothing else may be big

  EXPECT_EQ(a.json_path(), "/input/buffer_elems");
  EXPECT_EQ(a.message(), "input buffer needs 1.8 PiB; the limit is 1 GiB (--max-case-mib)");
  EXPECT_EQ(b.json_path(), "/cache/buffer_elems");
  EXPECT_EQ(b.message(), "cache buffer needs 8 EiB; the limit is 1 GiB (--max-case-mib)");
  EXPECT_EQ(c.json_path(), "/requests/0/blocks");
  EXPECT_NE(c.message().find("tokens need 288230376151711745 blocks"), std::string::npos) << c.message();
}

TEST(CaseJsonHostile, honoursACustomLimit) {
  Limits small;
  small.max_buffer_bytes = 1024;
  const InputError e = read_error(case_to_json(make_case()).dump(), small);
  EXPECT_EQ(e.json_path(), "/cache/buffer_elems");
  EXPECT_NE(e.message().find("; the limit is 1 KiB (--max-case-mib)"), std::string::npos) << e.message();
}

TEST(CaseJsonHostile, listsUpToFiveProblemsInOneError) {
  const InputError e = read_error(edited([](json& j) {
    for (const char* k : {"stride_block", "stride_pos", "stride_head", "k_offset", "num_blocks", "buffer_elems"}) {
      j["cache"][k] = -1;
    }
  }));
  EXPECT_EQ(e.json_path(), "/cache/num_blocks");
  EXPECT_NE(e.message().find("\n  also at /cache/stride_block: expected an integer >= 0, got -1"), std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("\n  and "), std::string::npos) << e.message();
}

// --- only InputError escapes -----------------------------------------------------------------

TEST(CaseJsonHostile, throwsOnlyInputErrorForArbitraryJsonValues) {
  const json values[] = {json(nullptr), json(true), json(1.5), json("x"), json::array({1, 2}), json::object(),
                         json::binary({1, 2, 3}), json(json::value_t::discarded)};
  for (const json& v : values) {
    EXPECT_THROW(case_from_json(v, "v.json"), InputError) << v.type_name();
    json c = case_to_json(make_case());
    c["shape"]["num_heads"] = v;
    EXPECT_THROW(case_from_json(c, "v.json"), InputError) << v.type_name();
    c = case_to_json(make_case());
    c["requests"][0]["blocks"] = v;
    EXPECT_THROW(case_from_json(c, "v.json"), InputError) << v.type_name();
  }
}

TEST(CaseJsonHostile, survivesEveryPrefixOfAValidFile) {
  Case valid = make_case();
  valid.genotype = test::make_genotype();
  const std::string text = case_to_json(valid).dump();
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_THROW(case_from_text(text.substr(0, n), "prefix.json"), InputError) << n;
  }
  EXPECT_NO_THROW(case_from_text(text, "whole.json"));
}

TEST(CaseJsonHostile, survivesSingleByteCorruptions) {
  const std::string text = case_to_json(make_case()).dump();
  for (size_t i = 0; i < text.size(); i += 3) {
    for (char ch : {'\0', '"', '{', '[', '-', '9', '\xff', 'e', ','}) {
      std::string bad = text;
      bad[i] = ch;
      try {
        case_from_text(bad, "corrupt.json");
      } catch (const InputError&) {
      }
    }
  }
}

}  // namespace
}  // namespace kvf
