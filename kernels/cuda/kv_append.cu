// kv_append.cu — GPU launcher of the CUDA append kernel (kv_append.cuh). Built by nvcc for sm_90
// by default (CMake option KVFUZZ_CUDA_ARCHITECTURES).
//
// kv_append_cuda() does grid math and the launch (of the instantiation kernel_path() picks;
// a quantised format's is the fields path's, with CacheT FormatCodes), nothing else, and returns the
// launch status.
// cp_slot_mapping_cuda() launches the context-parallel slot-mapping producer (cp_slot_mapping.cuh).
// An empty batch (num_slots == 0) launches nothing: a zero-size grid is a launch error in CUDA.
#include "kv_append.cuh"
#include "kv_append_cuda.h"

namespace kvf {

// kPath: kernel_path() of the call. P: KvAppendCore (a classic cache) or KvAppendParams (a quantised
// format), read in place from the parameter bank (__grid_constant__: never copied to local memory).
template <typename InT, typename CacheT, typename SlotT, KernelPath kPath, typename P>
__global__ void kv_append_kernel(const __grid_constant__ P p) {
  kv_append_thread<InT, CacheT, SlotT, kPath>(p, blockIdx.x, threadIdx.x, blockDim.x);
}

// KernelPath aligned (kDynamic: aligned_dynamic): thread (x, y) of block (token, y) holds chunk x of
// head y of the block's heads.
template <typename InT, typename CacheT, typename SlotT, bool kDynamic>
__global__ void kv_append_aligned_kernel(const __grid_constant__ KvAppendCore p) {
  const int head = blockIdx.y * blockDim.y + threadIdx.y;
  if constexpr (kDynamic) {
    append_aligned_dynamic_item<InT, CacheT, SlotT>(p, blockIdx.x, head, threadIdx.x, blockDim.x);
  } else {
    append_aligned_item<InT, CacheT, SlotT>(p, blockIdx.x, head, threadIdx.x);
  }
}

cudaError_t kv_append_cuda(const KvAppendParams& p, cudaStream_t stream) {
  if (p.num_slots == 0) return cudaSuccess;
  const LaunchConfig cfg = kv_append_launch_config(p);
  if (cfg.grid > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  const bool supported = dispatch_kv_append(p, [&](auto in, auto cache, auto slot) {
    using InT = typename decltype(in)::type;
    using CacheT = typename decltype(cache)::type;
    using SlotT = typename decltype(slot)::type;
    const unsigned grid = static_cast<unsigned>(cfg.grid);
    const KvAppendCore& core = p;  // a classic cache's kernels take the core alone
    if constexpr (kIsFormat<CacheT>) {  // a quantised format: the fields path's instantiation
      kv_append_kernel<InT, CacheT, SlotT, KernelPath::fields, KvAppendParams><<<grid, cfg.block, 0, stream>>>(p);
    } else {
      switch (cfg.path) {
        case KernelPath::aligned:
          kv_append_aligned_kernel<InT, CacheT, SlotT, false><<<dim3(grid, cfg.grid_y), dim3(cfg.block, cfg.block_y), 0, stream>>>(core);
          break;
        case KernelPath::aligned_dynamic:  // a quantised cache, as classic_dynamic
          if constexpr (kIsQuantized<CacheT>)
            kv_append_aligned_kernel<InT, CacheT, SlotT, true><<<dim3(grid, cfg.grid_y), dim3(cfg.block, cfg.block_y), 0, stream>>>(core);
          break;
        case KernelPath::fields:
          kv_append_kernel<InT, CacheT, SlotT, KernelPath::fields, KvAppendCore><<<grid, cfg.block, 0, stream>>>(core);
          break;
        case KernelPath::classic_dynamic:  // a quantised cache (dispatch_cache refuses a scaled float cache)
          if constexpr (kIsQuantized<CacheT>)
            kv_append_kernel<InT, CacheT, SlotT, KernelPath::classic_dynamic, KvAppendCore><<<grid, cfg.block, 0, stream>>>(core);
          break;
        case KernelPath::classic:
          kv_append_kernel<InT, CacheT, SlotT, KernelPath::classic, KvAppendCore><<<grid, cfg.block, 0, stream>>>(core);
          break;
      }
    }
  });
  if (!supported) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

__global__ void cp_slot_mapping_kernel(const CpSlotMappingParams p) {
  cp_slot_mapping_thread(p, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
}

cudaError_t cp_slot_mapping_cuda(const CpSlotMappingParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  const int64_t grid = (p.num_rows + kCpSlotMappingThreads - 1) / kCpSlotMappingThreads;
  if (grid > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  cp_slot_mapping_kernel<<<static_cast<unsigned>(grid), kCpSlotMappingThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvf
