// verdict_test.cpp — whole-arena comparison, classification (src/arena/classify.h) and the verdict (src/report/verdict.h).
//
// Each test takes expected = golden(initial), copies it to `actual`, plants one specific
// corruption and checks the first finding's kind, victim, writer and sentence.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='CompareArenas*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "report/verdict.h"
#include "gen/materialize.h"
#include "values/convert.h"
#include "kv_append.cuh"
#include "kv_append.h"
#include "values/convert.h"
#include "golden/golden.h"
#include "values/payload.h"
#include "../arena/test_cases.h"

namespace kvf {
namespace {

using golden::Canary;
using golden::Tensor;

// The three arenas of one check.
struct Arenas {
  Case c;
  Arena initial, expected, actual;
  explicit Arenas(Case cc) : c(std::move(cc)), initial(make_initial_arena(c)), expected(initial), actual(initial) {
    golden::golden_append(c, expected);
    actual = expected;
  }
  Verdict verdict() const { return compare_arenas(c, initial, expected, actual); }
  Verdict verdict(const char* policy) const { return compare_arenas(c, initial, expected, actual, *parse_tolerance(policy)); }
  int64_t scale_elem(bool v, int64_t b, int64_t p, int64_t h) const {
    return (v ? c.scale_v_offset : c.scale_k_offset) + cache_elem_offset(c.scale_cache, b, p, h, 0);
  }
  uint32_t get_scale(const Arena& a, int64_t e) const { return static_cast<uint32_t>(load_elem(a.scale_cache(), e, 4)); }
  void set_scale(int64_t e, uint32_t bits) { store_elem(actual.scale_cache(), e, 4, bits); }
  int cache_size() const { return dtype_size(c.cache_dtype); }
  int64_t elem(bool v, int64_t b, int64_t p, int64_t h, int64_t d) const {
    return (v ? c.cache_v_offset : c.cache_k_offset) + cache_elem_offset(c.cache, b, p, h, d);
  }
  uint64_t get(const Arena& a, int64_t e) const { return load_elem(a.cache(), e, cache_size()); }
  void set(int64_t e, uint64_t bits) { store_elem(actual.cache(), e, cache_size(), bits); }
};

std::string describe(const Verdict& v) {
  std::string s;
  for (const Finding& f : v.findings) s += std::string(to_string(f.kind)) + ": " + f.sentence + "\n    " + f.example + "\n";
  return s;
}

TEST(CompareArenas, passesIdenticalArenas) {
  for (const Case& c : {test::paged_nhd_case(), test::paged_hnd_case(), test::packed_gapped_case()}) {
    Arenas r(c);
    const Verdict v = r.verdict();
    EXPECT_TRUE(v.pass()) << describe(v);
    EXPECT_EQ(v.differing_cells, 0);
    // The golden run changed something (the expected arena is not the initial one).
    EXPECT_FALSE(compare_arenas(c, r.initial, r.initial, r.expected).pass());
  }
}

TEST(CompareArenas, reportsAWriteIntoAGuardBandAsOobWrite) {
  Arenas r(test::paged_nhd_case());
  const ArenaLayout& l = r.actual.layout();
  r.actual.data()[l.cache_begin + l.cache_bytes + 10] = std::byte{0};
  r.actual.data()[l.cache_begin + l.cache_bytes + 11] = std::byte{0};
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.kind, FindingKind::oob_write);
  EXPECT_EQ(f.victim, "guard band after the cache buffer");
  EXPECT_EQ(f.cells, 2);
  EXPECT_EQ(f.sentence, "the kernel wrote 2 bytes into the guard band after the cache buffer (bytes +10..+11 past the end of the cache buffer)");
  EXPECT_EQ(v.differing_cells, 2);

