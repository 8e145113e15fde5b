// cell_map_test.cpp — the per-cell corruption map (src/report/cell_map.h) agrees with the
// classifier and decodes every damaged cell's writer.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='CellMap*'
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "../arena/test_cases.h"
#include "report/verdict.h"
#include "values/convert.h"
#include "golden/golden.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "values/payload.h"
#include "kv_format.cuh"
#include "kv_layout.cuh"
#include "report/cell_map.h"

namespace kvf {
namespace {

// The three arenas of one check, with `actual` starting as the correct result.
struct Arenas {
  Case c;
  Arena initial, expected, actual;
  explicit Arenas(Case cc) : c(std::move(cc)), initial(make_initial_arena(c)), expected(initial), actual(initial) {
    golden::golden_append(c, expected);
    actual = expected;
  }
  int size() const { return dtype_size(c.cache_dtype); }
  int64_t elem(bool v, int64_t b, int64_t p, int64_t h, int64_t d) const {
    return (v ? c.cache_v_offset : c.cache_k_offset) + cache_elem_offset(c.cache, b, p, h, d);
  }
  uint64_t get(const Arena& a, int64_t e) const { return load_elem(a.cache(), e, size()); }
  void set(int64_t e, uint64_t bits) { store_elem(actual.cache(), e, size(), bits); }
  Verdict verdict() const { return compare_arenas(c, initial, expected, actual); }
  CellMap map() const { return build_cell_map(c, verdict(), initial, expected, actual); }
};

TEST(CellMap, givesEverySlotItsRoleAndOwner) {
  const Arenas r(test::paged_nhd_case());
  const CellMap m = r.map();
  ASSERT_EQ(m.num_blocks, 8);
  ASSERT_EQ(m.block_size, 4);
  // request 0: context 3, new 2, blocks {5, 2}: block 5 = tokens 0..3, block 2 = tokens 4..7.
  EXPECT_EQ(m.block_request[5], 0);
  EXPECT_EQ(m.block_logical[2], 1);
  EXPECT_EQ(m.role(5, 0), SlotRole::context);
  EXPECT_EQ(m.role(5, 3), SlotRole::new_token);
  EXPECT_EQ(m.role(2, 0), SlotRole::new_token);
  EXPECT_EQ(m.role(2, 1), SlotRole::tail);
  EXPECT_EQ(m.block_request[1], -1);
  EXPECT_EQ(m.role(1, 0), SlotRole::free_block);
  EXPECT_TRUE(m.damage.empty());
  EXPECT_TRUE(m.matrix.empty());
  EXPECT_EQ(m.differing_cache_cells, 0);
}

TEST(CellMap, decodesACrossRequestWriteCellByCell) {
  Arenas r(test::paged_nhd_case());
  // Request 0's token 3 (block 5 slot 3) K values land in request 1's context (block 0 slot 2).
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 8; ++d) r.set(r.elem(false, 0, 2, h, d), r.get(r.expected, r.elem(false, 5, 3, h, d)));
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.front().kind, FindingKind::cross_request_write);
  const CellMap m = r.map();
  EXPECT_EQ(m.differing_cache_cells, 16);
  ASSERT_EQ(m.damage.size(), 1u);
  const SlotDamage& s = m.damage[0];
  EXPECT_EQ(s.block, 0);
  EXPECT_EQ(s.pos, 2);
  EXPECT_EQ(s.cells, 16);
  EXPECT_TRUE(s.k);
  EXPECT_FALSE(s.v);
  EXPECT_EQ(s.head_lo, 0);
  EXPECT_EQ(s.head_hi, 1);
  EXPECT_EQ(s.dim_hi, 7);
  EXPECT_EQ(s.worst, FindingKind::cross_request_write);
  EXPECT_EQ(s.writers, std::vector<std::string>{"request 0"});
  EXPECT_EQ(s.first.victim, "request 1");
  EXPECT_EQ(s.first.writer_request, 0);
  EXPECT_EQ(s.first.expected_meaning, "request 1's context token 2");
  EXPECT_EQ(s.first.found_meaning, "request 0 token 3 head 0 dim 0's K value (input row 0)");
  EXPECT_EQ(m.block_cells[0], 16);
  // Matrix: one victim row, one writer column.
  ASSERT_EQ(m.writers, std::vector<std::string>{"request 0"});
  ASSERT_EQ(m.matrix.size(), 1u);
  EXPECT_EQ(m.matrix[0].victim, "request 1");
  EXPECT_EQ(m.matrix[0].cells, std::vector<int64_t>{16});
  const std::string tip = describe_damage(s);
  EXPECT_NE(tip.find("block 0 slot 2: 16 cells differ (cross_request_write)"), std::string::npos) << tip;
  EXPECT_NE(tip.find("written by: request 0"), std::string::npos) << tip;
}

TEST(CellMap, filesEveryCellUnderAKindTheVerdictReports) {
  Arenas r(test::paged_nhd_case());
  // A padding row's value in a free block, a missing write, a stray write into a block tail.
  const auto pad = golden::convert_bits(golden::input_bits(r.c, golden::Tensor::key, 1, 0, 0), r.c.input_dtype, r.c.cache_dtype);
  r.set(r.elem(false, 1, 2, 0, 0), pad);
  r.set(r.elem(true, 7, 1, 1, 3), r.get(r.initial, r.elem(true, 7, 1, 1, 3)));
  r.set(r.elem(false, 2, 3, 0, 0), r.get(r.expected, r.elem(false, 4, 0, 0, 0)));
  const Verdict v = r.verdict();
  std::set<FindingKind> kinds;
  for (const Finding& f : v.findings) kinds.insert(f.kind);
  const CellMap m = r.map();
  ASSERT_EQ(m.damage.size(), 3u);
  for (const SlotDamage& s : m.damage) EXPECT_TRUE(kinds.count(s.first.kind)) << describe_damage(s);
  EXPECT_EQ(m.damage[0].block, 1);
  EXPECT_EQ(m.damage[0].worst, FindingKind::padding_leak);
  EXPECT_EQ(m.damage[0].first.victim, "free blocks");
  EXPECT_EQ(m.damage[1].worst, FindingKind::stray_write);
  EXPECT_EQ(m.damage[1].first.victim, "request 0's block tails");
  EXPECT_EQ(m.damage[1].writers, std::vector<std::string>{"request 2"});
  EXPECT_EQ(m.damage[2].worst, FindingKind::missing_write);
  EXPECT_EQ(m.damage[2].writers, std::vector<std::string>{"not written"});
}

TEST(CellMap, countsGuardBandsAndFilesStrideGapsUnderTheirBlock) {
  Arenas r(test::packed_gapped_case());
  // One byte just past the cache buffer, one stride-gap element inside block 3.
  const int64_t end = r.actual.layout().cache_begin + r.actual.layout().cache_bytes;
  r.actual.data()[end + 1] = std::byte{0x11};
  const int64_t gap = r.c.cache_k_offset + 3 * r.c.cache.stride_block + r.c.cache.stride_block - 1;
  ASSERT_EQ(locate_cache_elem(r.c, gap).role, CacheCell::Role::gap);
  r.set(gap, r.get(r.expected, r.elem(false, 4, 0, 0, 0)));
  const CellMap m = r.map();
  EXPECT_EQ(m.guard_after, 1);
  EXPECT_EQ(m.guard_before, 0);
  ASSERT_EQ(m.damage.size(), 1u);
  EXPECT_EQ(m.damage[0].block, 3);
  EXPECT_EQ(m.damage[0].pos, -1);
  EXPECT_EQ(m.damage[0].first.victim, "stride gaps");
  EXPECT_EQ(m.block_cells[3], 1);
  // The guard band finding is a matrix row of its own.
  const bool guard_row = std::any_of(m.matrix.begin(), m.matrix.end(), [](const MatrixRow& row) {
    return row.victim.find("guard band after the cache") != std::string::npos;
  });
  EXPECT_TRUE(guard_row);
}

// The map is drawn per logical (block, slot) whatever the physical layout: for each family and
// layout of configs/formats.json, one new token's element of each field is left unwritten through
// the field's own layout (x-packed K, transposed V, V with its own geometry, the latent entry's
// rope part) and the map files it at that block, slot, head and dim, under the field's name.
TEST(CellMap, filesDamageAtItsLogicalCellInEveryFormat) {
  const Profile p = load_profile(std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs" / "formats.json");
  std::set<std::string> seen;
  int checked = 0;
  for (int64_t i = 0; i < 400 && seen.size() < 14; ++i) {
    Case c = materialize(generate_case(p, 11, i));
    if (is_quantized(c.cache_dtype) || c.requests.empty()) continue;
    const std::string format = std::string(to_string(c.family)) + "/" + std::string(to_string(c.layout));
    if (!seen.insert(format).second) continue;
    // The first row that writes: its request, block and offset.
    int64_t row = 0;
    while (row < c.num_slots() && (c.slot_mapping[row] < 0 || c.slot_mapping[row] >= c.capacity())) ++row;
    if (row == c.num_slots()) continue;
    const int64_t slot = c.slot_mapping[static_cast<size_t>(row)];
    const int64_t block = slot / c.cache.block_size, pos = slot % c.cache.block_size;
    for (const CacheField& f : c.fields()) {
      Arenas r(c);
      const int64_t head = f.num_heads - 1, dim = f.head_dim - 1;  // the last dim: k_pe's in an MLA entry
      const int64_t e = field_offset(f.layout, block, pos, head, dim);
      if (r.get(r.initial, e) == r.get(r.expected, e)) continue;  // the value happens to be the pre-run one
      r.set(e, r.get(r.initial, e));
      const CellMap m = r.map();
      ++checked;
      SCOPED_TRACE(format + " field " + f.name);
      ASSERT_EQ(m.damage.size(), 1u);
      const SlotDamage& s = m.damage[0];
      EXPECT_EQ(s.block, block);
      EXPECT_EQ(s.pos, pos);
      EXPECT_EQ(s.cells, 1);
      EXPECT_EQ(s.worst, FindingKind::missing_write);
      EXPECT_EQ(f.index == 1 ? s.v : s.k, true);
      EXPECT_EQ(s.head_lo, head);
      EXPECT_EQ(s.dim_lo, dim);
      EXPECT_EQ(s.first.field, f.name);
      EXPECT_EQ(describe_cell(s.first).rfind(std::string(f.name) + " block " + std::to_string(block) + " slot " +
                                                 std::to_string(pos) + " head " + std::to_string(head) + " dim " +
                                                 std::to_string(dim), 0), 0u) << describe_cell(s.first);
    }
  }
  EXPECT_GE(checked, 14);
  for (const char* want : {"kv/vllm_legacy", "kv_split/paged_nhd", "mla/paged_nhd", "k_only/paged_hnd"})
    EXPECT_TRUE(seen.count(want)) << want;
}

TEST(CellMap, reportDirectorySitsNextToTheCase) {
  EXPECT_EQ(report_dir_for("out/abc.json"), std::filesystem::path("out/abc.report"));
}

}  // namespace
}  // namespace kvf
