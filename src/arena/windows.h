// windows.h — large caches: the host holds windows of the cache; the target checks the rest.
//
// A case whose cache section exceeds a threshold (IsolationOptions::windowed_above_bytes, 256 MiB by
// default, `--windowed-above-mib`) is checked in *windowed* mode, so that a multi-GiB cache is never
// copied, filled or compared on the host. Its arenas are windowed (arena.h): same layout, same
// addresses, but the host materialises only
//   * every byte outside the cache section: guard bands, input buffer, slot_mapping, static scales,
//     scale cache, counter (all of them, as in a dense arena);
//   * windows of the cache: every block a request owns (K and V, the whole span of the block), the
//     block every slot_mapping entry s points at when s, s narrowed to int32 or s narrowed to uint32
//     is a valid slot, the first and the last block, up to kSampledFreeBlocks free blocks sampled
//     from the payload seed, and the stride-gap elements before, between and after the K and V
//     tensors (at most kMaxGapWindowElems each);
// each rounded out to whole 4 KiB pages of the image (kWindowPage). Every materialised byte holds
// exactly what it holds in the dense arena (make_initial_arena). Every cache element outside these
// ranges is a free-block cell or a stride gap, and holds before the run the fill (CacheFill,
// cache_fill.cuh): the free-block canary of the cache dtype, on cells (as in a dense arena) and on
// the gaps among them (which a dense arena gives the stride-gap canary; both are patterns no input
// converts to, and the checks treat them alike).
//
// A target runs a windowed case with Target::run_windowed() (target.h): it builds the whole image
// where the kernel runs (device memory for `cuda`; host memory that is filled page by page as the
// kernel touches it for `cuda-emu`), fills the cache with the fill, copies the materialised ranges
// in, launches, copies the materialised ranges back, and checks every other cache element against
// the fill, returning only what differs (OutsideDiff).
//
// What is checked, exactly:
//   * materialised bytes: bit for bit against the golden expectation, classified like any arena
//     (diff.h) — every new-token cell, every context and tail cell of every request, the sampled
//     and first/last blocks, the gaps around the tensors, every guard band and every input;
//   * every other cache element, all of them: bit for bit against the fill, by the target. Those
//     that differ come back as runs of element indices (the first kMaxOutsideRuns runs, with the
//     bits of their first kMaxOutsideBytes bytes in all) and the exact count of differing elements;
//     the host classifies every returned element like a difference inside a window (a free-block
//     cell or a gap: stray_write, or padding_leak / oob_read_suspected by value) and reports the
//     elements whose bits were not returned as one stray_write group "values not fetched".
// What is not: nothing in the image goes unchecked; the differences beyond the caps are counted but
// not classified one by one, and the HTML report's cell map (report/cell_map.h) draws only the
// materialised bytes (the verdict includes the rest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arena.h"
#include "cache_fill.cuh"
#include "outside_diff.h"

namespace kvf {

constexpr int64_t kWindowPage = 4096;              // materialised ranges are whole pages of the image
constexpr int64_t kSampledFreeBlocks = 8;          // free blocks sampled into the windows
constexpr int64_t kMaxGapWindowElems = 1 << 20;    // per stride-gap region around the tensors

// What the host materialises of a large case's image, and the pattern of everything else.
struct WindowPlan {
  std::vector<ByteRange> ranges;  // image byte ranges: page-aligned, sorted, disjoint, covering every
                                  // byte outside the cache section
  CacheFill fill;                 // pre-run bits of every cache element outside `ranges`
  int64_t materialized_bytes() const;
};

// The fill of case c's KV cache outside the windows: the free-block canary of its dtype.
CacheFill make_cache_fill(const Case& c);

// The windows of a (valid) case laid out as `layout` (plan_arena(c)). Deterministic: the worker
// process recomputes it from the case.
WindowPlan plan_windows(const Case& c, const ArenaLayout& layout);

// The cache elements `plan.ranges` covers, as sorted disjoint element ranges of the cache buffer.
std::vector<ElemRange> cache_windows(const WindowPlan& plan, const ArenaLayout& layout);

// The cache elements `plan.ranges` does not cover: what the target checks against the fill.
std::vector<ElemRange> cache_outside(const WindowPlan& plan, const ArenaLayout& layout);

}  // namespace kvf