  Arenas before(test::paged_nhd_case());
  before.actual.data()[0] = std::byte{1};
  before.actual.data()[l.slots_begin - 1] = std::byte{1};
  const Verdict vb = before.verdict();
  ASSERT_EQ(vb.findings.size(), 2u) << describe(vb);
  EXPECT_EQ(vb.findings[0].victim, "guard band before the input buffer") << describe(vb);
  EXPECT_EQ(vb.findings[0].sentence, "the kernel wrote 1 byte into the guard band before the input buffer (bytes -" +
                                         std::to_string(l.input_begin) + "..-" + std::to_string(l.input_begin) +
                                         " before the start of the input buffer)");
  EXPECT_EQ(vb.findings[1].victim, "guard band before the slot_mapping");
}

TEST(CompareArenas, reportsAnotherRequestsRowInAContextCellAsCrossRequestWrite) {
  Arenas r(test::paged_nhd_case());
  // Request 0's new token 3 (row 0, slot 23 = block 5 pos 3), K, every head and dim, lands in
  // request 1's context token 2 (block 0 pos 2).
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 8; ++d) r.set(r.elem(false, 0, 2, h, d), r.get(r.expected, r.elem(false, 5, 3, h, d)));
  const Verdict v = r.verdict();
  ASSERT_FALSE(v.pass());
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.kind, FindingKind::cross_request_write) << describe(v);
  EXPECT_EQ(f.victim, "request 1");
  EXPECT_EQ(f.victim_request, 1);
  EXPECT_EQ(f.writer, "request 0 (token 3)");
  EXPECT_EQ(f.writer_request, 0);
  EXPECT_EQ(f.cells, 16);
  EXPECT_EQ(f.where, "K block 0 slot 2, heads 0..1, dims 0..7");
  EXPECT_EQ(f.sentence, "request 0 (token 3) wrote into request 1's block 0 slot 2, heads 0..1 (K, 16 cells)");
}

TEST(CompareArenas, reportsAPaddingRowsValueAnywhereAsPaddingLeak) {
  Arenas r(test::paged_nhd_case());
  // Row 1 has slot -1; its (tagged NaN) value lands in free block 1 slot 2, dim 0 of both heads.
  const auto bits = golden::convert_bits(golden::input_bits(r.c, Tensor::key, 1, 0, 0), r.c.input_dtype, r.c.cache_dtype);
  r.set(r.elem(false, 1, 2, 0, 0), bits);
  r.set(r.elem(false, 1, 2, 1, 0), bits);
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.kind, FindingKind::padding_leak);
  EXPECT_EQ(f.victim, "free block 1");
  EXPECT_EQ(f.writer, "padding row 1 (slot -1)");
  EXPECT_EQ(f.sentence, "padding row 1 (slot -1) leaked into free block 1 slot 2, heads 0..1 (K, 2 cells)");

  // A CUDA-graph row (rows 8 and 9 share the pattern) in request 2's new-token cell.
  Arenas g(test::paged_nhd_case());
  g.set(g.elem(true, 4, 0, 1, 5), golden::input_bits(g.c, Tensor::value, 9, 1, 5));
  const Verdict vg = g.verdict();
  ASSERT_EQ(vg.findings.size(), 1u) << describe(vg);
  EXPECT_EQ(vg.findings[0].kind, FindingKind::padding_leak);
  EXPECT_EQ(vg.findings[0].writer, "CUDA-graph padding rows (rows >= T = 8)");
  EXPECT_EQ(vg.findings[0].victim, "request 2");
}

TEST(CompareArenas, reportsAnUnwrittenTokenAsMissingWrite) {
  Arenas r(test::paged_nhd_case());
  // Request 0's token 3 (block 5 slot 3): K and V, every head and dim, back to the pre-run value.
  for (const bool v : {false, true})
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 8; ++d) r.set(r.elem(v, 5, 3, h, d), r.get(r.initial, r.elem(v, 5, 3, h, d)));
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.kind, FindingKind::missing_write);
  EXPECT_EQ(f.victim, "request 0");
  EXPECT_EQ(f.sentence, "request 0's token 3 (block 5 slot 3) was not written: 32 of 32 cells still hold their pre-run value");
  EXPECT_EQ(v.differing_cells, 32);
}

TEST(CompareArenas, reportsAFlippedBitInAnExpectedWriteAsWrongValue) {
  Arenas r(test::paged_hnd_case());
  const int64_t e = r.elem(true, 7, 1, 1, 6);  // request 1's token 5 (slot 29), V head 1 dim 6
  r.set(e, r.get(r.expected, e) ^ 0x0100);
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.kind, FindingKind::wrong_value);
  EXPECT_EQ(f.victim, "request 1");
  EXPECT_EQ(f.where, "V block 7 slot 1, head 1, dim 6");
  EXPECT_NE(f.sentence.find("request 1's token 5 (block 7 slot 1) was written with wrong values in 1 of 32 cells"), std::string::npos)
      << f.sentence;
}

