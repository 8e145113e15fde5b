// cuda_entry.cu — a C entry point to the CUDA append kernel for bench/bench.py (loaded with ctypes).
//
// Built by bench/build_cuda_entry.sh together with kernels/cuda/kv_append.cu into a shared object.
// It converts the plugin ABI's argument struct (include/kvfuzz_plugin.h, v2) into kvf::KvAppendParams
// and calls kvf::kv_append_cuda(): the launcher and kernel the fuzzer's `cuda` target runs, nothing more.
//
// A kernel folder with the quantised formats (KVFUZZ_BENCH_PLUGIN_PARAMS, which build_cuda_entry.sh
// defines when kv_append.cuh has QuantFormat) gets its parameters from the example CUDA plugin's
// params() (examples/plugins/cuda/plugin.cpp, included here): the one ABI -> KvAppendParams mapping,
// the one kvfuzz's plugin target fuzzes, quantised formats and their fields' layouts included.
//
// The same file builds against an older kernel folder (a baseline commit) whose KvAppendParams lacks
// vllm_legacy, the format families or the quantised formats: the fields are copied one by one and set
// only where the struct has them (a requires-expression), and a case needing what the kernel lacks is
// refused with KVFZ_BENCH_UNSUPPORTED before anything is launched.
#include "kv_append_cuda.h"
#include "kvfuzz_plugin.h"

#if KVFUZZ_BENCH_PLUGIN_PARAMS
#define KVFUZZ_PLUGIN_DEVICE 1
#include "plugin.cpp"  // examples/plugins/cuda: params(const kvfz_append_args&)
#endif

// kvfuzz_bench_append's return for "this build's kernel has no such format": no cudaError_t is negative.
#define KVFZ_BENCH_UNSUPPORTED (-1)

#if !KVFUZZ_BENCH_PLUGIN_PARAMS
namespace {

kvf::CacheGeometry geometry(const kvfz_cache_geometry& g) {
  return kvf::CacheGeometry{g.num_blocks, g.block_size, g.stride_block, g.stride_pos, g.stride_head};
}

// Sets the layout and family fields of p that the kernel's KvAppendParams has; false when the case
// needs a field it lacks. P is a template parameter so that a missing member is `false`, not an error.
template <typename P>
bool set_format(P& p, const kvfz_append_args* a) {
  if (a->layout == KVFZ_LAYOUT_VLLM_LEGACY) {
    if constexpr (requires { p.vllm_legacy; }) {
      p.vllm_legacy = true;  // x-packed K, transposed V (kv_format.cuh)
    } else {
      return false;
    }
  }
  if constexpr (requires { p.has_value; p.value_head_dim; p.value_cache; p.rope; p.rope_dim; }) {
    p.has_value = a->family == KVFZ_FAMILY_KV || a->family == KVFZ_FAMILY_KV_SPLIT;
    if (a->family == KVFZ_FAMILY_KV_SPLIT) {
      p.value_head_dim = a->value_head_dim;
      p.value_cache = geometry(a->value_cache);
    }
    p.rope = a->rope;
    p.rope_stride_token = a->rope_stride_token;
    p.rope_stride_head = a->rope_stride_head;
    p.rope_dim = a->rope_dim;
    return true;
  } else {
    return a->family == KVFZ_FAMILY_KV;
  }
}

// The kernel's parameters from one ABI call, field by field; false when the kernel lacks the case's
// layout, family or quantised format (this path has none: those kernels take KVFUZZ_BENCH_PLUGIN_PARAMS).
bool legacy_params(const kvfz_append_args* a, kvf::KvAppendParams& p) {
  if (a->quant_format != KVFZ_QUANT_NONE) return false;
  p.key = a->key;
  p.value = a->value;
  p.key_stride_token = a->key_stride_token;
  p.key_stride_head = a->key_stride_head;
  p.value_stride_token = a->value_stride_token;
  p.value_stride_head = a->value_stride_head;
  p.slot_mapping = a->slot_mapping;
  p.slot_type = static_cast<kvf::IndexType>(a->slot_type);
  p.num_slots = a->num_slots;
  p.num_input_rows = a->num_input_rows;
  p.k_cache = a->k_cache;
  p.v_cache = a->v_cache;
  p.cache = geometry(a->cache);
  p.num_heads = a->num_heads;
  p.head_dim = a->head_dim;
  p.input_dtype = static_cast<kvf::DType>(a->input_dtype);
  p.cache_dtype = static_cast<kvf::DType>(a->cache_dtype);
  p.invalid_slots = a->invalid_slots;
  p.scale_kind = static_cast<kvf::ScaleKind>(a->scale_kind);
  p.k_scale = a->k_scale;
  p.v_scale = a->v_scale;
  p.k_scale_cache = a->k_scale_cache;
  p.v_scale_cache = a->v_scale_cache;
  p.scale_cache = geometry(a->scale_cache);
  return set_format(p, a);
}

}  // namespace
#endif

// sizeof(kvfz_append_args) as compiled here: bench.py checks its ctypes mirror against it.
extern "C" __attribute__((visibility("default"))) long long kvfuzz_bench_args_size() {
  return static_cast<long long>(sizeof(kvfz_append_args));
}

// Returns 0 after a successful launch, KVFZ_BENCH_UNSUPPORTED (nothing launched) when the kernel
// this was built with lacks the case's layout, family or quantised format, else the cudaError_t of
// the launch.
extern "C" __attribute__((visibility("default"))) int kvfuzz_bench_append(const kvfz_append_args* a) {
#if KVFUZZ_BENCH_PLUGIN_PARAMS
  const kvf::KvAppendParams p = params(*a);
#else
  kvf::KvAppendParams p;
  if (!legacy_params(a, p)) return KVFZ_BENCH_UNSUPPORTED;
#endif
  return static_cast<int>(kvf::kv_append_cuda(p, static_cast<cudaStream_t>(a->stream)));
}

// The launch configuration the kernel would use (for the report).
extern "C" __attribute__((visibility("default"))) void kvfuzz_bench_launch_config(const kvfz_append_args* a,
                                                                              long long* grid, int* block) {
  kvf::KvAppendParams p;
  p.num_slots = a->num_slots;
  p.num_input_rows = a->num_input_rows;
  p.num_heads = a->num_heads;
  p.head_dim = a->head_dim;
  p.input_dtype = static_cast<kvf::DType>(a->input_dtype);
  p.cache_dtype = static_cast<kvf::DType>(a->cache_dtype);
  p.scale_kind = static_cast<kvf::ScaleKind>(a->scale_kind);
#if KVFUZZ_BENCH_PLUGIN_PARAMS
  p.quant_format = static_cast<kvf::QuantFormat>(a->quant_format);
#endif
  const kvf::LaunchConfig cfg = kvf::kv_append_launch_config(p);
  *grid = cfg.grid;
  *block = cfg.block;
}
