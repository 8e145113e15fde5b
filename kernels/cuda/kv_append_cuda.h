// kv_append_cuda.h — GPU entry point of the CUDA append kernel (needs the CUDA runtime).
#pragma once

#include <cuda_runtime.h>

#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"

namespace kvf {

// Launches the append on `stream`. Pointers in p are device pointers. Returns the launch status;
// errors raised while the kernel runs surface at the next synchronisation.
cudaError_t kv_append_cuda(const KvAppendParams& p, cudaStream_t stream);

// Launches the context-parallel slot-mapping producer (cp_slot_mapping.cuh) on `stream`.
cudaError_t cp_slot_mapping_cuda(const CpSlotMappingParams& p, cudaStream_t stream);

}  // namespace kvf
