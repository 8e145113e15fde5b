// kv_append_cuda_absent.cpp — stands in for kv_append.cu in binaries built without their own GPU
// kernel (the mutant binaries unless -DKVFUZZ_GPU_MUTANTS=ON): the cuda target then refuses every
// launch instead of silently running some other kernel.
#include "kv_append_cuda.h"

namespace kvf {

cudaError_t kv_append_cuda(const KvAppendParams&, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t cp_slot_mapping_cuda(const CpSlotMappingParams&, cudaStream_t) { return cudaErrorNotSupported; }

}  // namespace kvf
