// cuda_entry.cu — a C entry point to the CUDA append kernel for bench/bench.py (loaded with ctypes).
//
// Built by bench/build_cuda_entry.sh together with kernels/cuda/kv_append.cu into a shared object.
// It converts the plugin ABI's argument struct (include/kvfuzz_plugin.h) into kvf::KvAppendParams and
// calls kvf::kv_append_cuda(): the launcher and kernel the fuzzer's `cuda` target runs, nothing more.
#include "kv_append_cuda.h"
#include "kvfuzz_plugin.h"

namespace {

kvf::CacheGeometry geometry(const kvfz_cache_geometry& g) {
  return kvf::CacheGeometry{g.num_blocks, g.block_size, g.stride_block, g.stride_pos, g.stride_head};
}

}  // namespace

// Returns 0 after a successful launch, else the cudaError_t of the launch.
extern "C" __attribute__((visibility("default"))) int kvfuzz_bench_append(const kvfz_append_args* a) {
  kvf::KvAppendParams p;
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
  const kvf::LaunchConfig cfg = kvf::kv_append_launch_config(p);
  *grid = cfg.grid;
  *block = cfg.block;
}