TEST(CompareArenas, namesTheRowWhoseValueLandedInAWrongSlot) {
  Arenas r(test::paged_nhd_case());
  // Request 2's token 0 (slot 16) receives request 2's token 1's K row (slot 17): an off-by-one row.
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 8; ++d) r.set(r.elem(false, 4, 0, h, d), r.get(r.expected, r.elem(false, 4, 1, h, d)));
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::wrong_value);
  EXPECT_EQ(v.findings[0].writer, "request 2 (token 1)");
  EXPECT_NE(v.findings[0].sentence.find("holds request 2 token 1 head 0 dim 0's K value"), std::string::npos) << v.findings[0].sentence;
}

TEST(CompareArenas, reportsAChangedInputAsInputModified) {
  Arenas r(test::paged_nhd_case());
  const InputView& k = r.c.key;
  const int64_t e = k.offset + input_elem_offset(k.stride_token, k.stride_head, 2, 1, 3);
  store_elem(r.actual.input(), e, 2, 0x1234);
  store_elem(r.actual.slots(), 4, 8, 99);
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 2u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::input_modified);
  EXPECT_EQ(v.findings[0].victim, "key view");
  EXPECT_EQ(v.findings[0].sentence, "the kernel modified the key view row 2, head 1, dim 3 (1 element)");
  EXPECT_EQ(v.findings[1].victim, "slot_mapping");
  EXPECT_EQ(v.findings[1].sentence, "the kernel modified slot_mapping entry 4 (1 entry)");
}

TEST(CompareArenas, reportsAnInputGapCanaryInTheCacheAsOobReadSuspected) {
  Arenas r(test::paged_nhd_case());
  r.set(r.elem(false, 4, 2, 0, 7), golden::canary_bits(r.c.input_dtype, Canary::input_gap));
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::oob_read_suspected);
  EXPECT_EQ(v.findings[0].victim, "request 2");
  EXPECT_EQ(v.findings[0].writer, "the input-gap canary");
}

TEST(CompareArenas, reportsAWrongCounterAsInvalidSlotMiscount) {
  Arenas r(test::paged_nhd_case());
  ASSERT_EQ(r.expected.counter_value(), 1u);
  *r.actual.counter() = 5;
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::invalid_slot_miscount);
  EXPECT_EQ(v.findings[0].sentence, "expected 1 slots >= capacity counted, found 5");
}

TEST(CompareArenas, reportsWritesIntoGapsTailsAndOwnContextAsStrayWrite) {
  Arenas r(test::packed_gapped_case());
  r.set(5 + 8, 0x3f800000u);  // K block 0 slot 0 head 0, dim 8: the 2-element gap after the head
  Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::stray_write);
  EXPECT_EQ(v.findings[0].victim, "cache stride gaps");
  EXPECT_EQ(v.findings[0].writer, "unknown writer");
  EXPECT_EQ(v.findings[0].where, "cache buffer element 13 (stride gaps)");
  EXPECT_EQ(v.findings[0].sentence, "an unknown writer wrote into the cache's stride gaps at element 13 (1 cell)");

  Arenas t(test::packed_gapped_case());
  // Request 0's token 4 (row 2, slot 8 = block 2 pos 0) also written one slot further, into its tail.
  for (int64_t d = 0; d < 8; ++d) t.set(t.elem(false, 2, 1, 0, d), t.get(t.expected, t.elem(false, 2, 0, 0, d)));
  v = t.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::stray_write);
  EXPECT_EQ(v.findings[0].victim, "request 0's block tail");
  EXPECT_EQ(v.findings[0].sentence, "request 0 (token 4) wrote into the unused tail of request 0's block 2 slot 1, head 0 (K, 8 cells)");

  Arenas o(test::paged_nhd_case());
  // Request 1's token 5 (slot 29 = block 7 pos 1) written over its own context token 4 (block 7 pos 0).
  o.set(o.elem(true, 7, 0, 1, 2), o.get(o.expected, o.elem(true, 7, 1, 1, 2)));
  v = o.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::stray_write);
  EXPECT_EQ(v.findings[0].victim, "request 1");
  EXPECT_EQ(v.findings[0].sentence, "request 1 (token 5) wrote into its own earlier context at block 7 slot 0, head 1 (V, 1 cell)");
}

