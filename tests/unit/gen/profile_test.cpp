// profile_test.cpp — the profile loader: configs/*.json load, and every class of bad file is
// refused with the file, the JSON pointer and what was expected.
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='Profile*'
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "gen/profile.h"

namespace kvf {
namespace {

using nlohmann::json;

const std::string kConfigs = std::string(KVFUZZ_SOURCE_DIR) + "/configs/";

json default_json() {
  std::ifstream in(kConfigs + "default.json");
  return json::parse(in);
}

// Writes `text` to a fresh file under the test temp dir and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "kvfuzz_profile_" + name + ".json";
  std::ofstream(path) << text;
  return path;
}

// Loads default.json after `edit` and expects an InputError at `path` whose message contains
// `expected`.
void expect_refused(const std::string& name, const std::function<void(json&)>& edit, const std::string& path,
                    const std::string& expected) {
  json j = default_json();
  edit(j);
  const std::string file = write_temp(name, j.dump(2));
  try {
    load_profile(file);
    ADD_FAILURE() << name << ": accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), file) << name;
    EXPECT_EQ(e.json_path(), path) << name << ": " << e.what();
    EXPECT_NE(e.message().find(expected), std::string::npos) << name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << name;
  }
}

TEST(Profile, defaultJsonEqualsTheBuiltInDefault) {
  EXPECT_TRUE(load_profile(kConfigs + "default.json") == default_profile());
}

TEST(Profile, profileToJsonIsTheFileFormAndReadsBack) {
  json j = default_json();
  j["min_tensor_elements"] = 0;  // optional in the file, always written
  EXPECT_EQ(profile_to_json(default_profile()), j);
  Profile odd = load_profile(kConfigs + "quant.json");
  EXPECT_TRUE(profile_from_text(profile_to_json(odd).dump(), "mem") == odd);
}

// Partial profiles: only the keys that change, over "default" or another file.
TEST(Profile, aPartialProfileOverlaysTheDefaultKeyByKey) {
  const std::string file = write_temp("partial_layouts", R"({"schema": "kvfuzz-config", "version": 1, "extends": "default",
    "layouts": {"values": ["paged_hnd"], "weights": [1]}, "block_sizes": {"values": [16], "weights": [1]}})");
  const Profile p = load_profile(file);
  Profile expect = default_profile();
  expect.name = "kvfuzz_profile_partial_layouts";  // no name: the file's stem
  expect.layouts = {{Layout::paged_hnd}, {1}};
  expect.block_sizes = {{16}, {1}};
  EXPECT_TRUE(p == expect);
}

TEST(Profile, partialProfilesChainThroughFilesRelativeToEachOther) {
  const std::string dir = ::testing::TempDir() + "kvfuzz_profile_chain/";
  std::filesystem::create_directories(dir + "sub");
  std::ofstream(dir + "base.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "default", "name": "base",
    "max_requests": 2, "num_heads": {"values": [4], "weights": [1]}})";
  std::ofstream(dir + "sub/top.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "../base.json",
    "name": "top", "max_requests": 3})";
  const Profile p = load_profile(dir + "sub/top.json");
  EXPECT_EQ(p.name, "top");
  EXPECT_EQ(p.max_requests, 3);                   // top's own
  EXPECT_EQ(p.num_heads, (Weighted<int32_t>{{4}, {1}}));  // from base.json
  EXPECT_EQ(p.head_dims, default_profile().head_dims);    // from the default, two levels down
}

