// arena_test.cpp — layout, initial fill and cell location of the guarded arena (src/arena/arena.h).
//
//   cmake --build build --target kvfuzz_verify_tests && build/tests/kvfuzz_verify_tests --gtest_filter='Plan*:Make*:Locate*:Arena*'
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "arena/arena.h"
#include "arena/finding.h"
#include "case/placement.h"
#include "case/validate.h"
#include "gen/materialize.h"
#include "values/payload.h"
#include "test_cases.h"

namespace kvf {
namespace {

using golden::Canary;
using golden::Tensor;

std::vector<Case> hand_cases() {
  return {test::paged_nhd_case(), test::paged_hnd_case(), test::packed_gapped_case(), test::quant_per_token_case(),
          test::quant_per_block_case()};
}

// Materialised cases over every layout, regular and irregular.
std::vector<Case> generated_cases() {
  std::vector<Case> out;
  const Layout layouts[] = {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                            Layout::packed_kv_nhd};
  uint64_t seed = 1;
  for (const Layout l : layouts) {
    for (const bool irregular : {false, true}) {
      Genotype g;
      g.layout = l;
      g.block_size = 5;
      g.num_heads = 3;
      g.head_dim = 12;
      g.fused_qkv = irregular;
      g.gqa_ratio = 2;
      g.requests = {{4, 3}, {0, 6}, {9, 1}};
      g.tail_padding = 2;
      g.interleaved_padding = 1;
      g.invalid_slots = 1;
      g.extra_input_rows = 2;
      g.spare_blocks = 3;
      g.irregular = g.gapped_strides = g.misaligned_bases = irregular;
      g.kv_views = irregular ? KvViews::value_rows : KvViews::alike;
      g.input_dtype = irregular ? DType::f32 : DType::bf16;
      g.cache_dtype = irregular ? DType::f16 : DType::bf16;
      g.slot_dtype = irregular ? IndexType::i32 : IndexType::i64;
      g.layout_seed = seed++;
      out.push_back(materialize(g));
    }
  }
  return out;
}

std::vector<Case> all_cases() {
  std::vector<Case> out = hand_cases();
  for (Case& c : generated_cases()) out.push_back(std::move(c));
  return out;
}

TEST(TestCases, areValid) {
  for (const Case& c : all_cases()) {
    const auto problems = validate(c);
    for (const auto& p : problems) ADD_FAILURE() << to_string(c.layout) << ": " << p.json_path << ": " << p.message;
  }
}

// ---------------------------------------------------------------------------------------------

TEST(PlanArena, alignsSectionsAndSurroundsEachWithGuardBands) {
  for (const Case& c : all_cases()) {
    const ArenaLayout l = plan_arena(c);
    SCOPED_TRACE(to_string(c.layout));
    EXPECT_EQ(l.guard_bytes % 256, 0);
    EXPECT_GE(l.guard_bytes, 4096);
    EXPECT_LE(l.guard_bytes, (1 << 20) + 256);
    EXPECT_GE(l.guard_bytes, std::min<int64_t>(c.cache.stride_block * dtype_size(c.cache_dtype), 1 << 20));
    for (const int64_t begin :
         {l.input_begin, l.slots_begin, l.scales_begin, l.cache_begin, l.scale_cache_begin, l.counter_begin, l.total_bytes}) {
      EXPECT_EQ(begin % 256, 0);
    }
    EXPECT_EQ(l.scales_bytes, 2 * 4 * static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks));
    EXPECT_EQ(l.scale_cache_bytes, 4 * c.scale_cache_elems);
    EXPECT_EQ(l.input_bytes, c.input_buffer_elems * dtype_size(c.input_dtype));
    EXPECT_EQ(l.slots_bytes, c.num_slots() * index_type_size(c.slot_dtype));
    EXPECT_EQ(l.cache_bytes, c.cache_buffer_elems * dtype_size(c.cache_dtype));
    EXPECT_GE(l.input_begin, l.guard_bytes);
    EXPECT_GE(l.slots_begin, l.input_begin + l.input_bytes + l.guard_bytes);
    EXPECT_GE(l.scales_begin, l.slots_begin + l.slots_bytes + l.guard_bytes);
    EXPECT_GE(l.cache_begin, l.scales_begin + l.scales_bytes + l.guard_bytes);
    EXPECT_GE(l.scale_cache_begin, l.cache_begin + l.cache_bytes + l.guard_bytes);
    EXPECT_GE(l.counter_begin, l.scale_cache_begin + l.scale_cache_bytes + l.guard_bytes);
    EXPECT_GE(l.total_bytes, l.counter_begin + 8 + l.guard_bytes);
  }
}

// Float caches have empty scale sections: no bytes, but each keeps its place between guard bands.
// Quantised ones size them by kind: per_block 2 * nb * H scales, per_token_head the scale cache.
TEST(PlanArena, sizesTheScaleSectionsByScaleKind) {
  const ArenaLayout f = plan_arena(test::paged_nhd_case());
  EXPECT_EQ(f.scales_bytes, 0);
  EXPECT_EQ(f.scale_cache_bytes, 0);
  EXPECT_EQ(f.cache_begin - f.scales_begin, f.guard_bytes);
  EXPECT_EQ(f.counter_begin - (f.scale_cache_begin + 0), f.guard_bytes);

  const ArenaLayout b = plan_arena(test::quant_per_block_case());
  EXPECT_EQ(b.scales_bytes, 2 * 8 * 2 * 4);  // K and V, 8 blocks x 2 heads, fp32
  EXPECT_EQ(b.scale_cache_bytes, 0);
  EXPECT_EQ(b.cache_bytes, 2 * 8 * 2 * 4 * 8);  // int8: one byte per element

  const Case t = test::quant_per_token_case();
  const ArenaLayout p = plan_arena(t);
  EXPECT_EQ(p.scales_bytes, 0);
  EXPECT_EQ(p.scale_cache_bytes, 4 * t.scale_cache_elems);
  EXPECT_EQ(p.scale_cache_begin % 256, 0);
  EXPECT_GE(p.scale_cache_begin, p.cache_begin + p.cache_bytes + p.guard_bytes);

  Case big = test::quant_per_token_case();
  big.scale_cache_elems = INT64_MAX / 2;
  EXPECT_THROW(plan_arena(big), std::length_error);
}

TEST(PlanArena, clampsTheGuardBandToOneMebibyte) {
  Case c = test::paged_nhd_case();
  c.cache.stride_block = int64_t{1} << 22;  // 8 MiB blocks of f16
  EXPECT_EQ(plan_arena(c).guard_bytes, 1 << 20);
  c.cache.stride_block = 2049;  // 4098 bytes -> rounded up to 4352
  EXPECT_EQ(plan_arena(c).guard_bytes, 4352);
}

TEST(PlanArena, rejectsSizesThatOverflow) {
  Case c = test::paged_nhd_case();
  c.cache_buffer_elems = INT64_MAX / 2 + 1;
  EXPECT_THROW(plan_arena(c), std::length_error);
}

// ---------------------------------------------------------------------------------------------

TEST(Arena, copiesAreDeepAndAligned) {
  const Case c = test::paged_nhd_case();
  Arena a = make_initial_arena(c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 256, 0u);
  Arena b = a;
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size())), 0);
  b.cache()[0] = std::byte{0x12};
  EXPECT_NE(a.cache()[0], b.cache()[0]);
  Arena d(plan_arena(test::packed_gapped_case()));
  d = a;  // different size: reallocates
  EXPECT_EQ(d.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), d.data(), static_cast<size_t>(a.size())), 0);
  *b.counter() = 7;
  EXPECT_EQ(b.counter_value(), 7u);
}

