// triton_aot_test.cpp — the triton target's manifest, kernel selection, grid plan and argument packing
// (src/targets/triton/aot_manifest.h), without a GPU: against a hand-written manifest always, and
// against the manifest and cubins built into this binary when it has the triton target.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "arena/arena.h"
#include "case/errors.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "targets/target.h"
#include "targets/triton/aot_manifest.h"

namespace kvf {
namespace {

const DType kInputs[] = {DType::f16, DType::bf16, DType::f32};
const DType kCaches[] = {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
const IndexType kSlots[] = {IndexType::i32, IndexType::i64};

// A manifest like aot_compile.py's, with `params` (a JSON array) as every kernel's parameter list.
std::string fixture(const std::string& params, const std::string& dtypes = R"(["f16","bf16","f32","fp8_e4m3","fp8_e5m2","int8"])") {
  return R"({"schema": "kvfuzz-triton-aot/1", "triton_version": "3.6.0",
    "target": {"backend": "cuda", "compute_capability": 90, "warp_size": 32}, "tile": [4, 64],
    "dtypes": )" + dtypes + R"(, "scale_kinds": ["none","per_tensor","per_head","per_block","per_token_head"],
    "kernels": [{"name": "kv_append_f16_int8_i64", "function": "kv_append_kernel", "input_dtype": "f16",
      "cache_dtype": "int8", "slot_type": "i64", "num_warps": 4, "shared_bytes": 0, "cluster_dims": [1, 1, 1],
      "arch": "sm_90a", "params": )" + params + R"(, "cubin": "kv_append_f16_int8_i64.cubin", "cubin_bytes": 3}]})";
}

int64_t cell_i64(const PackedArgs& a, size_t i) {
  int64_t v;
  std::memcpy(&v, a.cells[i].data(), sizeof v);
  return v;
}
int32_t cell_i32(const PackedArgs& a, size_t i) {
  int32_t v;
  std::memcpy(&v, a.cells[i].data(), sizeof v);
  return v;
}

KvAppendParams small_params() {
  KvAppendParams p;
  p.key = reinterpret_cast<const void*>(0x1000);
  p.num_heads = 6;
  p.head_dim = 7;
  p.num_slots = 5;
  p.cache = CacheGeometry{3, 4, 4 * 6 * 7, 6 * 7, 7};  // NHD: token-major
  p.input_dtype = DType::f16;
  p.cache_dtype = DType::int8;
  p.scale_kind = ScaleKind::per_head;
  return p;
}

TEST(TritonAotManifest, packsArgumentsInTheManifestsOrder) {
  const AotManifest m = parse_aot_manifest(
      fixture(R"([{"name": "head_dim", "type": "i32"}, {"name": "key_ptr", "type": "*fp16"},
                  {"name": "heads_per_program", "type": "i32"}, {"name": "scale_kind", "type": "i32"},
                  {"name": "k_stride_pos", "type": "i64"}, {"name": "global_scratch", "type": "scratch"}])"),
      "fixture.json");
  ASSERT_EQ(m.kernels.size(), 1u);
  const KvAppendParams p = small_params();
  AotLaunchPlan plan;
  ASSERT_EQ(plan_launch(m, p, plan), "");
  PackedArgs a;
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  ASSERT_EQ(a.pointers.size(), 6u);
  for (size_t i = 0; i < a.cells.size(); ++i) EXPECT_EQ(a.pointers[i], a.cells[i].data());
  EXPECT_EQ(cell_i32(a, 0), 7);
  EXPECT_EQ(cell_i64(a, 1), 0x1000);
  EXPECT_EQ(cell_i32(a, 2), 6);  // token-major: every head in one program
  EXPECT_EQ(cell_i32(a, 3), 2);  // ScaleKind::per_head
  EXPECT_EQ(cell_i64(a, 4), 42);
  EXPECT_EQ(cell_i64(a, 5), 0);  // scratch: null
}

