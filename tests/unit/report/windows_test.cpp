// windows_test.cpp — large caches in windowed mode (src/arena/windows.h, cache_fill.cuh, outside_scan.cuh):
// the fill function, the windows, the windowed initial arena against the dense one, the CPU build of
// the Thrust check, and the classification of what a target reports outside the windows.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='Window*:CacheShape*:OutsideScan*'
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <random>

#include "report/verdict.h"
#include "arena/outside_scan_cpu.h"
#include "arena/windows.h"
#include "gen/materialize.h"
#include "base/rng.h"
#include "golden/golden.h"
#include "values/payload.h"
#include "../arena/test_cases.h"

namespace kvf {
namespace {

using golden::Canary;

// A generated case with `spare` extra free blocks: a cache far larger than its windows.
Case big_case(uint64_t seed, Layout layout, DType cache_dtype, bool irregular, int32_t spare) {
  Genotype g;
  g.layout = layout;
  g.block_size = 5;
  g.num_heads = 3;
  g.head_dim = 13;
  g.input_dtype = DType::f16;
  g.cache_dtype = cache_dtype;
  if (is_quantized(cache_dtype)) g.scale_kind = ScaleKind::per_block;
  g.requests = {{7, 3}, {0, 4}, {12, 1}};
  g.tail_padding = 1;
  g.interleaved_padding = 1;
  g.invalid_slots = 2;
  g.spare_blocks = spare;
  g.irregular = g.gapped_strides = g.misaligned_bases = irregular;
  g.layout_seed = seed;
  return materialize(g);
}

std::vector<Case> some_cases() {
  std::vector<Case> cases = {test::paged_nhd_case(), test::paged_hnd_case(), test::packed_gapped_case(),
                             test::quant_per_token_case(), test::quant_per_block_case()};
  uint64_t seed = 1;
  for (Layout l : {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::packed_kv_nhd})
    for (DType d : {DType::f16, DType::f32, DType::fp8_e4m3})
      for (bool irregular : {false, true}) cases.push_back(big_case(seed++, l, d, irregular, 3000));
  return cases;
}

TEST(CacheShape, locatesEveryElementAsTheAddressingFormulaPlacesIt) {
  for (const Case& c : some_cases()) {
    // element -> (tensor, block, pos, head, dim) of the cell there; tensor -1: a gap
    std::vector<std::array<int64_t, 5>> cells(static_cast<size_t>(c.cache_buffer_elems), {-1, -1, -1, -1, -1});
    for (int t = 0; t < 2; ++t)
      for (int64_t b = 0; b < c.cache.num_blocks; ++b)
        for (int64_t p = 0; p < c.cache.block_size; ++p)
          for (int64_t h = 0; h < c.num_heads; ++h)
            for (int64_t d = 0; d < c.head_dim; ++d)
              cells[static_cast<size_t>((t ? c.cache_v_offset : c.cache_k_offset) + cache_elem_offset(c.cache, b, p, h, d))] = {t, b, p, h, d};
    const CacheShape shape(c.cache, c.cache_k_offset, c.cache_v_offset, c.num_heads, c.head_dim);
    int64_t wrong = 0, first_wrong = -1;
    for (int64_t e = 0; e < c.cache_buffer_elems; ++e) {
      const CellIndex i = shape.locate(e);
      const std::array<int64_t, 5> got =
          i.is_cell ? std::array<int64_t, 5>{i.is_value ? 1 : 0, i.block, i.pos, i.head, i.dim} : std::array<int64_t, 5>{-1, -1, -1, -1, -1};
      if (got != cells[static_cast<size_t>(e)] && wrong++ == 0) first_wrong = e;
    }
    EXPECT_EQ(wrong, 0) << "first at element " << first_wrong << " of a " << to_string(c.layout) << " cache";
  }
}

// Every materialised byte of the windowed initial arena is the dense arena's byte, and every cache
// element outside the windows is a free-block cell, holding the fill (the free-block canary) in the
// dense arena too, or a stride gap (the dense arena's stride-gap canary; the fill stands for it).
TEST(WindowedArena, holdsTheDenseArenasBytesAndTheFillElsewhere) {
  for (const Case& c : some_cases()) {
    const Arena dense = make_initial_arena(c);
    const ArenaLayout& l = dense.layout();
    const WindowPlan plan = plan_windows(c, l);
    const Arena windowed = make_initial_arena(c, plan);
    ASSERT_TRUE(windowed.windowed());
    for (const ByteRange& r : plan.ranges)
      ASSERT_EQ(std::memcmp(dense.data() + r.begin, windowed.data() + r.begin, static_cast<size_t>(r.size())), 0) << r.begin;
    const int size = plan.fill.elem_size;
    int64_t outside = 0;
    const CacheLocator loc(c);
    const uint32_t gap = golden::canary_bits(c.cache_dtype, Canary::cache_gap);
    int64_t wrong = 0;
    for (const ElemRange& o : cache_outside(plan, l)) {
      for (int64_t e = o.begin; e < o.end; ++e, ++outside) {
        const CacheCell cell = loc.locate(e);
        const uint64_t dense_bits = load_elem(dense.cache(), e, size);
        wrong += cell.role == CacheCell::Role::gap ? dense_bits != gap : cell.role != CacheCell::Role::free_block || dense_bits != plan.fill.bits;
      }
    }
    EXPECT_EQ(wrong, 0) << "cache elements outside the windows that are neither free-block cells holding the fill nor gaps";
    EXPECT_EQ(plan.fill.bits, golden::canary_bits(c.cache_dtype, Canary::free_block));
    if (c.cache.num_blocks > 1000) {
      EXPECT_GT(outside, c.cache_buffer_elems / 2) << "the windows should be a small part of a big cache";
    }
  }
}

TEST(WindowPlan, coversEveryOwnedBlockTheSlotTargetsAndEverythingButTheCache) {
  for (const Case& c : some_cases()) {
    const ArenaLayout l = plan_arena(c);
    const WindowPlan plan = plan_windows(c, l);
    for (size_t i = 0; i < plan.ranges.size(); ++i) {
      const ByteRange& r = plan.ranges[i];
      EXPECT_TRUE(r.begin % kWindowPage == 0 || r.begin == 0);
      EXPECT_TRUE(r.end % kWindowPage == 0 || r.end == l.total_bytes);
      EXPECT_LT(r.begin, r.end);
      if (i > 0) {
        EXPECT_LT(plan.ranges[i - 1].end, r.begin);
      }
    }
    auto covered = [&](int64_t byte) {
      return std::any_of(plan.ranges.begin(), plan.ranges.end(), [&](const ByteRange& r) { return byte >= r.begin && byte < r.end; });
    };
    for (int64_t b = 0; b < l.cache_begin; b += 97) ASSERT_TRUE(covered(b));
    for (int64_t b = l.cache_begin + l.cache_bytes; b < l.total_bytes; b += 97) ASSERT_TRUE(covered(b));
    const int64_t size = dtype_size(c.cache_dtype);
    auto cell_covered = [&](int64_t b, int64_t p, int64_t h, int64_t d) {
      for (int64_t base : {c.cache_k_offset, c.cache_v_offset})
        if (!covered(l.cache_begin + (base + cache_elem_offset(c.cache, b, p, h, d)) * size)) return false;
      return true;
    };
    auto block_covered = [&](int64_t b) {
      return cell_covered(b, 0, 0, 0) && cell_covered(b, c.cache.block_size - 1, c.num_heads - 1, c.head_dim - 1);
    };
    for (const Request& r : c.requests) {
      for (int64_t b : r.blocks) EXPECT_TRUE(block_covered(b)) << "owned block " << b;
    }
    for (int64_t s : c.slot_mapping) {
      if (s >= 0 && s < c.capacity()) {
        EXPECT_TRUE(block_covered(s / c.cache.block_size));
      }
    }
    EXPECT_TRUE(block_covered(0));
    EXPECT_TRUE(block_covered(c.cache.num_blocks - 1));
  }
}

// The CPU build of the Thrust check against a plain loop: planted differences inside and outside
// the windows, runs across the scan's chunk boundaries, more runs than are returned.
TEST(OutsideScan, findsExactlyTheDifferencesOutsideTheWindows) {
  const Case c = big_case(5, Layout::paged_nhd, DType::f16, true, 30000);
  const ArenaLayout l = plan_arena(c);
  const WindowPlan plan = plan_windows(c, l);
  const int64_t elems = l.cache_bytes / 2;
  ASSERT_GT(elems, 600000) << "the scan's chunks hold 131070 elements; the cache must span several";
  std::vector<unsigned char> cache(static_cast<size_t>(l.cache_bytes));
  fill_cache_host(cache.data(), plan.fill, 0, elems);
  for (int64_t e = 0; e < elems; e += 9973) {
    ASSERT_EQ(load_cache_bits(cache.data(), e, 2), plan.fill.bits);
  }
  const std::vector<ElemRange> windows = cache_windows(plan, l);

  OutsideDiff clean = scan_outside_host(cache.data(), plan.fill, windows, {{0, elems}});
  EXPECT_TRUE(clean.checked);
  EXPECT_TRUE(clean.clean());

  // Plant: a run across the chunk boundary at 131070, single elements, one run inside a window
  // (ignored), and 300 isolated elements near the end (more runs than are returned).
  std::vector<bool> planted(static_cast<size_t>(elems));
  auto in_window = [&](int64_t e) {
    return std::any_of(windows.begin(), windows.end(), [&](const ElemRange& w) { return e >= w.begin && e < w.end; });
  };
  auto plant = [&](int64_t e) {
    store_cache_bits(cache.data(), e, 2, 0x1234);
    planted[static_cast<size_t>(e)] = !in_window(e);
  };
  for (int64_t e = 131060; e < 131090; ++e) plant(e);
  plant(200001);
  plant(200003);
  plant(windows.back().begin);
  for (int64_t i = 0; i < 300; ++i) plant(elems - 1 - 2 * i);

  // The plain loop.
  int64_t want = 0, want_runs = 0;
  std::vector<ElemRange> runs;
  for (int64_t e = 0; e < elems; ++e) {
    if (!planted[static_cast<size_t>(e)]) continue;
    ++want;
    if (e == 0 || !planted[static_cast<size_t>(e - 1)]) {
      ++want_runs;
      runs.push_back({e, e + 1});
    } else {
      runs.back().end = e + 1;
    }
  }
  const OutsideDiff got = scan_outside_host(cache.data(), plan.fill, windows, {{0, elems}});
  EXPECT_EQ(got.differing_elems, want);
  EXPECT_EQ(got.runs_total, want_runs);
  ASSERT_EQ(static_cast<int64_t>(got.runs.size()), std::min<int64_t>(want_runs, kMaxOutsideRuns));
  for (size_t i = 0; i < got.runs.size(); ++i) {
    EXPECT_EQ(got.runs[i].begin, runs[i].begin);
    EXPECT_EQ(got.runs[i].end, runs[i].end);
    ASSERT_EQ(got.runs[i].bytes.size(), static_cast<size_t>(2 * (runs[i].end - runs[i].begin)));
    EXPECT_EQ(load_cache_bits(got.runs[i].bytes.data(), 0, 2), 0x1234u);
  }
  // The wire form round-trips, and a truncated one is refused.
  EXPECT_TRUE(decode_outside_diff(encode(got)) == got);
  const std::string wire = encode(got);
  EXPECT_THROW(decode_outside_diff(wire.substr(0, wire.size() - 1)), std::runtime_error);
}

// compare_arenas() on windowed arenas: what the target reports outside the windows becomes
// findings, classified by location and value like any cache cell.
struct WindowedRun {
  Case c;
  WindowPlan plan;
  Arena initial, expected, actual;
  explicit WindowedRun(Case cc)
      : c(std::move(cc)), plan(plan_windows(c, plan_arena(c))), initial(make_initial_arena(c, plan)), expected(initial), actual(initial) {
    golden::golden_append(c, expected);
    actual = expected;
  }
  // A free-block cell outside every window.
  int64_t outside_cell() const {
    const CacheLocator loc(c);
    for (const ElemRange& o : cache_outside(plan, initial.layout()))
      for (int64_t e = o.begin; e < o.end; ++e)
        if (loc.locate(e).role == CacheCell::Role::free_block) return e;
    return -1;
  }
};

OutsideDiff one_run(int64_t e, int64_t n, uint32_t bits, int size, int64_t fetched) {
  OutsideDiff d;
  d.checked = true;
  d.differing_elems = n;
  d.runs_total = 1;
  OutsideDiff::Run run{e, e + n, {}};
  run.bytes.resize(static_cast<size_t>(fetched * size));
  for (int64_t i = 0; i < fetched; ++i) store_cache_bits(run.bytes.data(), i, size, bits);
  d.runs.push_back(run);
  return d;
}

TEST(WindowedCompare, passesACleanRunAndNeedsTheTargetsReport) {
  WindowedRun r(big_case(9, Layout::paged_hnd, DType::bf16, false, 3000));
  OutsideDiff clean;
  clean.checked = true;
  EXPECT_TRUE(compare_arenas(r.c, r.initial, r.expected, r.actual, {}, &clean).pass());
  EXPECT_THROW(compare_arenas(r.c, r.initial, r.expected, r.actual), std::invalid_argument);
  OutsideDiff unchecked;
  EXPECT_THROW(compare_arenas(r.c, r.initial, r.expected, r.actual, {}, &unchecked), std::invalid_argument);
}

TEST(WindowedCompare, classifiesAWriteOutsideTheWindowsByItsValue) {
  WindowedRun r(big_case(9, Layout::paged_nhd, DType::f16, false, 3000));
  const int64_t e = r.outside_cell();
  ASSERT_GE(e, 0);
  // Request 0's first new K value (row of its first new token), as a kernel writing to the wrong block would.
  int64_t row = -1;
  for (size_t i = 0; i < r.c.slot_mapping.size() && row < 0; ++i)
    if (r.c.slot_mapping[i] >= 0 && r.c.slot_mapping[i] < r.c.capacity()) row = static_cast<int64_t>(i);
  const uint32_t value = golden::input_bits(r.c, golden::Tensor::key, row, 0, 0);
  const OutsideDiff stray = one_run(e, 1, value, 2, 1);
  const Verdict v = compare_arenas(r.c, r.initial, r.expected, r.actual, {}, &stray);
  ASSERT_FALSE(v.pass());
  EXPECT_EQ(v.findings.front().kind, FindingKind::stray_write) << v.findings.front().sentence;
  EXPECT_NE(v.findings.front().sentence.find("free block"), std::string::npos) << v.findings.front().sentence;
  EXPECT_EQ(v.differing_cells, 1);

  // A padding row's canary there is a padding leak.
  const OutsideDiff leak = one_run(e, 2, golden::canary_bits(DType::f16, Canary::padding_row), 2, 2);
  const Verdict v2 = compare_arenas(r.c, r.initial, r.expected, r.actual, {}, &leak);
  ASSERT_FALSE(v2.pass());
  EXPECT_EQ(v2.findings.front().kind, FindingKind::padding_leak) << v2.findings.front().sentence;
}

TEST(WindowedCompare, countsDifferencesWhoseBitsWereNotReturned) {
  WindowedRun r(big_case(9, Layout::paged_nhd, DType::f16, false, 3000));
  const int64_t e = r.outside_cell();
  OutsideDiff d = one_run(e, 10, 0x1234, 2, 4);  // 10 differing, bits of 4 returned
  d.differing_elems = 1010;                       // and 1000 more in runs not listed
  d.runs_total = 7;
  const Verdict v = compare_arenas(r.c, r.initial, r.expected, r.actual, {}, &d);
  ASSERT_FALSE(v.pass());
  EXPECT_EQ(v.differing_cells, 1010);
  int64_t cells = 0;
  bool unfetched = false;
  for (const Finding& f : v.findings) {
    cells += f.cells;
    unfetched |= f.example.find("did not return") != std::string::npos && f.cells == 1006;
  }
  EXPECT_EQ(cells, 1010);
  EXPECT_TRUE(unfetched);
}

// A difference inside a window is found by the host's own comparison.
TEST(WindowedCompare, seesAWrongValueInsideAWindow) {
  WindowedRun r(big_case(9, Layout::paged_nhd, DType::f32, false, 3000));
  int64_t row = -1;
  for (size_t i = 0; i < r.c.slot_mapping.size() && row < 0; ++i)
    if (r.c.slot_mapping[i] >= 0 && r.c.slot_mapping[i] < r.c.capacity()) row = static_cast<int64_t>(i);
  const int64_t slot = r.c.slot_mapping[static_cast<size_t>(row)];
  const int64_t e = r.c.cache_k_offset + cache_elem_offset(r.c.cache, slot / r.c.cache.block_size, slot % r.c.cache.block_size, 0, 0);
  store_elem(r.actual.cache(), e, 4, 0x3f800000);
  OutsideDiff clean;
  clean.checked = true;
  const Verdict v = compare_arenas(r.c, r.initial, r.expected, r.actual, {}, &clean);
  ASSERT_FALSE(v.pass());
  EXPECT_EQ(v.findings.front().kind, FindingKind::wrong_value);
}

}  // namespace
}  // namespace kvf