TEST(FindingKind, namesMatchTheEnumerators) {
  EXPECT_EQ(to_string(FindingKind::oob_write), "oob_write");
  EXPECT_EQ(to_string(FindingKind::cross_request_write), "cross_request_write");
  EXPECT_EQ(to_string(FindingKind::padding_leak), "padding_leak");
  EXPECT_EQ(to_string(FindingKind::invalid_slot_miscount), "invalid_slot_miscount");
  EXPECT_EQ(to_string(FindingKind::launch_error), "launch_error");
}

// ---------------------------------------------------------------------------------------------

bool in_section(const ArenaLayout& l, int64_t at) {
  return (at >= l.input_begin && at < l.input_begin + l.input_bytes) || (at >= l.slots_begin && at < l.slots_begin + l.slots_bytes) ||
         (at >= l.scales_begin && at < l.scales_begin + l.scales_bytes) || (at >= l.cache_begin && at < l.cache_begin + l.cache_bytes) ||
         (at >= l.scale_cache_begin && at < l.scale_cache_begin + l.scale_cache_bytes) ||
         (at >= l.counter_begin && at < l.counter_begin + 8);
}

// Guard bytes are 0xFF except the first half of the band after slot_mapping, which reads as slot 0.
bool in_zero_slot_guard(const ArenaLayout& l, int64_t at) {
  const int64_t end = l.slots_begin + l.slots_bytes;
  return at >= end && at < end + (l.scales_begin - end) / 2;
}