// The format families' arguments: kv_split's V head dim and V's own strides, has_value, MLA's k_pe.
TEST(TritonAotManifest, packsTheFormatFamiliesArguments) {
  const AotManifest m = parse_aot_manifest(
      fixture(R"([{"name": "value_head_dim", "type": "i32"}, {"name": "has_value", "type": "i32"},
                  {"name": "rope_ptr", "type": "*fp16"}, {"name": "rope_stride_token", "type": "i64"},
                  {"name": "rope_stride_head", "type": "i64"}, {"name": "rope_dim", "type": "i32"},
                  {"name": "v_stride_block", "type": "i64"}, {"name": "v_stride_pos", "type": "i64"}])"),
      "fixture.json");
  KvAppendParams p = small_params();
  AotLaunchPlan plan;
  PackedArgs a;
  ASSERT_EQ(plan_launch(m, p, plan), "");
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");  // family kv: V is K's
  EXPECT_EQ(cell_i32(a, 0), 7);
  EXPECT_EQ(cell_i32(a, 1), 1);
  EXPECT_EQ(cell_i64(a, 2), 0);
  EXPECT_EQ(cell_i32(a, 5), 0);
  EXPECT_EQ(cell_i64(a, 6), 4 * 6 * 7);

  p.value_head_dim = 5;  // kv_split
  p.value_cache = CacheGeometry{3, 4, 4 * 6 * 5 + 3, 6 * 5 + 1, 5};
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  EXPECT_EQ(cell_i32(a, 0), 5);
  EXPECT_EQ(cell_i64(a, 6), 4 * 6 * 5 + 3);
  EXPECT_EQ(cell_i64(a, 7), 6 * 5 + 1);

  p = small_params();  // mla
  p.num_heads = 1;
  p.has_value = false;
  p.rope = reinterpret_cast<const void*>(0x2000);
  p.rope_stride_token = 9;
  p.rope_stride_head = 3;
  p.rope_dim = 3;
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  EXPECT_EQ(cell_i32(a, 1), 0);
  EXPECT_EQ(cell_i64(a, 2), 0x2000);
  EXPECT_EQ(cell_i64(a, 3), 9);
  EXPECT_EQ(cell_i64(a, 4), 3);
  EXPECT_EQ(cell_i32(a, 5), 3);
}

// Each field's addressing comes from the format model (kernel_fields.h): the geometry with x = 1
// and contiguous dims, or vllm_legacy's x-packed K and transposed V.
TEST(TritonAotManifest, packsEachFieldsStridesFromTheFormatModel) {
  std::string params;
  for (const char* f : {"k_", "v_"})
    for (const char* a : {"stride_block", "stride_pos", "stride_head", "stride_dim0", "stride_dim1"})
      params += std::string(params.empty() ? "" : ", ") + R"({"name": ")" + f + a + R"(", "type": "i64"})";
  params += R"(, {"name": "k_dim_x", "type": "i32"}, {"name": "v_dim_x", "type": "i32"})";
  const AotManifest m = parse_aot_manifest(fixture("[" + params + "]"), "fixture.json");
  KvAppendParams p = small_params();
  AotLaunchPlan plan;
  PackedArgs a;
  ASSERT_EQ(plan_launch(m, p, plan), "");
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  const std::vector<int64_t> nhd = {4 * 6 * 7, 6 * 7, 7, 1, 1};  // block, pos, head, dim0, dim1
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(cell_i64(a, i), nhd[i]) << i;
    EXPECT_EQ(cell_i64(a, 5 + i), nhd[i]) << i;
  }
  EXPECT_EQ(cell_i32(a, 10), 1);
  EXPECT_EQ(cell_i32(a, 11), 1);

  // int8 cache: x = 16; K [nb, H, D/x, bs, x], V [nb, H, D, bs], block and head strides shared.
  p.head_dim = 32;
  p.cache = CacheGeometry{3, 4, 6 * 32 * 4 + 5, 16, 32 * 4 + 1};
  p.vllm_legacy = true;
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  const std::vector<int64_t> k = {6 * 32 * 4 + 5, 16, 32 * 4 + 1, 1, 4 * 16};
  const std::vector<int64_t> v = {6 * 32 * 4 + 5, 1, 32 * 4 + 1, 1, 4};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(cell_i64(a, i), k[i]) << i;
    EXPECT_EQ(cell_i64(a, 5 + i), v[i]) << i;
  }
  EXPECT_EQ(cell_i32(a, 10), 16);
  EXPECT_EQ(cell_i32(a, 11), 1);
}

