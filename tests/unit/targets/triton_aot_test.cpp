// triton_aot_test.cpp — the triton target's manifest, kernel selection, grid plan and argument packing
// (src/targets/triton/aot_manifest.h), without a GPU: against a hand-written manifest always, and
// against the manifest and cubins built into this binary when it has the triton target.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "arena/arena.h"
#include "case/context_parallel.h"
#include "base/errors.h"
#include "case/validate.h"
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

// A manifest like aot_compile.py's, with `params` (a JSON array) as every kernel's parameter list
// and `cp_params` as the slot-mapping producer's.
std::string fixture(const std::string& params, const std::string& dtypes = R"(["f16","bf16","f32","fp8_e4m3","fp8_e5m2","int8"])",
                    const std::string& cp_params = "[]", const std::string& format_params = "[]") {
  return R"({"schema": "kvfuzz-triton-aot/3", "triton_version": "3.6.0",
    "target": {"backend": "cuda", "compute_capability": 90, "warp_size": 32}, "tile": [4, 64],
    "dtypes": )" + dtypes + R"(, "scale_kinds": ["none","per_tensor","per_head","per_block","per_token_head"],
    "kernels": [{"name": "kv_append_f16_int8_i64", "function": "kv_append_kernel", "input_dtype": "f16",
      "cache_dtype": "int8", "slot_type": "i64", "num_warps": 4, "shared_bytes": 0, "cluster_dims": [1, 1, 1],
      "arch": "sm_90a", "params": )" + params + R"(, "cubin": "kv_append_f16_int8_i64.cubin", "cubin_bytes": 3}],
    "cp_slot_mapping": {"name": "cp_slot_mapping", "function": "cp_slot_mapping_kernel", "rows_per_program": 256,
      "num_warps": 4, "shared_bytes": 0, "cluster_dims": [1, 1, 1], "arch": "sm_90a", "params": )" + cp_params + R"(,
      "cubin": "cp_slot_mapping.cubin", "cubin_bytes": 2},
    "formats": ["none","nvfp4","mxfp8_e4m3","mxfp8_e5m2","mxfp4","ds_mla","indexer_k","fp8_inline","int8_inline","asym_int8","asym_int4"],
    "format_block": 128,
    "format_kernels": [{"name": "kv_append_format_bf16_nvfp4_i64", "function": "kv_append_format_kernel",
      "input_dtype": "bf16", "quant_format": "nvfp4", "slot_type": "i64", "num_warps": 4, "shared_bytes": 0,
      "cluster_dims": [1, 1, 1], "arch": "sm_90a", "params": )" + format_params + R"(,
      "cubin": "kv_append_format_bf16_nvfp4_i64.cubin", "cubin_bytes": 4}]})";
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

// A hand-built NVFP4 case (one request, K and V of 1 head x 64 dims in paged NHD, 2 blocks of 8
// slots), V's scales in vLLM's swizzled SM100 layout: its fields are the format kernel's arguments.
Case nvfp4_case() {
  Case c;
  c.num_heads = 1;
  c.head_dim = 64;
  c.input_dtype = DType::bf16;
  c.cache_dtype = DType::fp4_e2m1;
  c.slot_dtype = IndexType::i64;
  c.layout = Layout::paged_nhd;
  c.quant_format = QuantFormat::nvfp4;
  c.quant_rules.scale_layout = ScaleLayout::swizzled_v;
  c.quant_rules.nvfp4 = Nvfp4Rule::flashinfer_precise;
  c.cache = CacheGeometry{2, 8, 8 * 32, 32, 32};
  c.cache_v_offset = 2 * 8 * 32;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  c.scale_kind = ScaleKind::per_tensor;
  c.scale_cache = CacheGeometry{2, 8, 8 * 4, 4, 4};
  c.scale_v_offset = 2 * 8 * 4;
  c.scale_cache_elems = 2 * c.scale_v_offset;
  c.requests = {Request{1, 2, {1}, {}}};
  c.slot_mapping = {9, -1, 10};
  c.num_input_rows = 3;
  c.key = InputView{0, 128, 64};
  c.value = InputView{64, 128, 64};
  c.input_buffer_elems = 3 * 128;
  return c;
}

