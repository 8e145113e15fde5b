// plugin.cpp — kernels/cuda exported through the kvfuzz plugin C ABI (include/kvfuzz_plugin.h).
//
// One adapter source, parameterised by the kernel source directory D (which must hold kv_append.h,
// kv_append.cuh, kv_layout.cuh and kv_append_emu.cpp / kv_append.cu):
//   host build:   this file + D/kv_append_emu.cpp, the kernel's body on the CPU grid emulator
//                 (host pointers), exactly what the cuda-emu target runs;
//   device build: this file compiled with -DKVFUZZ_PLUGIN_DEVICE + D/kv_append.cu (nvcc), the kernel
//                 on the GPU (device pointers, the stream kvfuzz passes).
// The host build by hand (examples/plugins/CMakeLists.txt does the same; kvfuzz selftest builds
// mutated copies of kernels/cuda this way):
//   c++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -ID
//       -isystem /usr/local/cuda/include -Iinclude examples/plugins/cuda/plugin.cpp D/kv_append_emu.cpp -o X.so
// Hidden visibility matters: the plugin's kvf:: functions must bind to its own (possibly mutated)
// kernel, never to another copy in the process. Only the kvfuzz_plugin_* functions are exported: the
// three every plugin has and the optional slot-mapping producer (kernels/cuda/cp_slot_mapping.cuh).
#include <cstdio>
#include <cstring>

#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"
#include "kv_append.h"
#include "kvfuzz_plugin.h"
#if defined(KVFUZZ_PLUGIN_DEVICE)
#include "kv_append_cuda.h"
#endif