TEST(CompareArenas, sortsFindingsBySeverity) {
  Arenas r(test::paged_nhd_case());
  *r.actual.counter() = 0;                                                      // invalid_slot_miscount
  r.set(r.elem(false, 5, 3, 0, 0), r.get(r.initial, r.elem(false, 5, 3, 0, 0)));  // missing_write
  r.actual.data()[3] = std::byte{0};                                            // oob_write
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 3u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::oob_write);
  EXPECT_EQ(v.findings[1].kind, FindingKind::missing_write);
  EXPECT_EQ(v.findings[2].kind, FindingKind::invalid_slot_miscount);
  EXPECT_EQ(v.differing_cells, 3);
}

// A ~16 MiB cache: the passing comparison is one memcmp; a wrecked cache stays bounded.
Case big_case(int requests = 16, int spare_blocks = 46) {
  Genotype g;
  g.layout = Layout::paged_nhd;
  g.block_size = 16;
  g.num_heads = 8;
  g.head_dim = 128;
  g.input_dtype = DType::f16;
  g.cache_dtype = DType::f16;
  for (int i = 0; i < requests; ++i) g.requests.push_back({200, 8});
  g.spare_blocks = spare_blocks;  // default: 254 blocks of 8 heads x 16 slots x 128 dims, K and V: 16 MiB of f16
  g.layout_seed = 7;
  return materialize(g);
}

TEST(CompareArenas, isFastWhenNothingDiffers) {
  Arenas r(big_case());
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Verdict v = r.verdict();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_TRUE(v.pass());
  }
  std::sort(ms.begin(), ms.end());
  std::cout << "[ timing ] compare_arenas on a passing " << r.actual.size() / (1 << 20) << " MiB arena: median " << ms[3]
            << " ms (min " << ms[0] << ", max " << ms[6] << ")\n";
}

// The real kernel (kv_append.cuh run by the CPU grid emulator) passes on the arena, and the same
// kernel given slot_mapping + 1 (an off-by-one slot bug) is reported cell group by cell group.
KvAppendParams emu_params(const Case& c, Arena& a) {
  const int64_t in = dtype_size(c.input_dtype), cs = dtype_size(c.cache_dtype);
  KvAppendParams p;
  p.key = a.input() + c.key.offset * in;
  p.value = a.input() + c.value.offset * in;
  p.key_stride_token = c.key.stride_token;
  p.key_stride_head = c.key.stride_head;
  p.value_stride_token = c.value.stride_token;
  p.value_stride_head = c.value.stride_head;
  p.slot_mapping = a.slots();
  p.slot_type = c.slot_dtype;
  p.num_slots = c.num_slots();
  p.num_input_rows = c.num_input_rows;
  p.k_cache = a.cache() + c.cache_k_offset * cs;
  p.v_cache = a.cache() + c.cache_v_offset * cs;
  p.cache = c.cache;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  p.input_dtype = c.input_dtype;
  p.cache_dtype = c.cache_dtype;
  p.invalid_slots = a.counter();
  return p;
}

TEST(CompareArenas, passesTheEmulatedKernelAndCatchesAShiftedSlot) {
  for (const Case& c : {test::paged_nhd_case(), test::paged_hnd_case(), test::packed_gapped_case(), big_case()}) {
    Arenas r(c);
    r.actual = r.initial;
    ASSERT_EQ(kv_append_emu(emu_params(r.c, r.actual)), LaunchStatus::ok);
    const Verdict v = r.verdict();
    EXPECT_TRUE(v.pass()) << to_string(c.layout) << "\n" << describe(v);
  }
  // The kernel called with every slot one higher (slot_mapping off by one) on the hand-built case:
  // request 1's token 5 (slot 29) lands on slot 30 (its own tail), request 0's token 3 (slot 23)
  // on slot 24 = block 6, a free block, and so on.
  Arenas r(test::paged_nhd_case());
  r.actual = r.initial;
  std::vector<int64_t> shifted = r.c.slot_mapping;
  for (int64_t& s : shifted) s = s >= 0 && s < r.c.capacity() ? s + 1 : s;
  KvAppendParams p = emu_params(r.c, r.actual);
  p.slot_mapping = shifted.data();
  ASSERT_EQ(kv_append_emu(p), LaunchStatus::ok);
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 8u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::stray_write);
  EXPECT_EQ(v.findings[0].sentence,
            "request 0 (token 4) wrote into the unused tail of request 0's block 2 slot 1, heads 0..1 (K and V, 32 cells)");
  EXPECT_EQ(v.findings[3].sentence, "request 0 (token 3) wrote into free block 6 slot 0, heads 0..1 (K and V, 32 cells)");
  EXPECT_EQ(v.findings[4].kind, FindingKind::wrong_value);
  EXPECT_EQ(v.findings[4].writer, "request 2 (tokens 0..1)");
  EXPECT_EQ(v.findings[7].sentence, "request 2's token 0 (block 4 slot 0) was not written: 32 of 32 cells still hold their pre-run value");
}

