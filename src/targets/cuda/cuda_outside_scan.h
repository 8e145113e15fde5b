// cuda_outside_scan.h — arena/outside_scan.cuh on a CUDA device (Thrust's CUDA system on a stream):
// the fill and the check of a large cache where it lives (arena/windows.h). Plain C++17 (no case
// model), so that nvcc compiles the implementation (cuda_outside_scan.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "arena/cache_fill.cuh"
#include "arena/outside_diff.h"

namespace kvf {

// Stores the fill into device cache elements [0, elems) on `stream` (asynchronous).
cudaError_t fill_cache_on_device(unsigned char* cache, const CacheFill& fill, int64_t elems, cudaStream_t stream);

// Checks device cache elements [0, elems) outside `windows` (host memory; sorted, disjoint) against
// the fill, into `out` (synchronous). The error of a failing CUDA call, else cudaSuccess.
cudaError_t scan_outside_on_device(const unsigned char* cache, const CacheFill& fill, const std::vector<ElemRange>& windows,
                                   int64_t elems, cudaStream_t stream, OutsideDiff& out);

}  // namespace kvf