namespace {

using kvf::DType;
using kvf::IndexType;
using kvf::ScaleKind;

// The ABI's enums are the kernel's enums, value for value, so a cast converts them.
static_assert(KVFZ_F16 == static_cast<int>(DType::f16) && KVFZ_BF16 == static_cast<int>(DType::bf16) &&
              KVFZ_F32 == static_cast<int>(DType::f32) && KVFZ_FP8_E4M3 == static_cast<int>(DType::fp8_e4m3) &&
              KVFZ_FP8_E5M2 == static_cast<int>(DType::fp8_e5m2) && KVFZ_INT8 == static_cast<int>(DType::int8) &&
              KVFZ_FP4_E2M1 == static_cast<int>(DType::fp4_e2m1));
static_assert(KVFZ_QUANT_NVFP4 == static_cast<int>(kvf::QuantFormat::nvfp4) &&
              KVFZ_QUANT_INT8_INLINE == static_cast<int>(kvf::QuantFormat::int8_inline) &&
              KVFZ_QUANT_ASYM_INT4 == static_cast<int>(kvf::QuantFormat::asym_int4) && KVFZ_MAX_SUBMODES == kvf::kMaxSubModes);
static_assert(KVFZ_I32 == static_cast<int>(IndexType::i32) && KVFZ_I64 == static_cast<int>(IndexType::i64));
static_assert(KVFZ_SCALE_NONE == static_cast<int>(ScaleKind::none) &&
              KVFZ_SCALE_PER_TENSOR == static_cast<int>(ScaleKind::per_tensor) &&
              KVFZ_SCALE_PER_HEAD == static_cast<int>(ScaleKind::per_head) &&
              KVFZ_SCALE_PER_BLOCK == static_cast<int>(ScaleKind::per_block) &&
              KVFZ_SCALE_PER_TOKEN_HEAD == static_cast<int>(ScaleKind::per_token_head));

// The rounding convention it declares; kernels/cuda rounds exactly as the contract says. Tests build
// a mutant that truncates int8 with -DKVFUZZ_PLUGIN_ROUNDING=KVFZ_ROUNDING_WITHIN_1ULP.
#if !defined(KVFUZZ_PLUGIN_ROUNDING)
#define KVFUZZ_PLUGIN_ROUNDING KVFZ_ROUNDING_EXACT
#endif

#if defined(KVFUZZ_PLUGIN_DEVICE)
constexpr int32_t kMemory = KVFZ_MEMORY_DEVICE;
constexpr const char* kName = "kernels-cuda-device";
constexpr const char* kDescription = "kernels/cuda/kv_append.cu on the GPU, through the plugin ABI";
#else
constexpr int32_t kMemory = KVFZ_MEMORY_HOST;
constexpr const char* kName = "kernels-cuda-emu";
constexpr const char* kDescription = "kernels/cuda/kv_append.cuh on the CPU grid emulator, through the plugin ABI";
#endif

void set_error(char* error, size_t size, const char* text) {
  if (error != nullptr && size > 0) std::snprintf(error, size, "%s", text);
}

kvf::CacheGeometry geometry(const kvfz_cache_geometry& g) {
  return kvf::CacheGeometry{g.num_blocks, g.block_size, g.stride_block, g.stride_pos, g.stride_head};
}

kvf::FieldLayout field_layout(const kvfz_field& f) {
  kvf::FieldLayout l;
  l.offset = f.offset;
  for (int axis = 0; axis < kvf::kAxes; ++axis) {
    l.mode[axis].rank = f.mode[axis].rank;
    for (int i = 0; i < kvf::kMaxSubModes; ++i) {
      l.mode[axis].extent[i] = f.mode[axis].extent[i];
      l.mode[axis].stride[i] = f.mode[axis].stride[i];
    }
  }
  return l;
}

// ABI v2: a quantised format's call (kvfz_quant_format): its conventions as the kernel's
// FormatRules, its buffers and its fields' layouts (the kernel's code_layout, scale_layout,
// zero_layout, rope_layout: kv_append.cuh).
void format_params(const kvfz_append_args& a, kvf::KvAppendParams& p) {
  const auto has = [&](int rule) { return (a.quant_rules >> rule) & 1u; };
  p.quant_format = static_cast<kvf::QuantFormat>(a.quant_format);
  p.format_rules.nvfp4 = has(KVFZ_RULE_NVFP4_FLASHINFER_PRECISE) ? 1 : 0;
  p.format_rules.mx = has(KVFZ_RULE_MX_NV_CEIL) ? 1 : 0;
  p.format_rules.ds_mla = has(KVFZ_RULE_DS_MLA_FLT_MIN) ? 0 : 1;
  p.format_rules.indexer = has(KVFZ_RULE_INDEXER_UE8M0_LOG2F) ? 1 : has(KVFZ_RULE_INDEXER_UE8M0_EXACT) ? 2 : 0;
  p.format_rules.asym_arith = has(KVFZ_RULE_ASYM_F16) ? 1 : has(KVFZ_RULE_ASYM_BF16) ? 2 : 0;
  p.format_rules.asym_lanes = has(KVFZ_RULE_ASYM_LANES_ZERO_PADDED_POW2) ? 1 : 0;
  p.format_rules.int4_pairing = has(KVFZ_RULE_INT4_ADJACENT) ? 1 : 0;
  p.format_group = a.quant_group;
  p.format_cache = a.format_cache;
  p.format_scales = a.format_cache;  // the scales' buffer: the cache's, unless their field says otherwise
  for (int32_t i = 0; i < a.num_fields && i < KVFZ_MAX_FIELDS; ++i) {
    const kvfz_field& f = a.fields[i];
    const int t = f.index == 1 ? 1 : 0;
    switch (f.role) {
      case KVFZ_ROLE_DATA:
        if (f.group == 0) p.rope_layout = field_layout(f);  // ds_mla's rope dims, copied
        else p.code_layout[t] = field_layout(f);
        break;
      case KVFZ_ROLE_SCALE:
        p.scale_layout[t] = field_layout(f);
        if (f.buffer == KVFZ_BUFFER_SCALE_CACHE) p.format_scales = a.format_scale_cache;
        break;
      case KVFZ_ROLE_ZERO: p.zero_layout[t] = field_layout(f); break;
      default: break;
    }
  }
  if (a.quant_format == KVFZ_QUANT_DS_MLA) p.latent_dim = a.head_dim - a.rope_dim;
}

// The kernel's parameters from one ABI call: a field-by-field copy.
kvf::KvAppendParams params(const kvfz_append_args& a) {
  kvf::KvAppendParams p;
  p.key = a.key;
  p.value = a.value;
  p.key_stride_token = a.key_stride_token;
  p.key_stride_head = a.key_stride_head;
  p.value_stride_token = a.value_stride_token;
  p.value_stride_head = a.value_stride_head;
  p.slot_mapping = a.slot_mapping;
  p.slot_type = static_cast<IndexType>(a.slot_type);
  p.num_slots = a.num_slots;
  p.num_input_rows = a.num_input_rows;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.cache = geometry(a.cache);
  p.vllm_legacy = a.layout == KVFZ_LAYOUT_VLLM_LEGACY;  // x-packed K, transposed V (kv_format.cuh)
  p.num_heads = a.num_heads;
  p.head_dim = a.head_dim;
  p.input_dtype = static_cast<DType>(a.input_dtype);
  p.cache_dtype = static_cast<DType>(a.cache_dtype);
  p.invalid_slots = a.invalid_slots;
  p.scale_kind = static_cast<ScaleKind>(a.scale_kind);
  p.k_scale = a.k_scale;
  p.v_scale = a.v_scale;
  p.k_scale_cache = a.k_scale_cache;
  p.v_scale_cache = a.v_scale_cache;
  p.scale_cache = geometry(a.scale_cache);
  // ABI v2: the format family (kvfz_family).
  p.has_value = a.family == KVFZ_FAMILY_KV || a.family == KVFZ_FAMILY_KV_SPLIT;
  if (a.family == KVFZ_FAMILY_KV_SPLIT) {
    p.value_head_dim = a.value_head_dim;
    p.value_cache = geometry(a.value_cache);
  }
  p.rope = a.rope;
  p.rope_stride_token = a.rope_stride_token;
  p.rope_stride_head = a.rope_stride_head;
  p.rope_dim = a.rope_dim;
  // ABI v2: FlashInfer's CSR addressing (kvfz_addressing) instead of slot_mapping.
  if (a.addressing == KVFZ_ADDRESSING_CSR) {
    p.csr_batch_indices = a.batch_indices;
    p.csr_positions = a.positions;
    p.csr_kv_indices = a.kv_indices;
    p.csr_kv_indptr = a.kv_indptr;
    p.csr_kv_last_page_len = a.kv_last_page_len;
    p.csr_batch_size = a.batch_size;
  }
  // ABI v2: a ring whose kernel applies the window (kvfz_window POSITIONS).
  if (a.window == KVFZ_WINDOW_POSITIONS) {
    p.window_positions = a.window_positions;
    p.window_seq_lens = a.window_seq_lens;
    p.window_size = a.window_size;
    p.window_sinks = a.window_sinks;
  }
  // ABI v2: a context-parallel rank that localises its tokens (kvfz_cp_input POSITIONS).
  if (a.cp_input == KVFZ_CP_POSITIONS) {
    p.cp_positions = a.cp_positions;
    p.cp_rank = a.cp_rank;
    p.cp_world_size = a.cp_world_size;
    p.cp_interleave = a.cp_interleave;
  }
  if (KVFZ_HAS_FIELD(&a, kvfz_append_args, fields) && a.quant_format != KVFZ_QUANT_NONE) format_params(a, p);
  return p;
}

}  // namespace