TEST(CompareArenas, staysBoundedWhenEverythingDiffers) {
  Arenas r(big_case(4, 8));  // 60 blocks, 2M cells
  std::memset(r.actual.cache(), 0, static_cast<size_t>(r.actual.layout().cache_bytes));
  const auto t0 = std::chrono::steady_clock::now();
  const Verdict v = r.verdict();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int64_t nonzero = 0;  // a few expected cells hold +0 already
  for (int64_t e = 0; e < r.c.cache_buffer_elems; ++e) nonzero += r.get(r.expected, e) != 0;
  EXPECT_EQ(v.differing_cells, nonzero);
  EXPECT_LE(v.findings.size(), 4096u + 16u);
  std::cout << "[ timing ] compare_arenas with " << v.differing_cells << " differing cells: " << ms << " ms, " << v.findings.size()
            << " findings\n";
  if (std::getenv("KVF_SHOW")) std::cout << describe(v);
}

// ---------------------------------------------------------------------------------------------
// Quantised caches, scales and tolerance policies

TEST(TolerancePolicy, parsesAndPrintsItsThreeForms) {
  EXPECT_EQ(parse_tolerance("exact")->kind, TolerancePolicy::Kind::exact);
  EXPECT_EQ(parse_tolerance("written-any-value")->kind, TolerancePolicy::Kind::written_any_value);
  const auto u = parse_tolerance("ulp:3");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->kind, TolerancePolicy::Kind::ulp);
  EXPECT_EQ(u->ulps, 3);
  EXPECT_EQ(parse_tolerance("ulp:0")->ulps, 0);
  for (const char* bad : {"", "Exact", "ulp", "ulp:", "ulp:-1", "ulp:+1", "ulp:1x", "ulp: 1", "ulp:99999999999999999999", "written"}) {
    EXPECT_FALSE(parse_tolerance(bad).has_value()) << bad;
  }
  for (const char* text : {"exact", "ulp:0", "ulp:17", "written-any-value"}) EXPECT_EQ(to_string(*parse_tolerance(text)), text);
  EXPECT_EQ(to_string(TolerancePolicy{}), "exact");
}

// Per-format rules (a target's default such as triton-interp-fp8hw's): ",FORMAT=RULE" after the policy.
TEST(TolerancePolicy, parsesAndPrintsPerFormatRules) {
  const auto p = parse_tolerance("exact,fp8_e4m3=written-any-value,int8=ulp:2");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->kind, TolerancePolicy::Kind::exact);
  EXPECT_EQ(p->rule_for(DType::fp8_e4m3).kind, TolerancePolicy::Kind::written_any_value);
  EXPECT_EQ(p->rule_for(DType::int8).kind, TolerancePolicy::Kind::ulp);
  EXPECT_EQ(p->rule_for(DType::int8).ulps, 2);
  EXPECT_EQ(p->rule_for(DType::f32).kind, TolerancePolicy::Kind::exact);
  EXPECT_EQ(to_string(*p), "exact,fp8_e4m3=written-any-value,int8=ulp:2");
  for (const char* bad : {"exact,", "exact,fp8_e4m3", "exact,fp9=exact", "exact,f16=loose", "exact,f16=exact,f16=ulp:1",
                          ",f16=exact", "exact;f16=exact", "exact,f16=exact,"}) {
    EXPECT_FALSE(parse_tolerance(bad).has_value()) << bad;
  }
}