TEST(MakeInitialArena, fillsEveryGuardByteWithItsPattern) {
  for (const Case& c : all_cases()) {
    const Arena a = make_initial_arena(c);
    const auto* p = reinterpret_cast<const unsigned char*>(a.data());
    int64_t bad = 0;
    for (int64_t i = 0; i < a.size(); ++i) {
      if (in_section(a.layout(), i)) continue;
      bad += p[i] != (in_zero_slot_guard(a.layout(), i) ? 0x00 : 0xFF);
    }
    EXPECT_EQ(bad, 0) << to_string(c.layout);
    EXPECT_EQ(a.counter_value(), 0u);
  }
}

TEST(MakeInitialArena, holdsTheExpectedPatternInEveryRegion) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(to_string(c.layout));
    const Arena a = make_initial_arena(c);
    const int in = dtype_size(c.input_dtype), cs = dtype_size(c.cache_dtype);

    // Inputs: views hold input_bits, everything else the input-gap canary.
    std::vector<bool> in_view(static_cast<size_t>(c.input_buffer_elems));
    for (const Tensor t : {Tensor::key, Tensor::value}) {
      const InputView& v = t == Tensor::key ? c.key : c.value;
      for (int64_t r = 0; r < c.num_input_rows; ++r)
        for (int64_t h = 0; h < c.num_heads; ++h)
          for (int64_t d = 0; d < c.head_dim; ++d) {
            const int64_t e = v.offset + input_elem_offset(v.stride_token, v.stride_head, r, h, d);
            in_view[static_cast<size_t>(e)] = true;
            ASSERT_EQ(load_elem(a.input(), e, in), golden::input_bits(c, t, r, h, d));
          }
    }
    for (int64_t e = 0; e < c.input_buffer_elems; ++e) {
      if (!in_view[static_cast<size_t>(e)]) {
        ASSERT_EQ(load_elem(a.input(), e, in), golden::canary_bits(c.input_dtype, Canary::input_gap));
      }
    }

    // slot_mapping, narrowed.
    for (int64_t i = 0; i < c.num_slots(); ++i) {
      const int64_t s = c.slot_mapping[static_cast<size_t>(i)];
      if (c.slot_dtype == IndexType::i32) {
        EXPECT_EQ(static_cast<int32_t>(load_elem(a.slots(), i, 4)), s);
      } else {
        EXPECT_EQ(static_cast<int64_t>(load_elem(a.slots(), i, 8)), s);
      }
    }

    // Cache: every element by its role.
    const CacheLocator loc(c);
    int64_t free_cells = 0, context_cells = 0;
    for (int64_t e = 0; e < c.cache_buffer_elems; ++e) {
      const CacheCell cell = loc.locate(e);
      const auto bits = static_cast<uint32_t>(load_elem(a.cache(), e, cs));
      const Tensor t = cell.is_value ? Tensor::value : Tensor::key;
      switch (cell.role) {
        case CacheCell::Role::gap: ASSERT_EQ(bits, golden::canary_bits(c.cache_dtype, Canary::cache_gap)); break;
        case CacheCell::Role::free_block:
        case CacheCell::Role::sink:  // no owner: the free-block canary
          ++free_cells;
          ASSERT_EQ(bits, golden::canary_bits(c.cache_dtype, Canary::free_block));
          break;
        case CacheCell::Role::context:
          ++context_cells;
          ASSERT_EQ(bits, golden::context_bits(c, t, cell.request, cell.token, cell.head, cell.dim));
          break;
        case CacheCell::Role::new_token:
        case CacheCell::Role::hole:
        case CacheCell::Role::tail: ASSERT_EQ(bits, golden::canary_bits(c.cache_dtype, Canary::block_tail)); break;
      }
    }
    int64_t owned = 0, context = 0;
    for (const Request& r : c.requests) {
      owned += static_cast<int64_t>(r.blocks.size());
      context += r.context_len;
    }
    for (const auto& [block, owners] : shared_blocks(c)) {  // a shared prefix block's cells count once
      owned -= static_cast<int64_t>(owners.size()) - 1;
      context -= (static_cast<int64_t>(owners.size()) - 1) * c.cache.block_size;
    }
    EXPECT_EQ(free_cells, (c.cache.num_blocks - owned) * c.cache.block_size * c.num_heads * c.head_dim * 2);
    EXPECT_EQ(context_cells, context * c.num_heads * c.head_dim * 2);

    // Static scales: K's then V's, as scale_bits.
    const int64_t n = static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(load_elem(a.scales(), i, 4), golden::scale_bits(c, Tensor::key, i));
      ASSERT_EQ(load_elem(a.scales(), n + i, 4), golden::scale_bits(c, Tensor::value, i));
    }

    // Scale cache: every element by the role of its (block, pos, head), fp32 canaries.
    const CacheLocator scale_loc = CacheLocator::scale_cache(c);
    int64_t scale_context = 0;
    for (int64_t e = 0; e < c.scale_cache_elems; ++e) {
      const CacheCell cell = scale_loc.locate(e);
      const auto bits = static_cast<uint32_t>(load_elem(a.scale_cache(), e, 4));
      switch (cell.role) {
        case CacheCell::Role::gap: ASSERT_EQ(bits, golden::canary_bits(DType::f32, Canary::cache_gap)) << e; break;
        case CacheCell::Role::free_block:
        case CacheCell::Role::sink: ASSERT_EQ(bits, golden::canary_bits(DType::f32, Canary::free_block)) << e; break;
        case CacheCell::Role::context:
          ++scale_context;
          ASSERT_EQ(bits, golden::context_scale_bits(c, cell.is_value ? Tensor::value : Tensor::key, cell.request, cell.token, cell.head));
          break;
        case CacheCell::Role::new_token:
        case CacheCell::Role::hole:
        case CacheCell::Role::tail: ASSERT_EQ(bits, golden::canary_bits(DType::f32, Canary::block_tail)) << e; break;
      }
    }
    EXPECT_EQ(scale_context, c.scale_kind == ScaleKind::per_token_head ? context * c.num_heads * 2 : 0);
  }
}