extern "C" {

uint32_t kvfuzz_plugin_abi_version(void) { return KVFUZZ_PLUGIN_ABI_VERSION; }

int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size) {
#if defined(KVFUZZ_PLUGIN_DEVICE)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device >= count) {
    set_error(error, error_size, "no such CUDA device (is an NVIDIA driver installed?)");
    return 1;
  }
#else
  (void)device;
  (void)error;
  (void)error_size;
#endif
  caps->memory = kMemory;
  caps->name = kName;
  caps->description = kDescription;
  caps->layouts = (1u << KVFZ_LAYOUT_PAGED_NHD) | (1u << KVFZ_LAYOUT_PAGED_HND) | (1u << KVFZ_LAYOUT_CONTIGUOUS_BSHD) |
                  (1u << KVFZ_LAYOUT_CONTIGUOUS_BHSD) | (1u << KVFZ_LAYOUT_PACKED_KV_NHD) |
                  (1u << KVFZ_LAYOUT_PACKED_CONTENT_HND) | (1u << KVFZ_LAYOUT_VLLM_LEGACY);
  caps->input_dtypes = (1u << KVFZ_F16) | (1u << KVFZ_BF16) | (1u << KVFZ_F32);
  caps->cache_dtypes = caps->input_dtypes | (1u << KVFZ_FP8_E4M3) | (1u << KVFZ_FP8_E5M2) | (1u << KVFZ_INT8);
  caps->scale_kinds = (1u << KVFZ_SCALE_NONE) | (1u << KVFZ_SCALE_PER_TENSOR) | (1u << KVFZ_SCALE_PER_HEAD) |
                      (1u << KVFZ_SCALE_PER_BLOCK) | (1u << KVFZ_SCALE_PER_TOKEN_HEAD);
  caps->slot_types = (1u << KVFZ_I32) | (1u << KVFZ_I64);
  caps->features = KVFZ_FEATURE_FUSED_QKV | KVFZ_FEATURE_STRIDED_INPUT | KVFZ_FEATURE_PADDED_CACHE |
                   KVFZ_FEATURE_GRAPH_PADDING_ROWS | KVFZ_FEATURE_INVALID_SLOT_COUNTER | KVFZ_FEATURE_UNALIGNED;
  caps->rounding = KVFUZZ_PLUGIN_ROUNDING;  // min/max head_dim, heads, block size: no limits (0)
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, families))
    caps->families = (1u << KVFZ_FAMILY_KV) | (1u << KVFZ_FAMILY_KV_SPLIT) | (1u << KVFZ_FAMILY_K_ONLY) | (1u << KVFZ_FAMILY_MLA);
  // Padding rows at the sink slot 0 are written there like any row: right in both conventions.
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, padding_modes))
    caps->padding_modes = (1u << KVFZ_PADDING_NEGATIVE) | (1u << KVFZ_PADDING_SINK);
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, addressings))
    caps->addressings = (1u << KVFZ_ADDRESSING_SLOT_MAPPING) | (1u << KVFZ_ADDRESSING_CSR);
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, windows))
    caps->windows = (1u << KVFZ_WINDOW_NONE) | (1u << KVFZ_WINDOW_SLOT_MAPPING) | (1u << KVFZ_WINDOW_POSITIONS);
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, cp_inputs))
    caps->cp_inputs = (1u << KVFZ_CP_NONE) | (1u << KVFZ_CP_SLOT_MAPPING) | (1u << KVFZ_CP_POSITIONS);
  // The quantised formats the kernel writes (all but the asymmetric ones), under every convention of theirs.
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, quant_formats))
    caps->quant_formats = (1u << KVFZ_QUANT_NONE) | (1u << KVFZ_QUANT_NVFP4) | (1u << KVFZ_QUANT_MXFP8_E4M3) |
                          (1u << KVFZ_QUANT_MXFP8_E5M2) | (1u << KVFZ_QUANT_MXFP4) | (1u << KVFZ_QUANT_DS_MLA) |
                          (1u << KVFZ_QUANT_INDEXER_K) | (1u << KVFZ_QUANT_FP8_INLINE) | (1u << KVFZ_QUANT_INT8_INLINE);
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, quant_rules))
    caps->quant_rules = (1u << (KVFZ_RULE_INDEXER_UE8M0_EXACT + 1)) - 1;  // NVFP4_FLASHINFER .. INDEXER_UE8M0_EXACT