TEST(Profile, aBadValueTakenFromABaseNamesTheBaseFile) {
  const std::string dir = ::testing::TempDir() + "kvfuzz_profile_origin/";
  std::filesystem::create_directories(dir);
  json base = default_json();
  base["max_requests"] = 0;  // out of range, but only a base
  std::ofstream(dir + "base.json") << base.dump();
  std::ofstream(dir + "top.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "base.json"})";
  try {
    load_profile(dir + "top.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), dir + "base.json");
    EXPECT_EQ(e.json_path(), "/max_requests");
    EXPECT_NE(e.message().find("taken by " + dir + "top.json"), std::string::npos) << e.what();
  }
  // The overlay's own value is its own: fixing it there is accepted.
  std::ofstream(dir + "top.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "base.json", "max_requests": 5})";
  EXPECT_EQ(load_profile(dir + "top.json").max_requests, 5);
}

TEST(Profile, extendsCyclesMissingBasesAndBadValuesAreRefused) {
  const std::string dir = ::testing::TempDir() + "kvfuzz_profile_cycle/";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "a.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "b.json"})";
  std::ofstream(dir + "b.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "./a.json"})";
  const auto refused = [](const std::string& file, const std::string& in_file, const std::string& expected) {
    try {
      load_profile(file);
      ADD_FAILURE() << file << ": accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), in_file) << e.what();
      EXPECT_NE(e.message().find(expected), std::string::npos) << e.what();
    }
  };
  refused(dir + "a.json", dir + "b.json", "makes a cycle");
  std::ofstream(dir + "c.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "missing.json"})";
  refused(dir + "c.json", dir + "missing.json", "cannot open");
  std::ofstream(dir + "d.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": 3})";
  refused(dir + "d.json", dir + "d.json", "expected \"default\"");
  std::ofstream(dir + "e.json") << R"({"schema": "kvfuzz-config", "version": 1, "extends": "default", "layout": 1})";
  refused(dir + "e.json", dir + "e.json", "unknown key");
  std::ofstream(dir + "f.json") << R"({"schema": "kvfuzz-config", "version": 1, "layouts": {"values": ["paged_nhd"], "weights": [1]}})";
  refused(dir + "f.json", dir + "f.json", "missing key");  // without extends a profile is whole
}

TEST(Profile, layoutFeatureKeysAreOptionalWithCompatibleDefaults) {
  // A profile written before the keys existed: gaps and odd bases keep irregular_percent's share
  // (drawn independently now), K/V views get the built-in default's list.
  json j = default_json();
  j.erase("gapped_strides_percent");
  j.erase("misaligned_bases_percent");
  j.erase("kv_views");
  j["irregular_percent"] = 20;
  const Profile p = load_profile(write_temp("old_keys", j.dump(2)));
  EXPECT_EQ(p.gapped_strides_percent, 20);
  EXPECT_EQ(p.misaligned_bases_percent, 20);
  EXPECT_EQ(p.kv_views, default_profile().kv_views);
  j["gapped_strides_percent"] = 70;
  j["misaligned_bases_percent"] = 0;
  j["kv_views"] = {{"values", {"alike", "value_head_major"}}, {"weights", {1, 3}}};
  const Profile q = load_profile(write_temp("new_keys", j.dump(2)));
  EXPECT_EQ(q.gapped_strides_percent, 70);
  EXPECT_EQ(q.misaligned_bases_percent, 0);
  EXPECT_EQ(q.kv_views.values, (std::vector<KvViews>{KvViews::alike, KvViews::value_head_major}));
  EXPECT_EQ(q.kv_views.weights, (std::vector<int>{1, 3}));
}

TEST(Profile, refusesBadLayoutFeatureKeys) {
  expect_refused("gapped_range", [](json& j) { j["gapped_strides_percent"] = 101; }, "/gapped_strides_percent",
                 "[0, 100]");
  expect_refused("misaligned_type", [](json& j) { j["misaligned_bases_percent"] = "50"; }, "/misaligned_bases_percent",
                 "expected an integer");
  expect_refused("kv_views_name", [](json& j) { j["kv_views"]["values"][1] = "value_cols"; }, "/kv_views/values/1",
                 "value_head_major");
  expect_refused("kv_views_zero", [](json& j) { j["kv_views"]["weights"] = json::array({0, 0, 0, 0}); },
                 "/kv_views/weights", "at least one weight > 0");
}

TEST(Profile, smokeJsonLoads) {
  const Profile p = load_profile(kConfigs + "smoke.json");
  EXPECT_EQ(p.name, "smoke");
  EXPECT_LE(p.max_elements_per_case, 4096);
}

TEST(Profile, quantJsonLoadsAndQuantisesEveryCase) {
  const Profile p = load_profile(kConfigs + "quant.json");
  EXPECT_EQ(p.name, "quant");
  EXPECT_EQ(p.quant_percent, 100);
  EXPECT_EQ(p.cross_dtype_percent, 0);
  for (size_t i = 0; i < p.cache_dtypes.values.size(); ++i)
    if (p.cache_dtypes.weights[i] > 0) {
      EXPECT_TRUE(is_quantized(p.cache_dtypes.values[i]));
    }
  EXPECT_EQ(p.cache_dtypes.values.size(), 3u);
  EXPECT_EQ(p.scale_kinds.values.size(), 4u);
  EXPECT_EQ(p.scale_dists.values.size(), 4u);
  for (int w : p.scale_kinds.weights) EXPECT_GT(w, 0);
  for (int w : p.scale_dists.weights) EXPECT_GT(w, 0);
}

TEST(Profile, defaultAndSmokeQuantiseAShareOfCases) {
  for (const Profile& p : {default_profile(), load_profile(kConfigs + "smoke.json")}) {
    EXPECT_GT(p.quant_percent, 0) << p.name;
    EXPECT_LE(p.quant_percent + p.cross_dtype_percent, 100) << p.name;
    for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8})
      EXPECT_NE(std::find(p.cache_dtypes.values.begin(), p.cache_dtypes.values.end(), t), p.cache_dtypes.values.end())
          << p.name << " " << to_string(t);
    EXPECT_EQ(p.scale_kinds.values.size(), 4u) << p.name;
    EXPECT_NE(std::find(p.value_dists.values.begin(), p.value_dists.values.end(), ValueDist::ties),
              p.value_dists.values.end())
        << p.name;
  }
}

TEST(Profile, refusesQuantisationItCannotGenerate) {
  expect_refused("quant_input", [](json& j) { j["input_dtypes"]["values"][1] = "int8"; }, "/input_dtypes/values/1",
                 "\"int8\" is quantised, and quantised dtypes are cache-only; expected one of f16, bf16, f32");
  expect_refused("none_kind", [](json& j) { j["scale_kinds"]["values"][0] = "none"; }, "/scale_kinds/values/0",
                 "\"none\" is implied for float caches");
  expect_refused("kind_name", [](json& j) { j["scale_kinds"]["values"][0] = "per_channel"; }, "/scale_kinds/values/0",
                 "unknown name \"per_channel\"; expected one of per_tensor, per_head, per_block, per_token_head");
  expect_refused("dist_name", [](json& j) { j["scale_dists"]["values"][3] = "huge"; }, "/scale_dists/values/3",
                 "expected one of unit, pow2, random, extreme");
  expect_refused("shares", [](json& j) { j["quant_percent"] = 86; }, "/quant_percent",
                 "expected cross_dtype_percent + quant_percent <= 100, got 101");
  expect_refused("quant_range", [](json& j) { j["quant_percent"] = -1; }, "/quant_percent", "[0, 100]");
  expect_refused("no_quant_dtype", [](json& j) { j["cache_dtypes"]["weights"] = json::array({1, 1, 1, 0, 0, 0}); },
                 "/cache_dtypes", "quant_percent is 20 but no quantised dtype (fp8_e4m3, fp8_e5m2, int8) has a weight > 0");
  expect_refused("no_float_dtype", [](json& j) { j["cache_dtypes"]["weights"] = json::array({0, 0, 0, 1, 1, 1}); },
                 "/cache_dtypes", "cross_dtype_percent is 15 but no float dtype (f16, bf16, f32) has a weight > 0");
  expect_refused("missing_quant", [](json& j) { j.erase("quant_percent"); }, "", "missing key \"quant_percent\"");
}

TEST(Profile, defaultCoversTheDesignDimensions) {
  const Profile p = default_profile();
  EXPECT_EQ(p.layouts.values.size(), 5u);
  for (int32_t bs : {1, 2, 3, 5, 7, 8, 16, 17, 32, 64, 100, 128, 256})
    EXPECT_NE(std::find(p.block_sizes.values.begin(), p.block_sizes.values.end(), bs), p.block_sizes.values.end()) << bs;
  for (int32_t d : {1, 2, 3, 7, 8, 16, 32, 46, 64, 72, 80, 96, 100, 120, 128, 192, 256, 576})
    EXPECT_NE(std::find(p.head_dims.values.begin(), p.head_dims.values.end(), d), p.head_dims.values.end()) << d;
  for (int32_t r : {1, 2, 3, 4, 5, 8, 16})
    EXPECT_NE(std::find(p.gqa_ratios.values.begin(), p.gqa_ratios.values.end(), r), p.gqa_ratios.values.end()) << r;
  EXPECT_EQ(p.num_heads.values.back(), 128);
}

TEST(Profile, refusesUnknownKeys) {
  expect_refused("unknown_top", [](json& j) { j["max_request"] = 3; }, "/max_request", "unknown key");
  expect_refused("unknown_nested", [](json& j) { j["layouts"]["weight"] = json::array(); }, "/layouts/weight",
                 "unknown key");
}

TEST(Profile, refusesMissingKeys) {
  expect_refused("missing", [](json& j) { j.erase("max_new_len"); }, "", "missing key \"max_new_len\"");
  expect_refused("missing_weights", [](json& j) { j["head_dims"].erase("weights"); }, "/head_dims",
                 "missing key \"weights\"");
}

TEST(Profile, refusesWrongTypes) {
  expect_refused("string_for_int", [](json& j) { j["max_requests"] = "6"; }, "/max_requests", "expected an integer");
  expect_refused("float_for_int", [](json& j) { j["max_requests"] = 6.5; }, "/max_requests", "expected an integer");
  expect_refused("bool_for_int", [](json& j) { j["decode_percent"] = true; }, "/decode_percent", "expected an integer");
  expect_refused("list_for_weighted", [](json& j) { j["block_sizes"] = json::array({1, 2}); }, "/block_sizes",
                 "expected an object");
  expect_refused("number_for_layout", [](json& j) { j["layouts"]["values"][1] = 3; }, "/layouts/values/1",
                 "expected a string");
  expect_refused("name_type", [](json& j) { j["name"] = 1; }, "/name", "expected a string");
  expect_refused("not_object", [](json& j) { j = json::array(); }, "", "expected a JSON object");
}

TEST(Profile, refusesMismatchedLengthsAndBadWeights) {
  expect_refused("lengths", [](json& j) { j["num_heads"]["weights"].erase(0); }, "/num_heads/weights",
                 "expected 10 weights");
  expect_refused("negative", [](json& j) { j["gqa_ratios"]["weights"][2] = -1; }, "/gqa_ratios/weights/2",
                 "expected an integer in [0, ");
  expect_refused("all_zero", [](json& j) { j["slot_dtypes"]["weights"] = json::array({0, 0}); },
                 "/slot_dtypes/weights", "at least one weight > 0");
  expect_refused("empty", [](json& j) { j["value_dists"] = {{"values", json::array()}, {"weights", json::array()}}; },
                 "/value_dists/values", "non-empty array");
  expect_refused("duplicate", [](json& j) { j["block_sizes"]["values"][1] = 1; }, "/block_sizes/values/1",
                 "duplicate value");
}

TEST(Profile, refusesOutOfRangeValues) {
  expect_refused("block_zero", [](json& j) { j["block_sizes"]["values"][0] = 0; }, "/block_sizes/values/0",
                 "[1, 4096]");
  expect_refused("block_big", [](json& j) { j["block_sizes"]["values"][12] = 4097; }, "/block_sizes/values/12",
                 "[1, 4096]");
  expect_refused("heads", [](json& j) { j["num_heads"]["values"][9] = 1025; }, "/num_heads/values/9", "[1, 1024]");
  expect_refused("head_dim", [](json& j) { j["head_dims"]["values"][0] = 0; }, "/head_dims/values/0", "[1, 4096]");
  expect_refused("gqa", [](json& j) { j["gqa_ratios"]["values"][6] = 65; }, "/gqa_ratios/values/6", "[1, 64]");
  expect_refused("percent", [](json& j) { j["fused_qkv_percent"] = 101; }, "/fused_qkv_percent", "[0, 100]");
  expect_refused("percent_neg", [](json& j) { j["irregular_percent"] = -1; }, "/irregular_percent", "[0, 100]");
  expect_refused("decode_idle", [](json& j) { j["decode_percent"] = 98; }, "/idle_percent",
                 "decode_percent + idle_percent <= 100");
  expect_refused("requests", [](json& j) { j["max_requests"] = 0; }, "/max_requests", "[1, 4096]");
  expect_refused("elements", [](json& j) { j["max_elements_per_case"] = 0; }, "/max_elements_per_case", "expected an integer in [1, ");
}

TEST(Profile, refusesUnknownNamesSchemasAndVersions) {
  expect_refused("layout_name", [](json& j) { j["layouts"]["values"][0] = "paged"; }, "/layouts/values/0",
                 "unknown name \"paged\"; expected one of paged_nhd");
  expect_refused("dtype_name", [](json& j) { j["cache_dtypes"]["values"][2] = "fp8"; }, "/cache_dtypes/values/2",
                 "expected one of f16, bf16, f32");
  expect_refused("schema", [](json& j) { j["schema"] = "kvfuzz-case"; }, "/schema", "expected \"kvfuzz-config\"");
  expect_refused("newer", [](json& j) { j["version"] = 2; }, "/version", "newer kvfuzz");
}

TEST(Profile, refusesInvalidJsonAndMissingFilesNamingTheFile) {
  const std::string file = write_temp("broken", "{\"schema\": \"kvfuzz-config\",");
  try {
    load_profile(file);
    ADD_FAILURE() << "accepted broken JSON";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), file);
    EXPECT_EQ(e.json_path(), "");
    EXPECT_NE(e.message().find("not valid JSON"), std::string::npos) << e.what();
  }
  const std::string missing = ::testing::TempDir() + "kvfuzz_no_such_profile.json";
  try {
    load_profile(missing);
    ADD_FAILURE() << "accepted a missing file";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), missing);
    EXPECT_NE(e.message().find("cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvf
