// python_worker_test.cpp — what the C++ half of the Python worker sends (src/targets/python_worker.h):
// the append as byte offsets into the image, the interpreter it picks, and the Python targets' names
// and defaults. The worker itself runs end to end in tests/e2e/test_python_targets.py.
#include <gtest/gtest.h>

#include <cstdlib>

#include <set>

#include "../arena/test_cases.h"
#include "arena/classify.h"
#include "case/context_parallel.h"
#include "base/errors.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "targets/python_worker.h"
#include "targets/target.h"

namespace kvf {
namespace {

TEST(PythonWorker, sendsEveryPointerAsAnOffsetIntoTheImageSection) {
  const Case c = test::quant_per_token_case();  // f16 -> fp8_e4m3, paged NHD, per-token-head scales
  const ArenaLayout l = plan_arena(c);
  std::vector<std::byte> image(static_cast<size_t>(l.total_bytes));
  const nlohmann::json j = call_json(c, l, image.data());
  EXPECT_EQ(j["layout"], "nhd");
  EXPECT_EQ(j["input_dtype"], "f16");
  EXPECT_EQ(j["cache_dtype"], "fp8_e4m3");
  EXPECT_EQ(j["scale_kind"], "per_token_head");
  EXPECT_EQ(j["key"]["offset"], l.input_begin + c.key.offset * 2);
  EXPECT_EQ(j["value"]["offset"], l.input_begin + c.value.offset * 2);
  EXPECT_EQ(j["key"]["stride_token"], c.key.stride_token);
  EXPECT_EQ(j["slot_mapping"], l.slots_begin);
  EXPECT_EQ(j["k_cache"], l.cache_begin + c.cache_k_offset);
  EXPECT_EQ(j["v_cache"], l.cache_begin + c.cache_v_offset);
  EXPECT_EQ(j["cache"]["stride_pos"], c.cache.stride_pos);
  EXPECT_EQ(j["invalid_slots"], l.counter_begin);
  EXPECT_TRUE(j["k_scale"].is_null());
  EXPECT_EQ(j["k_scale_cache"], l.scale_cache_begin + c.scale_k_offset * 4);
  EXPECT_EQ(j["v_scale_cache"], l.scale_cache_begin + c.scale_v_offset * 4);
  EXPECT_EQ(j["scale_cache"]["stride_head"], c.scale_cache.stride_head);
}

TEST(PythonWorker, namesTheCacheOrderAndTheStaticScales) {
  const Case c = test::quant_per_block_case();  // f32 -> int8, paged HND, per-block scales
  const ArenaLayout l = plan_arena(c);
  std::vector<std::byte> image(static_cast<size_t>(l.total_bytes));
  const nlohmann::json j = call_json(c, l, image.data());
  EXPECT_EQ(j["layout"], "hnd");
  EXPECT_EQ(j["num_scales"], c.cache.num_blocks * c.num_heads);
  EXPECT_EQ(j["k_scale"], l.scales_begin);
  EXPECT_EQ(j["v_scale"], l.scales_begin + 4 * c.cache.num_blocks * c.num_heads);
  EXPECT_TRUE(j["k_scale_cache"].is_null());
}

TEST(PythonWorker, sendsEachFieldsAddressingAndTheLegacyLayout) {
  Case c = test::paged_nhd_case();  // f16: x = 8 = D, one x-chunk
  const ArenaLayout l = plan_arena(c);
  std::vector<std::byte> image(static_cast<size_t>(l.total_bytes));
  nlohmann::json j = call_json(c, l, image.data());
  for (const char* f : {"k_field", "v_field"}) {
    EXPECT_EQ(j[f]["stride_pos"], c.cache.stride_pos) << f;
    EXPECT_EQ(j[f]["x"], 1) << f;
    EXPECT_EQ(j[f]["stride_dim1"], 1) << f;
  }
  c.layout = Layout::vllm_legacy;  // K [8, 2, 1, 4, 8], V [8, 2, 8, 4]
  c.cache = CacheGeometry{8, 4, 2 * 8 * 4, 8, 8 * 4};
  j = call_json(c, l, image.data());
  EXPECT_EQ(j["layout"], "vllm_legacy");
  EXPECT_EQ(j["k_field"], (nlohmann::json{{"stride_block", 64}, {"stride_pos", 8}, {"stride_head", 32}, {"x", 1},
                                          {"stride_dim0", 1}, {"stride_dim1", 1}}));  // one chunk: flat dims
  EXPECT_EQ(j["v_field"], (nlohmann::json{{"stride_block", 64}, {"stride_pos", 1}, {"stride_head", 32}, {"x", 1},
                                          {"stride_dim0", 1}, {"stride_dim1", 4}}));
  c.cache_dtype = DType::int8;  // x = 16: D = 32 is two chunks
  c.head_dim = 32;
  c.cache = CacheGeometry{8, 4, 2 * 32 * 4, 16, 32 * 4};
  j = call_json(c, l, image.data());
  EXPECT_EQ(j["k_field"]["x"], 16);
  EXPECT_EQ(j["k_field"]["stride_pos"], 16);
  EXPECT_EQ(j["k_field"]["stride_dim1"], 4 * 16);
}

// A context-parallel case: one call per rank, each addressing its shard; input positions adds the
// rank's filter ("cp"), input slot_mapping the rank's own slot_mapping and, for kvfuzz_triton (the
// producer flag), the slot-mapping producer's call ("cp_producer").
TEST(PythonWorker, sendsEachRanksShardFilterAndProducer) {
  Profile profile = default_profile();
  profile.cp_percent = 100;
  std::set<CpInput> seen;
  for (int64_t i = 0; i < 60; ++i) {
    const Case c = materialize(generate_case(profile, 4, i));
    ASSERT_TRUE(c.has_cp());
    seen.insert(c.cp_input);
    const ArenaLayout l = plan_arena(c);
    std::vector<std::byte> image(static_cast<size_t>(l.total_bytes));
    const CpSection s = cp_section(c);
    for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
      const nlohmann::json j = call_json(c, l, image.data(), true, rank, /*producer=*/true);
      const nlohmann::json f = call_json(c, l, image.data(), true, rank, /*producer=*/false);
      EXPECT_EQ(j["cache"]["num_blocks"], c.shard_blocks());
      EXPECT_EQ(j["k_cache"], l.cache_begin + (c.cache_k_offset + rank * c.shard_blocks() * c.cache.stride_block) *
                                                  dtype_size(c.cache_dtype));
      EXPECT_TRUE(f["cp_producer"].is_null());
      if (c.cp_input == CpInput::positions) {
        EXPECT_EQ(j["slot_mapping"], l.slots_begin);
        EXPECT_EQ(j["cp"], (nlohmann::json{{"positions", l.slots_begin + 4 * s.positions}, {"rank", rank},
                                           {"world_size", c.cp_world_size}, {"interleave", c.cp_interleave}}));
        EXPECT_TRUE(j["cp_producer"].is_null());
        continue;
      }
      const int64_t mapping = l.slots_begin + 4 * (s.rank_mappings + rank * c.num_slots());
      EXPECT_TRUE(j["cp"].is_null());
      EXPECT_EQ(j["slot_mapping"], mapping);
      EXPECT_EQ(f["slot_mapping"], mapping);
      EXPECT_EQ(j["cp_producer"],
                (nlohmann::json{{"positions", l.slots_begin + 4 * s.positions}, {"requests", l.slots_begin + 4 * s.requests},
                                {"block_tables", l.slots_begin + 4 * s.tables}, {"table_width", s.table_width},
                                {"num_rows", c.num_slots()}, {"block_size", c.cache.block_size}, {"rank", rank},
                                {"world_size", c.cp_world_size}, {"interleave", c.cp_interleave},
                                {"slot_mapping", mapping}}));
    }
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(PythonWorker, givesEveryWrittenRowItsSlotThroughTheRequestStructure) {
  Profile profile = default_profile();
  profile.addressings = {{Addressing::slot_mapping, Addressing::csr}, {1, 1}};
  profile.ring_percent = 20;
  profile.cp_percent = 20;
  int64_t rows = 0;
  for (int64_t i = 0; i < 120; ++i) {
    const Case c = materialize(generate_case(profile, 5, i));
    const RequestArrays r = request_arrays(c);
    ASSERT_EQ(r.batch_indices.size(), c.slot_mapping.size());
    ASSERT_EQ(r.seq_lens.size(), c.requests.size());
    ASSERT_EQ(r.block_tables.size(), c.requests.size() * static_cast<size_t>(r.table_width));
    const int64_t bs = c.cache.block_size;
    for (size_t t = 0; t < c.slot_mapping.size(); ++t) {
      const int64_t slot = c.slot_mapping[t];
      if (slot < 0 || slot >= c.capacity()) {
        EXPECT_EQ(r.batch_indices[t], -1) << "case " << i << " row " << t;
        continue;
      }
      if (r.batch_indices[t] < 0) continue;  // a slot no request's table holds (the sink)
      const int64_t b = r.batch_indices[t], p = r.positions[t];
      const int32_t block = r.block_tables[static_cast<size_t>(b * r.table_width + p / bs)];
      EXPECT_EQ(block * bs + p % bs, slot) << "case " << i << " row " << t;
      EXPECT_LT(p, r.seq_lens[static_cast<size_t>(b)]) << "case " << i << " row " << t;
      ++rows;
    }
  }
  EXPECT_GT(rows, 100);
}

TEST(PythonWorker, readsInputsAsAPythonOnlyKeyAndRefusesBadValuesNamingIt) {
  bool requests = false;
  const Capabilities caps = python_capabilities(nlohmann::json{{"inputs", {"requests"}}, {"layouts", {"paged_nhd"}}}, "f", requests);
  EXPECT_TRUE(requests);
  EXPECT_EQ(caps.layouts, 1u << static_cast<unsigned>(Layout::paged_nhd));
  python_capabilities(nlohmann::json{{"layouts", {"paged_nhd"}}}, "f", requests);
  EXPECT_FALSE(requests);
  try {
    python_capabilities(nlohmann::json{{"inputs", "requests"}}, "f", requests);
    ADD_FAILURE() << "a string accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/inputs");
  }
  try {
    python_capabilities(nlohmann::json{{"input", {"requests"}}}, "f", requests);
    ADD_FAILURE() << "a misspelt key accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/input");
    EXPECT_NE(e.message().find("(Python functions only) inputs"), std::string::npos) << e.message();
  }
}

TEST(PythonWorker, picksTheOptionThenTheEnvironment) {
  EXPECT_EQ(resolve_python("/opt/py/bin/python"), "/opt/py/bin/python");
  setenv("KVFUZZ_PYTHON", "/env/python", 1);
  EXPECT_EQ(resolve_python(""), "/env/python");
  EXPECT_EQ(resolve_python("/opt/py/bin/python"), "/opt/py/bin/python");
  unsetenv("KVFUZZ_PYTHON");
  EXPECT_NE(resolve_python(""), "/env/python");
}

TEST(PythonTargets, declareTheirDefaultsAndParseTheirArgument) {
  bool interp = false, fp8hw = false;
  for (const TargetInfo& t : list_targets()) {
    if (t.name == "triton-interp") interp = t.default_tolerance == "exact" && t.default_timeout_s == 600 && !t.needs_gpu;
    if (t.name == "triton-interp-fp8hw") {
      const auto p = parse_tolerance(t.default_tolerance);
      fp8hw = p && p->rule_for(DType::fp8_e4m3).kind == TolerancePolicy::Kind::ulp && p->rule_for(DType::fp8_e4m3).ulps == 8 &&
              p->rule_for(DType::fp8_e5m2).ulps == 4 && p->rule_for(DType::int8).kind == TolerancePolicy::Kind::exact;
    }
  }
  EXPECT_TRUE(interp);
  EXPECT_TRUE(fp8hw);
  // The interpreter's fp8 cast would reach the scales of the formats that convert to fp8: fp8hw takes
  // only those without one; triton-interp takes every format.
  const auto formats = [](const char* name) { return make_target(name)->capabilities()->quant_formats; };
  const auto bit = [](QuantFormat f) { return 1u << static_cast<unsigned>(f); };
  EXPECT_EQ(formats("triton-interp"), ~0u);
  EXPECT_EQ(formats("triton-interp-fp8hw"), bit(QuantFormat::none) | bit(QuantFormat::mxfp4) | bit(QuantFormat::int8_inline) |
                                                bit(QuantFormat::asym_int8) | bit(QuantFormat::asym_int4));
  EXPECT_EQ(make_target("python:pkg.mod:fn")->info().name, "python:pkg.mod:fn");
  EXPECT_TRUE(make_target("python-cuda:pkg.mod:fn")->info().needs_gpu);
  EXPECT_FALSE(make_target("python-numpy:dir/file.py:fn")->info().needs_gpu);
  for (const char* bad : {"python:pkg.mod", "python:pkg.mod:", "python-numpy::fn"}) EXPECT_THROW(make_target(bad), InputError) << bad;
}

}  // namespace
}  // namespace kvf
