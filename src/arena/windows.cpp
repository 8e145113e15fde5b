// windows.cpp — the windows of a large case and the wire form of what a target found outside them.
#include "windows.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "base/rng.h"
#include "values/payload.h"

namespace kvf {

namespace {

int64_t page_down(int64_t x) { return x / kWindowPage * kWindowPage; }
int64_t page_up(int64_t x) { return (x + kWindowPage - 1) / kWindowPage * kWindowPage; }

// Sorts and merges ranges (touching ones too).
template <typename Range>
std::vector<Range> merged(std::vector<Range> v) {
  std::sort(v.begin(), v.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> out;
  for (const Range& r : v) {
    if (r.end <= r.begin) continue;
    if (!out.empty() && r.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

int64_t WindowPlan::materialized_bytes() const {
  int64_t n = 0;
  for (const ByteRange& r : ranges) n += r.size();
  return n;
}

CacheFill make_cache_fill(const Case& c) {
  return CacheFill{dtype_size(c.cache_dtype), golden::canary_bits(c.cache_dtype, golden::Canary::free_block)};
}

WindowPlan plan_windows(const Case& c, const ArenaLayout& l) {
  WindowPlan plan;
  plan.fill = make_cache_fill(c);
  const CacheGeometry& g = c.cache;
  const int64_t size = dtype_size(c.cache_dtype);
  const int64_t nb = g.num_blocks, capacity = c.capacity();

  // Element windows of the cache buffer.
  std::vector<ElemRange> elems;
  // Span of one block's cells from its first element (all strides are >= 0 in a valid case).
  const int64_t block_span = (g.block_size - 1) * g.stride_pos + (c.num_heads - 1) * g.stride_head + c.head_dim;
  auto add_block = [&](int64_t b) {
    if (b < 0 || b >= nb) return;
    for (const int64_t base : {c.cache_k_offset, c.cache_v_offset})
      elems.push_back({base + b * g.stride_block, base + b * g.stride_block + block_span});
  };
  for (const Request& r : c.requests)
    for (const int64_t b : r.blocks) add_block(b);
  for (const int64_t s : c.slot_mapping) {
    for (const int64_t slot : {s, int64_t{static_cast<int32_t>(s)}, int64_t{static_cast<uint32_t>(s)}})
      if (slot >= 0 && slot < capacity) add_block(slot / g.block_size);
  }
  add_block(0);
  add_block(nb - 1);
  for (int64_t i = 0; i < kSampledFreeBlocks && nb > 0; ++i)
    add_block(static_cast<int64_t>(mix64(c.payload_seed ^ mix64(static_cast<uint64_t>(i) + 0x77696e646f77ull)) % static_cast<uint64_t>(nb)));
  // Stride gaps around the tensors: before the first, between them (separate K and V), after the last.
  const int64_t first = std::min(c.cache_k_offset, c.cache_v_offset);
  const int64_t tensor_end = nb > 0 ? (nb - 1) * g.stride_block + block_span : 0;
  const int64_t k_end = c.cache_k_offset + tensor_end, v_end = c.cache_v_offset + tensor_end;
  const int64_t last = std::max(k_end, v_end);
  elems.push_back({0, std::min(first, kMaxGapWindowElems)});
  if (k_end < c.cache_v_offset) elems.push_back({k_end, std::min(c.cache_v_offset, k_end + kMaxGapWindowElems)});
  elems.push_back({std::max(last, c.cache_buffer_elems - kMaxGapWindowElems), c.cache_buffer_elems});

  // Image byte ranges: everything outside the cache section, and the cache windows, in whole pages.
  std::vector<ByteRange> bytes;
  const int64_t cache_end = l.cache_begin + l.cache_bytes;
  bytes.push_back({0, page_up(l.cache_begin)});
  bytes.push_back({page_down(cache_end), l.total_bytes});
  for (ElemRange e : elems) {
    e.begin = std::clamp<int64_t>(e.begin, 0, c.cache_buffer_elems);
    e.end = std::clamp<int64_t>(e.end, 0, c.cache_buffer_elems);
    if (e.end <= e.begin) continue;
    bytes.push_back({page_down(l.cache_begin + e.begin * size), page_up(l.cache_begin + e.end * size)});
  }
  for (ByteRange& r : bytes) {
    r.begin = std::clamp<int64_t>(r.begin, 0, l.total_bytes);
    r.end = std::clamp<int64_t>(r.end, 0, l.total_bytes);
  }
  plan.ranges = merged(std::move(bytes));
  return plan;
}

std::vector<ElemRange> cache_windows(const WindowPlan& plan, const ArenaLayout& l) {
  const int64_t size = plan.fill.elem_size;
  const int64_t cache_end = l.cache_begin + l.cache_bytes;
  std::vector<ElemRange> out;
  for (const ByteRange& r : plan.ranges) {
    const int64_t b = std::max(r.begin, l.cache_begin), e = std::min(r.end, cache_end);
    if (e <= b) continue;
    // Page boundaries are 256-byte aligned like the cache section, so they fall between elements.
    out.push_back({(b - l.cache_begin) / size, (e - l.cache_begin) / size});
  }
  return out;
}

std::vector<ElemRange> cache_outside(const WindowPlan& plan, const ArenaLayout& l) {
  const int64_t elems = l.cache_bytes / plan.fill.elem_size;
  std::vector<ElemRange> out;
  int64_t at = 0;
  for (const ElemRange& w : cache_windows(plan, l)) {
    if (w.begin > at) out.push_back({at, w.begin});
    at = std::max(at, w.end);
  }
  if (at < elems) out.push_back({at, elems});
  return out;
}

bool OutsideDiff::operator==(const OutsideDiff& o) const {
  if (differing_elems != o.differing_elems || runs_total != o.runs_total || checked != o.checked) return false;
  if (runs.size() != o.runs.size()) return false;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].begin != o.runs[i].begin || runs[i].end != o.runs[i].end || runs[i].bytes != o.runs[i].bytes) return false;
  return true;
}

// Wire form: u8 checked, i64 differing_elems, i64 runs_total, u64 run count, then per run i64 begin,
// i64 end, u64 byte count and the bytes. Native byte order (both ends are one binary).
std::string encode(const OutsideDiff& d) {
  std::string out;
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const uint8_t checked = d.checked ? 1 : 0;
  const uint64_t n = d.runs.size();
  put(&checked, 1);
  put(&d.differing_elems, 8);
  put(&d.runs_total, 8);
  put(&n, 8);
  for (const OutsideDiff::Run& r : d.runs) {
    const uint64_t bytes = r.bytes.size();
    put(&r.begin, 8);
    put(&r.end, 8);
    put(&bytes, 8);
    put(r.bytes.data(), r.bytes.size());
  }
  return out;
}

OutsideDiff decode_outside_diff(const std::string& s) {
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (s.size() - at < n) throw std::runtime_error("truncated outside-diff message from the worker");
    std::memcpy(p, s.data() + at, n);
    at += n;
  };
  OutsideDiff d;
  uint8_t checked = 0;
  uint64_t n = 0;
  get(&checked, 1);
  get(&d.differing_elems, 8);
  get(&d.runs_total, 8);
  get(&n, 8);
  if (n > static_cast<uint64_t>(kMaxOutsideRuns)) throw std::runtime_error("too many runs in an outside-diff message");
  d.checked = checked != 0;
  for (uint64_t i = 0; i < n; ++i) {
    OutsideDiff::Run r;
    uint64_t bytes = 0;
    get(&r.begin, 8);
    get(&r.end, 8);
    get(&bytes, 8);
    if (bytes > static_cast<uint64_t>(kMaxOutsideBytes)) throw std::runtime_error("oversized run in an outside-diff message");
    r.bytes.resize(bytes);
    get(r.bytes.data(), bytes);
    d.runs.push_back(std::move(r));
  }
  return d;
}

}  // namespace kvf