// kv_append_format_kernel's arguments: buffers, each field's (offset, sub-modes), the rules, a
// grid of one program per (slot entry, head).
TEST(TritonAotManifest, packsAFormatCallsBuffersFieldsAndRules) {
  const char* names[] = {"cache_ptr", "scales_ptr", "k_global_ptr", "v_global_ptr", "rope_ptr", "latent_dim",
                         "has_value", "nvfp4_rule", "kc_offset", "kc_block", "kc_pos1", "kc_dim1", "vc_offset",
                         "vs_offset", "vs_pos_x", "vs_pos0", "vs_pos1", "vs_dim_x", "vs_dim0", "vs_dim1", "ks_pos_x",
                         "ks_pos1", "ks_dim1", "cp"};
  std::string params;
  for (const char* n : names) {
    const std::string name = n;
    const std::string type = name.find("_ptr") != std::string::npos ? "*u8"
                             : (name.find("_x") != std::string::npos || name == "latent_dim" || name == "has_value" ||
                                name == "nvfp4_rule" || name == "cp")
                                 ? "i32"
                                 : "i64";
    params += std::string(params.empty() ? "" : ", ") + R"({"name": ")" + name + R"(", "type": ")" + type + R"("})";
  }
  params += R"(, {"name": "global_scratch", "type": "scratch"})";
  const AotManifest m = parse_aot_manifest(fixture("[]", R"(["f16","bf16","f32","fp8_e4m3","fp8_e5m2","int8"])", "[]", "[" + params + "]"),
                                           "fixture.json");
  ASSERT_EQ(m.format_kernels.size(), 1u);
  EXPECT_EQ(m.format_block, 128);
  const AotKernel* k = find_format_kernel(m, DType::bf16, QuantFormat::nvfp4, IndexType::i64);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->cache_dtype, DType::fp4_e2m1);
  EXPECT_EQ(find_format_kernel(m, DType::f16, QuantFormat::nvfp4, IndexType::i64), nullptr);
  EXPECT_EQ(find_format_kernel(m, DType::bf16, QuantFormat::mxfp4, IndexType::i64), nullptr);

  const Case c = nvfp4_case();
  ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
  constexpr int64_t kBase = int64_t{1} << 32;  // never dereferenced
  const ArenaLayout layout = plan_arena(c);
  const KvAppendParams p = append_params(c, reinterpret_cast<std::byte*>(kBase), layout);
  AotLaunchPlan plan;
  ASSERT_EQ(plan_format_launch(p, plan), "");
  EXPECT_EQ(plan.grid, (std::array<uint32_t, 3>{3, 1, 1}));
  PackedArgs a;
  ASSERT_EQ(pack_format_arguments(*k, p, a), "");
  ASSERT_EQ(a.cells.size(), std::size(names) + 1);
  EXPECT_EQ(cell_i64(a, 0), kBase + layout.cache_begin);
  EXPECT_EQ(cell_i64(a, 1), kBase + layout.scale_cache_begin);
  EXPECT_EQ(cell_i64(a, 2), kBase + layout.scales_begin);  // K's global scale, then V's
  EXPECT_EQ(cell_i64(a, 3), kBase + layout.scales_begin + 4);
  EXPECT_EQ(cell_i64(a, 4), 0);  // no rope outside ds_mla
  EXPECT_EQ(cell_i32(a, 5), 64);
  EXPECT_EQ(cell_i32(a, 6), 1);
  EXPECT_EQ(cell_i32(a, 7), 1);  // flashinfer_precise
  // K's codes in nibbles: block 8 * 32 bytes, pos 32 bytes, dims contiguous.
  EXPECT_EQ(cell_i64(a, 8), 0);
  EXPECT_EQ(cell_i64(a, 9), 2 * 8 * 32);
  EXPECT_EQ(cell_i64(a, 10), 2 * 32);
  EXPECT_EQ(cell_i64(a, 11), 1);
  EXPECT_EQ(cell_i64(a, 12), 2 * c.cache_v_offset);
  // V's scales swizzled: pos (4, bs/4):(1, 4P), group (S/4, 4):(4, P), P = 4, S = 4.
  EXPECT_EQ(cell_i64(a, 13), c.scale_v_offset);
  EXPECT_EQ(cell_i32(a, 14), 4);
  EXPECT_EQ(cell_i64(a, 15), 1);
  EXPECT_EQ(cell_i64(a, 16), 16);
  EXPECT_EQ(cell_i32(a, 17), 1);
  EXPECT_EQ(cell_i64(a, 18), 4);
  EXPECT_EQ(cell_i64(a, 19), 4);
  // K's scales linear: pos x = 1, stride P; groups contiguous.
  EXPECT_EQ(cell_i32(a, 20), 1);
  EXPECT_EQ(cell_i64(a, 21), 4);
  EXPECT_EQ(cell_i64(a, 22), 1);
  EXPECT_EQ(cell_i32(a, 23), 0);
  // The packed form addresses every scale as the format model does.
  for (int64_t pos = 0; pos < 8; ++pos)
    for (int64_t g = 0; g < 4; ++g) {
      const int64_t kernel = cell_i64(a, 13) + (pos % cell_i32(a, 14)) * cell_i64(a, 15) + (pos / cell_i32(a, 14)) * cell_i64(a, 16) +
                             (g % cell_i32(a, 17)) * cell_i64(a, 18) + (g / cell_i32(a, 17)) * cell_i64(a, 19);
      EXPECT_EQ(kernel, field_offset(p.scale_layout[1], 0, pos, 0, g)) << pos << " " << g;
    }
}

