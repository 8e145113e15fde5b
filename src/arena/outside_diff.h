// outside_diff.h — what a target found outside the host's windows of a large cache (windows.h).
//
// Kept free of the case model (plain C++17) so that nvcc-compiled code (outside_scan.cuh) can use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvf {

constexpr int64_t kMaxOutsideRuns = 256;                // differing runs a target returns at most
constexpr int64_t kMaxOutsideBytes = int64_t{1} << 20;  // bytes of their contents, in all

// A range [begin, end) of cache buffer elements.
struct ElemRange {
  int64_t begin = 0, end = 0;
  bool operator==(const ElemRange& o) const { return begin == o.begin && end == o.end; }
};

// What a target found outside the windows of a windowed run.
struct OutsideDiff {
  struct Run {
    int64_t begin = 0, end = 0;        // cache elements [begin, end), every one differing from the fill
    std::vector<unsigned char> bytes;  // the bits of its first bytes.size() / elem_size elements
  };
  int64_t differing_elems = 0;  // elements outside the windows whose bits differ from the fill, all of them
  int64_t runs_total = 0;       // maximal runs of such elements, all of them
  std::vector<Run> runs;        // the first min(runs_total, kMaxOutsideRuns) runs, in element order
  bool checked = false;         // the target checked the rest of the cache (false: it did not finish)

  bool clean() const { return differing_elems == 0; }
  bool operator==(const OutsideDiff& o) const;
};

// Wire form for the worker protocol (campaign/isolation.cpp); decode throws std::runtime_error on
// malformed input.
std::string encode(const OutsideDiff& d);
OutsideDiff decode_outside_diff(const std::string& bytes);

}  // namespace kvf
