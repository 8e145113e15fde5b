// outside_scan_cpu.cpp — outside_scan.cuh compiled by the host compiler with Thrust's CPP device
// system, in a namespace of its own (THRUST_CUB_WRAPPED_NAMESPACE) so that it can never collide with
// the CUDA system's instantiations in src/targets/cuda/. No GPU or driver needed.
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP
#define THRUST_CUB_WRAPPED_NAMESPACE kvf_thrust_cpp

#include "outside_scan_cpu.h"

#include <thrust/execution_policy.h>

#include <cstring>

#include "outside_scan.cuh"

namespace kvf {

OutsideDiff scan_outside_host(const unsigned char* cache, const CacheFill& fill, const std::vector<ElemRange>& windows,
                              const std::vector<ElemRange>& ranges) {
  std::vector<int64_t> scratch(size_t{1} << 16);
  auto copy = [](void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); };
  return outside_scan::scan_outside(THRUST_NS_QUALIFIER::cpp::par, copy, cache, fill, windows.data(),
                                    static_cast<int64_t>(windows.size()), ranges, scratch.data(),
                                    static_cast<int64_t>(scratch.size()));
}

void fill_cache_host(unsigned char* cache, const CacheFill& fill, int64_t lo, int64_t hi) {
  outside_scan::fill_cache(THRUST_NS_QUALIFIER::cpp::par, cache, fill, lo, hi);
}

}  // namespace kvf