TEST(TritonAotManifest, refusesAFormatFieldItCannotAddress) {
  const AotManifest m = parse_aot_manifest(fixture("[]", R"(["f16","bf16","f32","fp8_e4m3","fp8_e5m2","int8"])", "[]",
                                                   R"([{"name": "kc_offset", "type": "i64"}])"),
                                           "fixture.json");
  KvAppendParams p;
  p.quant_format = QuantFormat::nvfp4;
  p.code_layout[0].mode[3].rank = 3;  // three sub-modes on dim
  p.code_layout[0].mode[3].extent[0] = p.code_layout[0].mode[3].extent[1] = p.code_layout[0].mode[3].extent[2] = 2;
  PackedArgs a;
  EXPECT_NE(pack_format_arguments(m.format_kernels[0], p, a).find("cannot address field kc: the dim axis has more than two"),
            std::string::npos);
  p = KvAppendParams{};
  p.scale_layout[1].mode[0].rank = 2;  // a block axis of two sub-modes
  p.scale_layout[1].mode[0].extent[0] = p.scale_layout[1].mode[0].extent[1] = 2;
  EXPECT_NE(pack_format_arguments(m.format_kernels[0], p, a).find("field vs: the block axis"), std::string::npos);
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

// The slot-mapping producer: its own entry, its own parameters, one program per rows_per_program rows.
TEST(TritonAotManifest, packsTheSlotMappingProducerAndPlansItsGrid) {
  const AotManifest m = parse_aot_manifest(
      fixture("[]", R"(["f16","bf16","f32","fp8_e4m3","fp8_e5m2","int8"])",
              R"([{"name": "positions_ptr", "type": "*i32"}, {"name": "requests_ptr", "type": "*i32"},
                  {"name": "block_tables_ptr", "type": "*i32"}, {"name": "slot_mapping_ptr", "type": "*i32"},
                  {"name": "table_width", "type": "i64"}, {"name": "num_rows", "type": "i64"},
                  {"name": "block_size", "type": "i64"}, {"name": "rank", "type": "i32"}, {"name": "world_size", "type": "i32"},
                  {"name": "interleave", "type": "i32"}, {"name": "global_scratch", "type": "scratch"}])"),
      "fixture.json");
  const AotKernel& k = m.cp_slot_mapping;
  EXPECT_EQ(k.function, "cp_slot_mapping_kernel");
  EXPECT_EQ(k.rows_per_program, 256);
  CpSlotMappingParams p;
  p.positions = reinterpret_cast<const int32_t*>(0x1000);
  p.requests = reinterpret_cast<const int32_t*>(0x2000);
  p.block_tables = reinterpret_cast<const int32_t*>(0x3000);
  p.slot_mapping = reinterpret_cast<int32_t*>(0x4000);
  p.table_width = 7;
  p.num_rows = 513;
  p.block_size = int64_t{1} << 33;
  p.rank = 3;
  p.world_size = 8;
  p.interleave = 16;
  AotLaunchPlan plan;
  ASSERT_EQ(plan_cp_slot_mapping(k, p, plan), "");
  EXPECT_EQ(plan.grid, (std::array<uint32_t, 3>{3, 1, 1}));  // rows 0..255, 256..511, 512
  PackedArgs a;
  ASSERT_EQ(pack_cp_arguments(k, p, a), "");
  ASSERT_EQ(a.cells.size(), 11u);
  EXPECT_EQ(cell_i64(a, 0), 0x1000);
  EXPECT_EQ(cell_i64(a, 1), 0x2000);
  EXPECT_EQ(cell_i64(a, 2), 0x3000);
  EXPECT_EQ(cell_i64(a, 3), 0x4000);
  EXPECT_EQ(cell_i64(a, 4), 7);
  EXPECT_EQ(cell_i64(a, 5), 513);
  EXPECT_EQ(cell_i64(a, 6), int64_t{1} << 33);
  EXPECT_EQ(cell_i32(a, 7), 3);
  EXPECT_EQ(cell_i32(a, 8), 8);
  EXPECT_EQ(cell_i32(a, 9), 16);
  EXPECT_EQ(cell_i64(a, 10), 0);  // scratch
  p.num_rows = 0;
  ASSERT_EQ(plan_cp_slot_mapping(k, p, plan), "");
  EXPECT_EQ(plan.grid[0], 0u);  // nothing to launch
  const AotManifest wrong = parse_aot_manifest(fixture("[]", R"(["f16","bf16","f32","fp8_e4m3","fp8_e5m2","int8"])",
                                                       R"([{"name": "key_ptr", "type": "*fp16"}])"),
                                               "fixture.json");
  EXPECT_NE(pack_cp_arguments(wrong.cp_slot_mapping, p, a).find("\"key_ptr\" this loader does not know"), std::string::npos);
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
  std::string old_schema = fixture("[]");
  old_schema.replace(old_schema.find("aot/3"), 5, "aot/2");
  EXPECT_NE(error(old_schema).find("at /schema: expected \"kvfuzz-triton-aot/3\" (rebuild the kernels"), std::string::npos);
  std::string bad_format = fixture("[]");
  bad_format.replace(bad_format.find("\"quant_format\": \"nvfp4\""), std::strlen("\"quant_format\": \"nvfp4\""),
                     "\"quant_format\": \"nvfp8\"");
  EXPECT_NE(error(bad_format).find("at /format_kernels/0/quant_format: expected one of"), std::string::npos);
  std::string renumbered = fixture("[]");
  renumbered.replace(renumbered.find("\"nvfp4\",\"mxfp8_e4m3\""), std::strlen("\"nvfp4\",\"mxfp8_e4m3\""),
                     "\"mxfp8_e4m3\",\"nvfp4\"");
  EXPECT_NE(error(renumbered).find("at /formats: expected [none, nvfp4"), std::string::npos);
  std::string no_producer = fixture("[]");
  no_producer.replace(no_producer.find("\"cp_slot_mapping\": {"), std::strlen("\"cp_slot_mapping\""), "\"cp_slot_map\"");
  EXPECT_NE(error(no_producer).find("at /cp_slot_mapping: missing"), std::string::npos);
  std::string no_rows = fixture("[]");
  no_rows.replace(no_rows.find("\"rows_per_program\": 256"), std::strlen("\"rows_per_program\": 256"), "\"rows_per_program\": 0");
  EXPECT_NE(error(no_rows).find("at /cp_slot_mapping/rows_per_program: expected an integer in [1, 1024]"), std::string::npos);
}