// ---------------------------------------------------------------------------------------------

TEST(LocateCacheElem, invertsCacheElemOffsetForEveryCell) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(to_string(c.layout));
    const CacheLocator loc(c);
    std::vector<bool> is_cell(static_cast<size_t>(c.cache_buffer_elems));
    for (const bool v : {false, true})
      for (int64_t b = 0; b < c.cache.num_blocks; ++b)
        for (int64_t p = 0; p < c.cache.block_size; ++p)
          for (int64_t h = 0; h < c.num_heads; ++h)
            for (int64_t d = 0; d < c.head_dim; ++d) {
              const int64_t e = (v ? c.cache_v_offset : c.cache_k_offset) + cache_elem_offset(c.cache, b, p, h, d);
              const CacheCell cell = loc.locate(e);
              ASSERT_NE(cell.role, CacheCell::Role::gap) << e;
              ASSERT_EQ(cell.is_value, v);
              ASSERT_EQ(cell.block, b);
              ASSERT_EQ(cell.pos, p);
              ASSERT_EQ(cell.head, h);
              ASSERT_EQ(cell.dim, d);
              is_cell[static_cast<size_t>(e)] = true;
            }
    int64_t gaps = 0;
    for (int64_t e = 0; e < c.cache_buffer_elems; ++e) {
      if (is_cell[static_cast<size_t>(e)]) continue;
      ++gaps;
      ASSERT_EQ(loc.locate(e).role, CacheCell::Role::gap) << e;
    }
    EXPECT_EQ(loc.locate(-1).role, CacheCell::Role::gap);
    EXPECT_EQ(loc.locate(c.cache_buffer_elems + 100).role, CacheCell::Role::gap);
    if (c.layout == Layout::packed_kv_nhd && c.cache_k_offset == 5) {
      EXPECT_GT(gaps, 0);
    }
  }
}

// The scale cache locator inverts the scale geometry (no dim) and shares the KV cache's roles.
TEST(LocateCacheElem, invertsTheScaleCacheGeometry) {
  const Case c = test::quant_per_token_case();
  const CacheLocator loc = CacheLocator::scale_cache(c);
  int64_t cells = 0;
  for (const bool v : {false, true})
    for (int64_t b = 0; b < c.scale_cache.num_blocks; ++b)
      for (int64_t p = 0; p < c.scale_cache.block_size; ++p)
        for (int64_t h = 0; h < c.num_heads; ++h) {
          const int64_t e = (v ? c.scale_v_offset : c.scale_k_offset) + cache_elem_offset(c.scale_cache, b, p, h, 0);
          const CacheCell cell = loc.locate(e);
          ASSERT_NE(cell.role, CacheCell::Role::gap) << e;
          EXPECT_EQ(cell.is_value, v);
          EXPECT_EQ(cell.block, b);
          EXPECT_EQ(cell.pos, p);
          EXPECT_EQ(cell.head, h);
          EXPECT_EQ(cell.dim, 0);
          EXPECT_EQ(cell.role, CacheLocator(c).cell(v, b, p, h, 0).role);
          ++cells;
        }
  EXPECT_EQ(cells, 2 * 8 * 4 * 2);
  EXPECT_EQ(loc.locate(64).role, CacheCell::Role::gap);  // the 3-element gap between K and V
  EXPECT_EQ(loc.locate(c.scale_cache_elems - 1).role, CacheCell::Role::gap);
  const CacheCell cell = loc.locate(c.scale_k_offset + cache_elem_offset(c.scale_cache, 5, 3, 1, 0));
  EXPECT_EQ(cell.role, CacheCell::Role::new_token);  // request 0's token 3
  EXPECT_EQ(cell.request, 0);
  EXPECT_EQ(cell.token, 3);
}

TEST(LocateCacheElem, fillsInOwnerRoleAndToken) {
  const Case c = test::paged_nhd_case();
  auto at = [&](bool v, int64_t b, int64_t p) {
    return locate_cache_elem(c, (v ? c.cache_v_offset : c.cache_k_offset) + cache_elem_offset(c.cache, b, p, 1, 3));
  };
  CacheCell cell = at(false, 5, 3);  // request 0, logical block 0, token 3: new
  EXPECT_EQ(cell.role, CacheCell::Role::new_token);
  EXPECT_EQ(cell.request, 0);
  EXPECT_EQ(cell.token, 3);
  cell = at(true, 2, 1);  // request 0, logical block 1, token 5: past 3 + 2
  EXPECT_EQ(cell.role, CacheCell::Role::tail);
  EXPECT_EQ(cell.token, 5);
  cell = at(false, 7, 0);  // request 1, logical block 1, token 4: context
  EXPECT_EQ(cell.role, CacheCell::Role::context);
  EXPECT_EQ(cell.request, 1);
  EXPECT_EQ(cell.token, 4);
  cell = at(false, 3, 2);
  EXPECT_EQ(cell.role, CacheCell::Role::free_block);
  EXPECT_EQ(cell.request, -1);
  EXPECT_EQ(cell.head, 1);
  EXPECT_EQ(cell.dim, 3);
}

}  // namespace
}  // namespace kvf