// A per-format rule applies to the cells stored in that format only: the fp8 KV cache of a
// per_token_head case, not its f32 scale cache.
TEST(CompareArenas, appliesAPerFormatRuleToCellsOfThatFormatOnly) {
  Arenas r(test::quant_per_token_case());  // fp8_e4m3 cache
  const int64_t e = r.elem(true, 4, 1, 0, 2);
  const uint32_t exp = r.get(r.expected, e), ini = r.get(r.initial, e);
  uint32_t other = exp ^ 0x40u;
  if (other == ini) other ^= 0x01u;
  r.set(e, other);
  EXPECT_FALSE(r.verdict("exact").pass());
  EXPECT_FALSE(r.verdict("exact,fp8_e5m2=written-any-value").pass());
  EXPECT_TRUE(r.verdict("exact,fp8_e4m3=written-any-value").pass());
  r.set(e, ini);  // not written: written-any-value does not accept the pre-run value
  EXPECT_EQ(r.verdict("exact,fp8_e4m3=written-any-value").findings.at(0).kind, FindingKind::missing_write);
  r.set(e, exp);

  const int64_t s = r.scale_elem(false, 5, 3, 1);
  r.set_scale(s, r.get_scale(r.expected, s) + 1);  // one f32 ulp off: judged by the default (exact)
  EXPECT_FALSE(r.verdict("exact,fp8_e4m3=written-any-value").pass());
  EXPECT_TRUE(r.verdict("exact,f32=ulp:1").pass());
}

TEST(CompareArenas, passesIdenticalQuantisedArenas) {
  for (const Case& c : {test::quant_per_token_case(), test::quant_per_block_case()}) {
    Arenas r(c);
    const Verdict v = r.verdict();
    EXPECT_TRUE(v.pass()) << describe(v);
    EXPECT_FALSE(compare_arenas(c, r.initial, r.initial, r.expected).pass());
  }
}

// A new-token cell of request 1's token 5 (block 7 slot 1) in a quantised cache whose expected code
// has a neighbour one ulp away that is neither NaN nor the pre-run value.
struct QuantCell {
  int64_t e;
  uint32_t exp, one_off;
};
QuantCell one_ulp_cell(const Arenas& r) {
  for (int64_t d = 0; d < 8; ++d) {
    const int64_t e = r.elem(false, 7, 1, 0, d);
    const auto exp = static_cast<uint32_t>(r.get(r.expected, e));
    for (const uint32_t cand : {exp + 1, exp - 1}) {
      const uint32_t b = cand & 0xFFu;
      if (b != r.get(r.initial, e) && golden::ulp_distance(exp, b, r.c.cache_dtype) == 1) return {e, exp, b};
    }
  }
  ADD_FAILURE() << "no cell with a one-ulp neighbour";
  return {0, 0, 0};
}

TEST(CompareArenas, judgesAOneUlpOffQuantisedCellByThePolicy) {
  Arenas r(test::quant_per_token_case());
  const QuantCell q = one_ulp_cell(r);
  r.set(q.e, q.one_off);
  const Verdict exact = r.verdict("exact");
  ASSERT_EQ(exact.findings.size(), 1u) << describe(exact);
  const Finding& f = exact.findings[0];
  EXPECT_EQ(f.kind, FindingKind::wrong_value);
  EXPECT_NE(f.sentence.find("request 1's token 5 (block 7 slot 1) was written with wrong values in 1 of 32 cells, max 1 ulp in fp8_e4m3"),
            std::string::npos)
      << f.sentence;
  char codes[64];
  std::snprintf(codes, sizeof codes, "expected 0x%02x (", q.exp);
  EXPECT_NE(f.example.find(codes), std::string::npos) << f.example;
  std::snprintf(codes, sizeof codes, "found 0x%02x (%.9g)", q.one_off, static_cast<double>(golden::bits_to_f32(q.one_off, DType::fp8_e4m3)));
  EXPECT_NE(f.example.find(codes), std::string::npos) << f.example;
  EXPECT_FALSE(r.verdict("ulp:0").pass());
  EXPECT_TRUE(r.verdict("ulp:1").pass()) << describe(r.verdict("ulp:1"));
  EXPECT_TRUE(r.verdict("written-any-value").pass());
}