// A context-parallel rank's filter (input positions): the positions and (rank, N, I); off (cp = 0,
// the defaults) for every other call.
TEST(TritonAotManifest, packsTheContextParallelRankArguments) {
  const AotManifest m = parse_aot_manifest(
      fixture(R"([{"name": "cp", "type": "i32"}, {"name": "cp_rank", "type": "i32"}, {"name": "cp_world_size", "type": "i32"},
                  {"name": "cp_interleave", "type": "i32"}, {"name": "cp_pos_ptr", "type": "*i32"}])"),
      "fixture.json");
  KvAppendParams p = small_params();
  AotLaunchPlan plan;
  PackedArgs a;
  ASSERT_EQ(plan_launch(m, p, plan), "");
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  EXPECT_EQ(cell_i32(a, 0), 0);
  EXPECT_EQ(cell_i32(a, 1), 0);
  EXPECT_EQ(cell_i32(a, 2), 1);
  EXPECT_EQ(cell_i32(a, 3), 1);
  EXPECT_EQ(cell_i64(a, 4), 0);
  p.cp_positions = reinterpret_cast<const int32_t*>(0x3000);
  p.cp_rank = 2;
  p.cp_world_size = 3;
  p.cp_interleave = 16;
  ASSERT_EQ(pack_arguments(m.kernels[0], p, plan, a), "");
  EXPECT_EQ(cell_i32(a, 0), 1);
  EXPECT_EQ(cell_i32(a, 1), 2);
  EXPECT_EQ(cell_i32(a, 2), 3);
  EXPECT_EQ(cell_i32(a, 3), 16);
  EXPECT_EQ(cell_i64(a, 4), 0x3000);
}

TEST(TritonAotManifest, plansTokenMajorForNhdAndHeadMajorForHnd) {
  const AotManifest m = parse_aot_manifest(fixture("[]"), "fixture.json");
  KvAppendParams p = small_params();
  AotLaunchPlan plan;
  ASSERT_EQ(plan_launch(m, p, plan), "");
  EXPECT_FALSE(plan.head_major);
  EXPECT_EQ(plan.grid, (std::array<uint32_t, 3>{5, 1, 1}));
  p.cache = CacheGeometry{3, 4, 4 * 6 * 7, 7, 4 * 7};  // HND
  ASSERT_EQ(plan_launch(m, p, plan), "");
  EXPECT_TRUE(plan.head_major);
  EXPECT_EQ(plan.heads_per_program, 4);
  EXPECT_EQ(plan.grid, (std::array<uint32_t, 3>{5, 2, 1}));  // heads 0..3, 4..5
  p.num_slots = 0;
  ASSERT_EQ(plan_launch(m, p, plan), "");
  EXPECT_EQ(plan.grid[0], 0u);  // nothing to launch
}

TEST(TritonAotManifest, refusesWhatItCannotPack) {
  const KvAppendParams p = small_params();
  AotLaunchPlan plan;
  PackedArgs a;
  const auto pack = [&](const std::string& params) {
    const AotManifest m = parse_aot_manifest(fixture(params), "fixture.json");
    plan_launch(m, p, plan);
    return pack_arguments(m.kernels[0], p, plan, a);
  };
  EXPECT_NE(pack(R"([{"name": "bias_ptr", "type": "*fp32"}])").find("\"bias_ptr\" this loader does not know"),
            std::string::npos);
  EXPECT_NE(pack(R"([{"name": "num_heads", "type": "*i32"}])").find("declared a pointer"), std::string::npos);
  EXPECT_NE(pack(R"([{"name": "key_ptr", "type": "i64"}])").find("declared an integer"), std::string::npos);
  KvAppendParams wide = p;
  wide.key_stride_token = int64_t{1} << 40;
  const AotManifest m = parse_aot_manifest(fixture(R"([{"name": "key_stride_token", "type": "i32"}])"), "f.json");
  plan_launch(m, wide, plan);
  EXPECT_NE(pack_arguments(m.kernels[0], wide, plan, a).find("does not fit its i32 parameter"), std::string::npos);
}