#if defined(KVFUZZ_PLUGIN_FORMATS_ONLY)
  // A writer of quantised formats only (as a ds_mla or indexer writer is): no NONE bit, no classic
  // cache dtype or scale kind. kvfuzz then draws every case in one of the formats.
  caps->quant_formats &= ~(1u << KVFZ_QUANT_NONE);
  caps->cache_dtypes = 0;
  caps->scale_kinds = 0;
#endif
  return 0;
}

int kvfuzz_plugin_cp_slot_mapping(const kvfz_cp_slot_mapping_args* args, char* error, size_t error_size) {
  if (args->struct_size < sizeof(kvfz_cp_slot_mapping_args)) {
    set_error(error, error_size, "kvfz_cp_slot_mapping_args is smaller than this plugin's ABI version expects");
    return 1;
  }
  kvf::CpSlotMappingParams p;
  p.positions = args->positions;
  p.requests = args->requests;
  p.block_tables = args->block_tables;
  p.table_width = args->table_width;
  p.num_rows = args->num_rows;
  p.block_size = args->block_size;
  p.rank = args->rank;
  p.world_size = args->world_size;
  p.interleave = args->interleave;
  p.slot_mapping = args->slot_mapping;
#if defined(KVFUZZ_PLUGIN_DEVICE)
  const cudaError_t e = kvf::cp_slot_mapping_cuda(p, static_cast<cudaStream_t>(args->stream));
  if (e != cudaSuccess) {
    if (error != nullptr && error_size > 0)
      std::snprintf(error, error_size, "producer launch failed: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
  }
#else
  kvf::cp_slot_mapping_emu(p);
#endif
  return 0;
}

int kvfuzz_plugin_append(const kvfz_append_args* args, char* error, size_t error_size) {
  if (args->struct_size < sizeof(kvfz_append_args)) {
    set_error(error, error_size, "kvfz_append_args is smaller than this plugin's ABI version expects");
    return 1;
  }
  const kvf::KvAppendParams p = params(*args);
#if defined(KVFUZZ_PLUGIN_DEVICE)
  // The launch status (include/kvfuzz_plugin.h): kv_append_cuda() returns cudaGetLastError() after
  // its launch. A refused launch writes nothing, and returning 0 would leave kvfuzz only
  // missing_write findings to report.
  const cudaError_t e = kvf::kv_append_cuda(p, static_cast<cudaStream_t>(args->stream));
  if (e != cudaSuccess) {
    if (error != nullptr && error_size > 0)
      std::snprintf(error, error_size, "kernel launch failed: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
  }
  return 0;
#else
  if (kvf::kv_append_emu(p) == kvf::LaunchStatus::ok) return 0;
  set_error(error, error_size, "the kernel has no specialisation for this dtype combination");
  return 1;
#endif
}

}  // extern "C"
