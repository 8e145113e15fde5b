// outside_scan_cpu.h — outside_scan.cuh instantiated for the CPU (Thrust's CPP system).
#pragma once

#include <cstdint>
#include <vector>

#include "cache_fill.cuh"
#include "outside_diff.h"

namespace kvf {

// scan_outside() over `ranges` of a host cache buffer (element 0 at `cache`); `windows` are excluded.
OutsideDiff scan_outside_host(const unsigned char* cache, const CacheFill& fill, const std::vector<ElemRange>& windows,
                              const std::vector<ElemRange>& ranges);

// fill_cache() of host cache elements [lo, hi).
void fill_cache_host(unsigned char* cache, const CacheFill& fill, int64_t lo, int64_t hi);

}  // namespace kvf