TEST(CompareArenas, acceptsAWrittenButWrongCellOnlyUnderWrittenAnyValue) {
  Arenas r(test::quant_per_block_case());  // int8
  const int64_t e = r.elem(true, 4, 2, 1, 3);  // request 2's token 2 (slot 18), V head 1 dim 3
  const auto exp = static_cast<uint32_t>(r.get(r.expected, e));
  const uint32_t far = static_cast<uint8_t>(static_cast<int8_t>(exp) > 0 ? -100 : 100);
  ASSERT_NE(far, r.get(r.initial, e));
  r.set(e, far);
  EXPECT_EQ(r.verdict("exact").findings.at(0).kind, FindingKind::wrong_value);
  EXPECT_NE(r.verdict("exact").findings.at(0).sentence.find("ulp in int8"), std::string::npos) << describe(r.verdict("exact"));
  EXPECT_FALSE(r.verdict("ulp:1").pass());
  EXPECT_TRUE(r.verdict("written-any-value").pass());
}

// An unwritten cell is missing_write under exact and written-any-value. ulp:N judges the value
// alone, so it accepts the cell exactly when its pre-run value lies within N ulp of the expected one.
TEST(CompareArenas, reportsAnUnwrittenQuantisedCellUnlessItsPreRunValueIsWithinTheUlpTolerance) {
  Arenas r(test::quant_per_token_case());
  const int64_t e = r.elem(true, 4, 1, 0, 2);  // request 2's token 1 (slot 17)
  const uint32_t exp = r.get(r.expected, e), ini = r.get(r.initial, e);
  ASSERT_NE(exp, ini);
  const int64_t dist = golden::ulp_distance(exp, ini, test::quant_per_token_case().cache_dtype);
  ASSERT_GE(dist, 2);
  r.set(e, ini);
  for (const std::string& policy : {std::string("exact"), std::string("written-any-value"), "ulp:" + std::to_string(dist - 1)}) {
    const Verdict v = r.verdict(policy.c_str());
    ASSERT_EQ(v.findings.size(), 1u) << policy << describe(v);
    EXPECT_EQ(v.findings[0].kind, FindingKind::missing_write) << policy;
  }
  EXPECT_TRUE(r.verdict(("ulp:" + std::to_string(dist)).c_str()).pass());
}

// 1-byte caches are classified by location: a free block is stray_write, another request's
// context cross_request_write, both with an unknown writer, whatever the value.
TEST(CompareArenas, classifiesQuantisedCacheWritesByLocation) {
  Arenas r(test::quant_per_token_case());
  r.set(r.elem(false, 1, 2, 0, 0), r.get(r.expected, r.elem(false, 5, 3, 0, 0)));  // free block 1
  r.set(r.elem(true, 0, 2, 1, 4), 0x00);                                             // request 1's context token 2
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 2u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::cross_request_write);
  EXPECT_EQ(v.findings[0].sentence, "an unknown writer wrote into request 1's block 0 slot 2, head 1 (V, 1 cell)");
  EXPECT_EQ(v.findings[1].kind, FindingKind::stray_write);
  EXPECT_EQ(v.findings[1].victim, "free block 1");
}

// An unknown writer into a context cell is another request's only when another request could have
// written: with request 0 the only one with new tokens, a write into its own context is its
// stray_write, into request 1's context a cross_request_write; by location (a 1-byte cache) and by
// value (a value no input element holds) alike.
TEST(CompareArenas, callsAnUnknownWriteCrossRequestOnlyWhenAnotherRequestWrites) {
  for (Case c : {test::paged_nhd_case(), test::quant_per_token_case()}) {
    c.requests[1].new_len = 0;
    c.requests[2].new_len = 0;
    c.slot_mapping = {23, -1, 8};  // request 0's new tokens 3, 4 and a padding row
    const bool quantised = is_quantized(c.cache_dtype);
    // 1-byte: any other code; f16: 0x3555 (0.333..), which no input element of the case holds.
    auto nobodys = [&](const Arenas& r, int64_t e) { return quantised ? r.get(r.initial, e) ^ 1u : uint64_t{0x3555}; };
    {
      Arenas r(c);
      r.set(r.elem(false, 5, 1, 1, 4), nobodys(r, r.elem(false, 5, 1, 1, 4)));  // request 0's context token 1
      const Verdict v = r.verdict();
      ASSERT_EQ(v.findings.size(), 1u) << describe(v);
      EXPECT_EQ(v.findings[0].kind, FindingKind::stray_write) << describe(v);
      EXPECT_EQ(v.findings[0].victim_class, "context");
    }
    {
      Arenas r(c);
      r.set(r.elem(true, 0, 2, 1, 4), nobodys(r, r.elem(true, 0, 2, 1, 4)));  // request 1's context token 2
      const Verdict v = r.verdict();
      ASSERT_EQ(v.findings.size(), 1u) << describe(v);
      EXPECT_EQ(v.findings[0].kind, FindingKind::cross_request_write) << describe(v);
    }
  }
}

