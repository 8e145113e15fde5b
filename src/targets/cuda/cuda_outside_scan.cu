// cuda_outside_scan.cu — see cuda_outside_scan.h. Thrust algorithms run on the target's stream; their
// temporary storage comes from the stream-ordered allocator. Thrust reports CUDA failures by
// throwing thrust::system_error, which becomes the cudaError_t it carries.
#include "cuda_outside_scan.h"

#include <thrust/execution_policy.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system_error.h>

#include <new>

#include "arena/outside_scan.cuh"

namespace kvf {

namespace {

cudaError_t error_of(const thrust::system_error& e) { return static_cast<cudaError_t>(e.code().value()); }

}  // namespace

cudaError_t fill_cache_on_device(unsigned char* cache, const CacheFill& fill, int64_t elems, cudaStream_t stream) {
  try {
    outside_scan::fill_cache(thrust::cuda::par_nosync.on(stream), cache, fill, 0, elems);
  } catch (const thrust::system_error& e) {
    return error_of(e);
  } catch (const std::bad_alloc&) {
    return cudaErrorMemoryAllocation;
  }
  return cudaGetLastError();
}

cudaError_t scan_outside_on_device(const unsigned char* cache, const CacheFill& fill, const std::vector<ElemRange>& windows,
                                   int64_t elems, cudaStream_t stream, OutsideDiff& out) {
  constexpr int64_t kScratch = int64_t{1} << 20;  // run edges per chunk of 2^21 elements
  ElemRange* d_windows = nullptr;
  int64_t* d_scratch = nullptr;
  const size_t window_bytes = (windows.empty() ? 1 : windows.size()) * sizeof(ElemRange);
  if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&d_windows), window_bytes, stream); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&d_scratch), kScratch * sizeof(int64_t), stream); e != cudaSuccess) {
    cudaFreeAsync(d_windows, stream);
    return e;
  }
  cudaError_t result = cudaMemcpyAsync(d_windows, windows.data(), windows.size() * sizeof(ElemRange), cudaMemcpyHostToDevice, stream);
  if (result == cudaSuccess) {
    auto copy = [stream](void* dst, const void* src, size_t bytes) {
      const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
      if (e == cudaSuccess) {
        const cudaError_t s = cudaStreamSynchronize(stream);
        if (s != cudaSuccess) throw thrust::system_error(s, thrust::cuda_category());
      } else {
        throw thrust::system_error(e, thrust::cuda_category());
      }
    };
    try {
      out = outside_scan::scan_outside(thrust::cuda::par.on(stream), copy, cache, fill, d_windows, static_cast<int64_t>(windows.size()),
                                       {ElemRange{0, elems}}, d_scratch, kScratch);
    } catch (const thrust::system_error& e) {
      result = error_of(e);
    } catch (const std::bad_alloc&) {
      result = cudaErrorMemoryAllocation;
    }
  }
  cudaFreeAsync(d_scratch, stream);
  cudaFreeAsync(d_windows, stream);
  const cudaError_t sync = cudaStreamSynchronize(stream);
  return result != cudaSuccess ? result : sync;
}

}  // namespace kvf