TEST(TritonAotManifest, aKernelSetNeedsEveryCubinAtItsSize) {
  const std::string text = fixture("[]");
  const unsigned char three[] = {1, 2, 3};
  const unsigned char two[] = {1, 2};
  // The manifest, the kernel's cubin and the producer's (2 bytes in the manifest).
  const unsigned char four[] = {1, 2, 3, 4};
  const auto files = [&](const unsigned char* cubin, size_t size, const unsigned char* producer, size_t producer_size) {
    return std::vector<EmbeddedFile>{{"manifest.json", reinterpret_cast<const unsigned char*>(text.data()), text.size()},
                                     {"kv_append_f16_int8_i64.cubin", cubin, size},
                                     {"cp_slot_mapping.cubin", producer, producer_size},
                                     {"kv_append_format_bf16_nvfp4_i64.cubin", four, 4}};
  };
  const std::vector<EmbeddedFile> good = files(three, 3, two, 2);
  EXPECT_EQ(kernel_set_from_files(good, "built-in").cubins.at("kv_append_f16_int8_i64.cubin"), "\x01\x02\x03");
  EXPECT_THROW(kernel_set_from_files(files(two, 2, two, 2), "built-in"), InputError);
  EXPECT_THROW(kernel_set_from_files(std::vector<EmbeddedFile>{good[0]}, "built-in"), InputError);
  EXPECT_THROW(kernel_set_from_files(std::vector<EmbeddedFile>{good[0], good[1], good[3]}, "built-in"), InputError);  // no producer
  EXPECT_THROW(kernel_set_from_files(std::vector<EmbeddedFile>{good[0], good[1], good[2]}, "built-in"), InputError);  // no format cubin
  try {
    kernel_set_from_files(files(three, 3, three, 3), "built-in");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at /cp_slot_mapping/cubin: cubin cp_slot_mapping.cubin has 3 bytes"), std::string::npos);
  }
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

TEST(TritonAotBuiltIn, hasOneFormatKernelPerInputFormatAndSlotType) {
  const AotManifest& m = built_in().manifest;
  EXPECT_EQ(m.format_block, 128);
  const QuantFormat formats[] = {QuantFormat::nvfp4,     QuantFormat::mxfp8_e4m3, QuantFormat::mxfp8_e5m2, QuantFormat::mxfp4,
                                 QuantFormat::ds_mla,    QuantFormat::indexer_k,  QuantFormat::fp8_inline, QuantFormat::int8_inline,
                                 QuantFormat::asym_int8, QuantFormat::asym_int4};
  EXPECT_EQ(m.format_kernels.size(), std::size(kInputs) * std::size(formats) * std::size(kSlots));
  for (DType in : kInputs)
    for (QuantFormat f : formats)
      for (IndexType slot : kSlots) {
        const AotKernel* k = find_format_kernel(m, in, f, slot);
        ASSERT_NE(k, nullptr) << to_string(in) << "->" << to_string(f) << "/" << to_string(slot);
        EXPECT_EQ(k->function, "kv_append_format_kernel");
        EXPECT_EQ(k->arch, "sm_90a");
        EXPECT_LE(k->shared_bytes, 48 * 1024);
        EXPECT_GT(built_in().cubins.at(k->cubin).size(), 1000u);
      }
}

// The built-in format kernel takes every argument the loader packs: the hand-built NVFP4 case.
TEST(TritonAotBuiltIn, aFormatCasePacksEveryArgumentOfItsKernel) {
  const Case c = nvfp4_case();
  constexpr int64_t kBase = int64_t{1} << 32;
  const ArenaLayout layout = plan_arena(c);
  const KvAppendParams p = append_params(c, reinterpret_cast<std::byte*>(kBase), layout);
  const AotKernel* k = find_format_kernel(built_in().manifest, DType::bf16, QuantFormat::nvfp4, IndexType::i64);
  ASSERT_NE(k, nullptr);
  PackedArgs a;
  ASSERT_EQ(pack_format_arguments(*k, p, a), "");
  std::map<std::string, size_t> at;
  for (size_t j = 0; j < k->params.size(); ++j) at[k->params[j].name] = j;
  EXPECT_EQ(cell_i64(a, at.at("cache_ptr")), kBase + layout.cache_begin);
  EXPECT_EQ(cell_i64(a, at.at("key_ptr")), kBase + layout.input_begin);
  EXPECT_EQ(cell_i32(a, at.at("vs_pos_x")), 4);
  EXPECT_EQ(cell_i64(a, at.at("vs_pos1")), 16);
  EXPECT_EQ(cell_i32(a, at.at("ks_pos_x")), 1);
  EXPECT_EQ(cell_i32(a, at.at("nvfp4_rule")), 1);
  EXPECT_EQ(cell_i32(a, at.at("has_value")), 1);
  EXPECT_EQ(cell_i32(a, at.at("head_dim")), 64);
  EXPECT_EQ(k->params.back().type, ParamType::scratch);
}

TEST(TritonAotBuiltIn, hasTheSlotMappingProducer) {
  const AotKernel& k = built_in().manifest.cp_slot_mapping;
  EXPECT_EQ(k.function, "cp_slot_mapping_kernel");
  EXPECT_EQ(k.arch, "sm_90a");
  EXPECT_EQ(k.rows_per_program, kCpSlotMappingThreads);
  EXPECT_EQ(k.cluster_dims, (std::array<int, 3>{1, 1, 1}));
  EXPECT_GT(built_in().cubins.at(k.cubin).size(), 1000u);
  ASSERT_GE(k.params.size(), 2u);
  EXPECT_EQ(k.params.back().type, ParamType::scratch);
}

// Every rank of every context-parallel case (both inputs) packs: the append addresses the rank's
// shard and inputs, the producer (input slot_mapping) the rank's slot_mapping.
TEST(TritonAotBuiltIn, everyRankOfAContextParallelCasePacksItsCalls) {
  Profile profile = default_profile();
  profile.cp_percent = 100;
  constexpr int64_t kBase = int64_t{1} << 32;  // the image's address; never dereferenced
  std::byte* const base = reinterpret_cast<std::byte*>(kBase);
  const AotManifest& m = built_in().manifest;
  std::set<CpInput> inputs;
  for (int64_t i = 0; i < 200; ++i) {
    const Case c = materialize(generate_case(profile, 9, i));
    ASSERT_TRUE(c.has_cp()) << "case " << i;
    inputs.insert(c.cp_input);
    const ArenaLayout layout = plan_arena(c);
    const CpSection section = cp_section(c);
    const int64_t slots = kBase + layout.slots_begin;
    for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
      const KvAppendParams p = append_params(c, base, layout, rank);
      const AotKernel* k = find_kernel(m, p.input_dtype, p.cache_dtype, p.slot_type);
      ASSERT_NE(k, nullptr) << "case " << i;
      AotLaunchPlan plan;
      ASSERT_EQ(plan_launch(m, p, plan), "") << "case " << i;
      PackedArgs a;
      ASSERT_EQ(pack_arguments(*k, p, plan, a), "") << "case " << i;
      std::map<std::string, size_t> at;
      for (size_t j = 0; j < k->params.size(); ++j) at[k->params[j].name] = j;
      EXPECT_EQ(cell_i64(a, at.at("num_blocks")), c.shard_blocks());
      EXPECT_EQ(cell_i64(a, at.at("k_cache_ptr")),
                kBase + layout.cache_begin + (c.cache_k_offset + rank * c.shard_blocks() * c.cache.stride_block) * dtype_size(c.cache_dtype));
      const bool positions = c.cp_input == CpInput::positions;
      EXPECT_EQ(cell_i32(a, at.at("cp")), positions ? 1 : 0);
      if (positions) {
        EXPECT_EQ(cell_i64(a, at.at("slot_ptr")), slots);
        EXPECT_EQ(cell_i64(a, at.at("cp_pos_ptr")), slots + 4 * section.positions);
        EXPECT_EQ(cell_i32(a, at.at("cp_rank")), rank);
        EXPECT_EQ(cell_i32(a, at.at("cp_world_size")), c.cp_world_size);
        EXPECT_EQ(cell_i32(a, at.at("cp_interleave")), c.cp_interleave);
        continue;
      }
      const int64_t mapping = slots + 4 * (section.rank_mappings + rank * c.num_slots());
      EXPECT_EQ(cell_i64(a, at.at("slot_ptr")), mapping);
      const CpSlotMappingParams q = cp_producer_params(c, base, layout, rank);
      ASSERT_EQ(plan_cp_slot_mapping(m.cp_slot_mapping, q, plan), "") << "case " << i;
      EXPECT_EQ(plan.grid[0], static_cast<uint32_t>((c.num_slots() + kCpSlotMappingThreads - 1) / kCpSlotMappingThreads));
      ASSERT_EQ(pack_cp_arguments(m.cp_slot_mapping, q, a), "") << "case " << i;
      at.clear();
      for (size_t j = 0; j < m.cp_slot_mapping.params.size(); ++j) at[m.cp_slot_mapping.params[j].name] = j;
      EXPECT_EQ(cell_i64(a, at.at("slot_mapping_ptr")), mapping);
      EXPECT_EQ(cell_i64(a, at.at("positions_ptr")), slots + 4 * section.positions);
      EXPECT_EQ(cell_i64(a, at.at("requests_ptr")), slots + 4 * section.requests);
      EXPECT_EQ(cell_i64(a, at.at("block_tables_ptr")), slots + 4 * section.tables);
      EXPECT_EQ(cell_i64(a, at.at("table_width")), section.table_width);
      EXPECT_EQ(cell_i64(a, at.at("num_rows")), c.num_slots());
      EXPECT_EQ(cell_i64(a, at.at("block_size")), c.cache.block_size);
      EXPECT_EQ(cell_i32(a, at.at("rank")), rank);
      EXPECT_EQ(cell_i32(a, at.at("world_size")), c.cp_world_size);
      EXPECT_EQ(cell_i32(a, at.at("interleave")), c.cp_interleave);
    }
  }
  EXPECT_EQ(inputs.size(), 2u) << "the profile should draw both inputs";
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
