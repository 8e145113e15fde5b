// html_test.cpp — report.html and report.md (src/report/html.h, markdown.h): self-contained, the
// damaged cells and their decoded writers in the page, and a readable map for large caches.
#include <gtest/gtest.h>

#include "../arena/test_cases.h"
#include "report/verdict.h"
#include "golden/golden.h"
#include "kv_layout.cuh"
#include "report/html.h"
#include "report/markdown.h"

namespace kvf {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A report of the paged case with request 0's token 3 written over request 1's context, and, with
// `guard_bytes`, the two bytes before the cache overwritten too.
CaseReport cross_request_report(bool guard_bytes = false) {
  CaseReport r;
  r.kase = test::paged_nhd_case();
  const Case& c = r.kase;
  const Arena initial = make_initial_arena(c);
  Arena expected = initial;
  golden::golden_append(c, expected);
  Arena actual = expected;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 8; ++d)
      store_elem(actual.cache(), c.cache_k_offset + cache_elem_offset(c.cache, 0, 2, h, d), 2,
                 load_elem(expected.cache(), c.cache_k_offset + cache_elem_offset(c.cache, 5, 3, h, d), 2));
  if (guard_bytes) {
    actual.cache()[-1] = std::byte{0x06};
    actual.cache()[-2] = std::byte{0x07};
  }
  r.case_file = "found/abc.json";
  r.target = "cuda-emu";
  r.verdict = compare_arenas(c, initial, expected, actual);
  r.map = build_cell_map(c, r.verdict, initial, expected, actual);
  r.replay_command = "kvfuzz replay found/abc.json --target cuda-emu";
  r.report_command = "kvfuzz report found/abc.json --target cuda-emu";
  return r;
}