TEST(TritonAotManifest, malformedManifestsNameTheFileAndJsonPath) {
  const auto error = [](const std::string& text) -> std::string {
    try {
      parse_aot_manifest(text, "m.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error("{").find("m.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error(fixture("[]", R"(["f16","f32","bf16","fp8_e4m3","fp8_e5m2","int8"])")).find("m.json: at /dtypes: expected [f16, bf16"),
            std::string::npos);
  EXPECT_NE(error(fixture(R"([{"name": "x", "type": "float"}])")).find("at /kernels/0/params/0/type"), std::string::npos);
  std::string no_arch = fixture("[]");
  no_arch.replace(no_arch.find("\"arch\""), std::strlen("\"arch\""), "\"arc\"");
  EXPECT_NE(error(no_arch).find("at /kernels/0/arch: missing"), std::string::npos);
}

TEST(TritonAotManifest, aKernelSetNeedsEveryCubinAtItsSize) {
  const std::string text = fixture("[]");
  const unsigned char three[] = {1, 2, 3};
  const unsigned char two[] = {1, 2};
  const auto files = [&](const unsigned char* cubin, size_t size) {
    return std::vector<EmbeddedFile>{{"manifest.json", reinterpret_cast<const unsigned char*>(text.data()), text.size()},
                                     {"kv_append_f16_int8_i64.cubin", cubin, size}};
  };
  EXPECT_EQ(kernel_set_from_files(files(three, 3), "built-in").cubins.at("kv_append_f16_int8_i64.cubin"), "\x01\x02\x03");
  EXPECT_THROW(kernel_set_from_files(files(two, 2), "built-in"), InputError);
  EXPECT_THROW(kernel_set_from_files({files(three, 3)[0]}, "built-in"), InputError);
  EXPECT_THROW(kernel_set_from_directory("/nonexistent-kvfuzz-dir"), InputError);
}

#if defined(KVFUZZ_HAVE_TRITON)

const AotKernelSet& built_in() {
  static const AotKernelSet set = kernel_set_from_files(embedded_triton_files(), "built-in");
  return set;
}

TEST(TritonAotBuiltIn, hasOneSm90aKernelPerDtypePairAndSlotType) {
  const AotManifest& m = built_in().manifest;
  EXPECT_EQ(m.compute_capability, 90);
  EXPECT_EQ(m.triton_version, "3.6.0");
  EXPECT_EQ(m.kernels.size(), std::size(kInputs) * std::size(kCaches) * std::size(kSlots));
  for (DType in : kInputs)
    for (DType cache : kCaches)
      for (IndexType slot : kSlots) {
        const AotKernel* k = find_kernel(m, in, cache, slot);
        ASSERT_NE(k, nullptr) << to_string(in) << "->" << to_string(cache) << "/" << to_string(slot);
        EXPECT_EQ(k->arch, "sm_90a");
        EXPECT_EQ(k->cluster_dims, (std::array<int, 3>{1, 1, 1}));
        EXPECT_LE(k->shared_bytes, 48 * 1024);
        ASSERT_GE(k->params.size(), 2u);
        EXPECT_EQ(k->params[k->params.size() - 2].type, ParamType::scratch);
        EXPECT_EQ(k->params.back().type, ParamType::scratch);
        EXPECT_GT(built_in().cubins.at(k->cubin).size(), 1000u);
      }
}

// Every case of the default, quant and formats profiles gets a kernel, a grid and every argument,
// and the arguments say what the case says.
TEST(TritonAotBuiltIn, everyGeneratedCaseSelectsAKernelAndPacksItsArguments) {
  std::vector<Profile> profiles = {default_profile(),
                                   load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "quant.json"),
                                   load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "formats.json")};
  std::set<std::string> used;
  constexpr int64_t kBase = int64_t{1} << 32;  // the image's address; never dereferenced
  std::byte* const base = reinterpret_cast<std::byte*>(kBase);
  for (const Profile& profile : profiles)
    for (int64_t i = 0; i < 400; ++i) {
      const Case c = materialize(generate_case(profile, 5, i));
      const ArenaLayout layout = plan_arena(c);
      const KvAppendParams p = append_params(c, base, layout);
      const AotKernel* k = find_kernel(built_in().manifest, p.input_dtype, p.cache_dtype, p.slot_type);
      ASSERT_NE(k, nullptr) << "case " << i;
      used.insert(k->name);
      AotLaunchPlan plan;
      ASSERT_EQ(plan_launch(built_in().manifest, p, plan), "") << "case " << i;
      EXPECT_EQ(plan.grid[0], static_cast<uint32_t>(c.num_slots()));
      PackedArgs a;
      ASSERT_EQ(pack_arguments(*k, p, plan, a), "") << "case " << i;
      std::map<std::string, size_t> at;
      for (size_t j = 0; j < k->params.size(); ++j) at[k->params[j].name] = j;
      const int64_t in_size = dtype_size(c.input_dtype);
      EXPECT_EQ(cell_i64(a, at.at("key_ptr")), kBase + (layout.input_begin + c.key.offset * in_size));
      EXPECT_EQ(cell_i64(a, at.at("slot_ptr")), kBase + layout.slots_begin);
      EXPECT_EQ(cell_i64(a, at.at("invalid_slots_ptr")), kBase + layout.counter_begin);
      EXPECT_EQ(cell_i32(a, at.at("num_heads")), c.num_heads);
      EXPECT_EQ(cell_i32(a, at.at("head_dim")), c.head_dim);
      EXPECT_EQ(cell_i64(a, at.at("block_size")), c.cache.block_size);
      EXPECT_EQ(cell_i64(a, at.at("k_stride_head")), c.cache.stride_head);
      EXPECT_EQ(cell_i64(a, at.at("v_stride_head")), c.value_geometry().stride_head);  // V's own for kv_split
      // vllm_legacy K: x-chunks of x = xpack() dims, block_size * x apart (one chunk, D = x: flat);
      // V: dim stride block_size, pos stride 1. Every other layout: x = 1, contiguous dims.
      const bool legacy = c.layout == Layout::vllm_legacy;
      const bool chunked = legacy && c.head_dim > c.xpack();
      EXPECT_EQ(cell_i32(a, at.at("k_dim_x")), chunked ? c.xpack() : 1);
      EXPECT_EQ(cell_i64(a, at.at("k_stride_dim1")), chunked ? c.cache.block_size * c.xpack() : 1);
      EXPECT_EQ(cell_i64(a, at.at("k_stride_pos")), c.cache.stride_pos);
      EXPECT_EQ(cell_i32(a, at.at("v_dim_x")), 1);
      EXPECT_EQ(cell_i64(a, at.at("v_stride_dim1")), legacy ? c.cache.block_size : 1);
      EXPECT_EQ(cell_i64(a, at.at("v_stride_pos")), legacy ? 1 : c.value_geometry().stride_pos);
      EXPECT_EQ(cell_i32(a, at.at("scale_kind")), static_cast<int32_t>(c.scale_kind));
      EXPECT_EQ(cell_i32(a, at.at("has_counter")), 1);
      const int64_t k_scale = cell_i64(a, at.at("k_scale_ptr"));
      if (c.scale_kind == ScaleKind::per_token_head) {
        EXPECT_EQ(k_scale, kBase + (layout.scale_cache_begin + c.scale_k_offset * 4));
      } else if (c.scale_kind != ScaleKind::none) {
        EXPECT_EQ(k_scale, kBase + layout.scales_begin);
      }
    }
  EXPECT_GE(used.size(), 12u) << "the profiles should reach many of the 36 kernels";
}

TEST(TritonAotBuiltIn, isListedAsAnExactGpuTarget) {
  bool found = false;
  for (const TargetInfo& t : list_targets())
    if (t.name == "triton") found = t.needs_gpu && t.tolerance == "exact" && t.supports.find("missing") == std::string::npos;
  EXPECT_TRUE(found);
}

#else

TEST(TritonAotBuiltIn, targetIsAbsentAndSaysWhy) {
  for (const TargetInfo& t : list_targets()) EXPECT_NE(t.name, "triton");
  try {
    make_target("triton");
    FAIL() << "expected InfraError";
  } catch (const InfraError& e) {
    EXPECT_NE(std::string(e.what()).find("built without it"), std::string::npos);
  }
}

#endif

}  // namespace
}  // namespace kvf