TEST(CompareArenas, reportsAWrongOrMissingScaleAsScaleMismatch) {
  Arenas r(test::quant_per_token_case());
  const int64_t e = r.scale_elem(false, 5, 3, 1);  // request 0's token 3, K head 1
  const uint32_t exp = r.get_scale(r.expected, e);
  float f;
  std::memcpy(&f, &exp, 4);
  f *= 2;
  uint32_t doubled;
  std::memcpy(&doubled, &f, 4);
  r.set_scale(e, doubled);
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::scale_mismatch);
  EXPECT_EQ(v.findings[0].victim_request, 0);
  EXPECT_NE(v.findings[0].sentence.find("request 0's token 3 (block 5 slot 3) got wrong scales in 1 of 4 scale cache cells (first: K head 1 holds"),
            std::string::npos)
      << v.findings[0].sentence;
  EXPECT_NE(v.findings[0].example.find("K scale block 5 slot 3 head 1"), std::string::npos) << v.findings[0].example;
  EXPECT_TRUE(r.verdict("written-any-value").pass());

  // Not written at all: still scale_mismatch, and the sentence says so, under every policy.
  r.set_scale(e, r.get_scale(r.initial, e));
  for (const char* policy : {"exact", "ulp:5", "written-any-value"}) {
    const Verdict u = r.verdict(policy);
    ASSERT_EQ(u.findings.size(), 1u) << describe(u);
    EXPECT_EQ(u.findings[0].kind, FindingKind::scale_mismatch);
    EXPECT_NE(u.findings[0].sentence.find("K head 1 was not written"), std::string::npos) << u.findings[0].sentence;
  }

  // One fp32 ulp off: a finding under exact, accepted under ulp:1.
  r.set_scale(e, exp + 1);
  EXPECT_FALSE(r.verdict("exact").pass());
  EXPECT_TRUE(r.verdict("ulp:1").pass());
}

TEST(CompareArenas, reportsScaleCacheWritesOutsideNewTokensByLocation) {
  Arenas r(test::quant_per_token_case());
  r.set_scale(r.scale_elem(true, 0, 2, 0), 0x3F800000u);  // request 1's context token 2
  r.set_scale(64, 0x3F800000u);                           // the gap between the K and V scale caches
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 2u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::cross_request_write);
  EXPECT_EQ(v.findings[0].sentence, "an unknown writer wrote into request 1's scale cache block 0 slot 2, head 0 (V, 1 cell)");
  EXPECT_EQ(v.findings[1].kind, FindingKind::stray_write);
  EXPECT_EQ(v.findings[1].sentence, "an unknown writer wrote into the scale cache's stride gaps at element 64 (1 cell)");

  Arenas g(test::quant_per_token_case());
  const ArenaLayout& l = g.actual.layout();
  g.actual.data()[l.scale_cache_begin + l.scale_cache_bytes] = std::byte{0};
  const Verdict vg = g.verdict();
  ASSERT_EQ(vg.findings.size(), 1u) << describe(vg);
  EXPECT_EQ(vg.findings[0].kind, FindingKind::oob_write);
  EXPECT_EQ(vg.findings[0].victim, "guard band after the scale cache buffer");
}

TEST(CompareArenas, reportsAChangedStaticScaleAsInputModified) {
  Arenas r(test::quant_per_block_case());
  const int64_t n = static_scale_count(r.c.scale_kind, r.c.num_heads, r.c.cache.num_blocks);
  store_elem(r.actual.scales(), n + 3, 4, 0x3F800000u);  // V scale 3
  const Verdict v = r.verdict();
  ASSERT_EQ(v.findings.size(), 1u) << describe(v);
  EXPECT_EQ(v.findings[0].kind, FindingKind::input_modified);
  EXPECT_EQ(v.findings[0].sentence, "static V scale 3 changed (1 element)");
  EXPECT_NE(v.findings[0].example.find("found 0x3f800000 (1)"), std::string::npos) << v.findings[0].example;
  EXPECT_FALSE(r.verdict("written-any-value").pass());  // inputs are exact under every policy
}

}  // namespace
}  // namespace kvf
