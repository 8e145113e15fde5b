// outside_scan.cuh — the check of a windowed run's remainder (windows.h), written once with Thrust
// and instantiated for two systems:
//   * the CUDA device (src/targets/cuda/cuda_windowed.cu, THRUST's CUDA system on a stream): the
//     `cuda` target fills and checks a multi-GiB cache where it lives;
//   * the CPU (outside_scan_cpu.cpp, compiled with THRUST_DEVICE_SYSTEM_CPP): the host path of
//     Target::run_windowed (cuda-emu and every target without a device path of its own) checks the
//     pages the kernel touched, and tests/unit/arena/outside_scan_test.cpp tests the Thrust code on
//     a machine without a GPU.
//
// fill_cache() stores the fill (one constant, cache_fill.cuh) with thrust::fill. scan_outside() counts
// every element of the scanned ranges that lies outside the windows and whose bits differ from the
// fill (one count_if, a streaming compare; the window search runs only for elements that differ),
// and only when some differ, finds the maximal
// runs of such elements (count_if and copy_if of run starts and ends, chunk by chunk, into a fixed
// scratch buffer) and fetches the bytes of the first runs. Differences never cross a scanned range's
// end: callers pass ranges that are separated by windows or unscanned memory.
//
// Include after Thrust's configuration (the including file chooses the system).
#pragma once

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/fill.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cache_fill.cuh"
#include "outside_diff.h"

namespace kvf {
namespace outside_scan {

// True when element e lies outside every window and differs from its fill.
struct Differs {
  const unsigned char* cache;  // element 0 of the cache buffer, in the system's memory
  CacheFill fill;
  const ElemRange* windows;    // sorted, disjoint, in the system's memory
  int64_t num_windows;

  KVF_HD bool in_window(int64_t e) const {
    int64_t lo = 0, hi = num_windows;  // first window with begin > e is at `lo` after the search
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (windows[mid].begin <= e) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo > 0 && e < windows[lo - 1].end;
  }
  KVF_HD bool operator()(int64_t e) const {
    if (load_cache_bits(cache, e, fill.elem_size) == fill.bits) return false;  // the common case: no search
    return !in_window(e);
  }
};

// Element e starts (first = true) or ends (first = false) a maximal run of differing elements in
// the scanned range [lo, hi).
struct RunEdge {
  Differs differs;
  int64_t lo, hi;
  bool first;
  KVF_HD bool operator()(int64_t e) const {
    if (!differs(e)) return false;
    const int64_t neighbour = first ? e - 1 : e + 1;
    return neighbour < lo || neighbour >= hi || !differs(neighbour);
  }
};

// Fills cache elements [lo, hi) with the fill. `cache` is aligned for the element type.
template <typename Policy>
void fill_cache(const Policy& policy, unsigned char* cache, const CacheFill& fill, int64_t lo, int64_t hi) {
  namespace thrust = THRUST_NS_QUALIFIER;
  switch (fill.elem_size) {
    case 4: {
      auto* p = reinterpret_cast<uint32_t*>(cache);
      thrust::fill(policy, p + lo, p + hi, static_cast<uint32_t>(fill.bits));
      return;
    }
    case 2: {
      auto* p = reinterpret_cast<uint16_t*>(cache);
      thrust::fill(policy, p + lo, p + hi, static_cast<uint16_t>(fill.bits));
      return;
    }
    default: thrust::fill(policy, cache + lo, cache + hi, static_cast<unsigned char>(fill.bits));
  }
}

// The check. `copy_to_host(void* dst, const void* src, size_t bytes)` copies from the system's memory;
// `scratch` is system memory for `scratch_len` (>= 2) int64 values.
template <typename Policy, typename CopyToHost>
OutsideDiff scan_outside(const Policy& policy, CopyToHost copy_to_host, const unsigned char* cache, const CacheFill& fill,
                         const ElemRange* windows, int64_t num_windows, const std::vector<ElemRange>& ranges, int64_t* scratch,
                         int64_t scratch_len) {
  namespace thrust = THRUST_NS_QUALIFIER;
  using Count = thrust::counting_iterator<int64_t>;
  const Differs differs{cache, fill, windows, num_windows};
  // At most ceil(chunk / 2) runs start (or end) in a chunk: they fit the scratch buffer.
  const int64_t chunk = 2 * (scratch_len - 1);
  OutsideDiff out;
  out.checked = true;
  std::vector<int64_t> starts, ends;  // of the first kMaxOutsideRuns runs, in order
  for (const ElemRange& r : ranges) {
    if (r.end <= r.begin) continue;
    const int64_t n = thrust::count_if(policy, Count(r.begin), Count(r.end), differs);
    if (n == 0) continue;
    out.differing_elems += n;
    out.runs_total += thrust::count_if(policy, Count(r.begin), Count(r.end), RunEdge{differs, r.begin, r.end, true});
    for (int64_t a = r.begin; a < r.end && static_cast<int64_t>(ends.size()) < kMaxOutsideRuns; a += chunk) {
      const int64_t b = std::min(r.end, a + chunk);
      for (const bool first : {true, false}) {
        std::vector<int64_t>& edges = first ? starts : ends;
        int64_t* last = thrust::copy_if(policy, Count(a), Count(b), scratch, RunEdge{differs, r.begin, r.end, first});
        const int64_t k = std::min<int64_t>(last - scratch, kMaxOutsideRuns - static_cast<int64_t>(edges.size()));
        if (k <= 0) continue;
        const size_t at = edges.size();
        edges.resize(at + static_cast<size_t>(k));
        copy_to_host(edges.data() + at, scratch, static_cast<size_t>(k) * sizeof(int64_t));
      }
    }
  }
  // Runs and the bytes of the first of them.
  int64_t budget = kMaxOutsideBytes;
  const size_t runs = std::min(starts.size(), ends.size());
  for (size_t i = 0; i < runs; ++i) {
    OutsideDiff::Run run;
    run.begin = starts[i];
    run.end = ends[i] + 1;
    const int64_t bytes = std::min((run.end - run.begin) * fill.elem_size, budget / fill.elem_size * fill.elem_size);
    if (bytes > 0) {
      run.bytes.resize(static_cast<size_t>(bytes));
      copy_to_host(run.bytes.data(), cache + run.begin * fill.elem_size, static_cast<size_t>(bytes));
      budget -= bytes;
    }
    out.runs.push_back(std::move(run));
  }
  return out;
}

}  // namespace outside_scan
}  // namespace kvf