TEST(ReportHtml, isSelfContainedAndCarriesTheDecodedWriters) {
  const std::string h = render_report_html(cross_request_report());
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  // No network: nothing is fetched (the only URL is the SVG namespace, which is a name).
  EXPECT_EQ(h.find("src=\"http"), std::string::npos);
  EXPECT_EQ(h.find("href=\"http"), std::string::npos);
  EXPECT_EQ(h.find("@import"), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_NE(h.find("request 0 (token 3) wrote into request 1&#39;s block 0 slot 2, heads 0..1"), std::string::npos);
  EXPECT_EQ(count(h, "<g class=\"corrupt\""), 1u);
  EXPECT_NE(h.find("data-writer=\"request 0\""), std::string::npos);
  EXPECT_NE(h.find("request 0 token 3 head 0 dim 0&#39;s K value"), std::string::npos);
  EXPECT_NE(h.find("kvfuzz replay found/abc.json --target cuda-emu"), std::string::npos);
  EXPECT_NE(h.find("id=\"victim-writer\""), std::string::npos);
  EXPECT_NE(h.find("data-rendered"), std::string::npos);
}

TEST(ReportHtml, countsEachCellOnceAndGuardBytesAsBytes) {
  // Two bytes of the guard band before the cache, besides the 16 cross-request cells.
  const CaseReport r = cross_request_report(/*guard_bytes=*/true);
  ASSERT_EQ(r.verdict.findings.size(), 2u);
  EXPECT_EQ(finding_amount(r.verdict.findings[0]), "2 bytes");
  EXPECT_EQ(finding_amount(r.verdict.findings[1]), "16 cells");
  EXPECT_EQ(differing_total(r.verdict), "16 differing cells, 2 overwritten guard-band bytes");
  const std::string h = render_report_html(r);
  EXPECT_EQ(count(h, "(K, 16 cells)"), 1u);  // the finding says its amount once, in its sentence
  EXPECT_EQ(count(h, "class=\"cells\">(16 cells)"), 0u);
  EXPECT_EQ(count(h, "2 cells"), 0u);   // guard bytes are never cells
  EXPECT_NE(h.find("16 differing cells, 2 overwritten guard-band bytes in all"), std::string::npos);
  EXPECT_NE(h.find("guard band before the cache buffer (bytes)"), std::string::npos);
  const std::string md = render_report_markdown(r);
  EXPECT_NE(md.find("16 differing cells, 2 overwritten guard-band bytes in all"), std::string::npos);
}

TEST(ReportHtml, drawsLargeCachesOneSquarePerBlockPlusDamagedBlocksInDetail) {
  CaseReport r = cross_request_report();
  // Pretend the cache had 6000 blocks of 16 slots, two of them damaged.
  CellMap& m = r.map;
  m.num_blocks = 6000;
  m.block_size = 16;
  m.block_request.assign(6000, -1);
  m.block_logical.assign(6000, -1);
  m.block_cells.assign(6000, 0);
  m.roles.assign(6000 * 16, SlotRole::free_block);
  for (int64_t b = 0; b < 3000; ++b) {
    m.block_request[static_cast<size_t>(b)] = b % 5;
    m.block_logical[static_cast<size_t>(b)] = b / 5;
    for (int64_t p = 0; p < 16; ++p) m.roles[static_cast<size_t>(b * 16 + p)] = SlotRole::context;
  }
  SlotDamage s = r.map.damage.at(0);
  m.damage.clear();
  for (int64_t b : {17, 4321}) {
    s.block = b;
    s.pos = 3;
    m.damage.push_back(s);
    m.block_cells[static_cast<size_t>(b)] = s.cells;
  }
  r.kase.cache.num_blocks = 6000;
  r.kase.cache.block_size = 16;
  const std::string h = render_report_html(r);
  EXPECT_NE(h.find("id=\"cache-map-blocks\""), std::string::npos);
  EXPECT_NE(h.find("id=\"cache-map-damaged\""), std::string::npos);
  EXPECT_EQ(h.find("id=\"cache-map-slots\""), std::string::npos);
  // Squares: one per block; detail rows: the two damaged blocks only.
  EXPECT_EQ(count(h, "<g class=\"blk\""), 2u);
  EXPECT_LT(h.size(), 3u << 20) << "a 6000-block cache must stay a page a browser opens at once";
}

TEST(ReportMarkdown, hasTheSentencesTheMatrixAndTheReproduction) {
  const std::string md = render_report_markdown(cross_request_report());
  EXPECT_EQ(md.rfind("# kvfuzz report: FAIL cross_request_write", 0), 0u) << md;
  EXPECT_NE(md.find("**cross_request_write**: request 0 (token 3) wrote into request 1's block 0 slot 2"), std::string::npos) << md;
  EXPECT_NE(md.find("| request 1 | 16 |"), std::string::npos) << md;
  EXPECT_NE(md.find("```sh\nkvfuzz replay found/abc.json --target cuda-emu\n"), std::string::npos);
}

TEST(ReportMarkdown, campaignSummaryListsEveryFailureWithItsReport) {
  CampaignResult r;
  r.target = "cuda-emu";
  r.seed = "1";
  r.cases = 3;
  r.passed = 2;
  r.failed = 1;
  FailureRecord f;
  f.file = "found/abc.json";
  Finding x;
  x.kind = FindingKind::oob_write;
  x.sentence = "the kernel wrote 2 bytes into the guard band after the cache buffer";
  f.verdict.findings = {x};
  f.replay_command = "kvfuzz replay found/abc.json --target cuda-emu";
  r.failures.push_back(f);
  const std::string md = campaign_summary_markdown(r);
  EXPECT_NE(md.find("1 failed"), std::string::npos);
  EXPECT_NE(md.find("found/abc.report/report.html"), std::string::npos);
  EXPECT_NE(md.find("kvfuzz replay found/abc.json --target cuda-emu"), std::string::npos);
  EXPECT_EQ(md.substr(md.rfind("kvfuzz: ")), "kvfuzz: 2 passed, 1 failed\n");
}

}  // namespace
}  // namespace kvf
