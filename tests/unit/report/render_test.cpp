// render_test.cpp — the closing line and the JSON summary other tools read.
#include <gtest/gtest.h>

#include "report/render.h"

namespace kvf {
namespace {

TEST(Render, summaryLineIsTheOneCiReads) {
  EXPECT_EQ(summary_line(3000, 0), "kvfuzz: 3000 passed, 0 failed");
  EXPECT_EQ(summary_line(36, 1), "kvfuzz: 36 passed, 1 failed");
}

TEST(Render, campaignJsonKeepsTheSeedAsAStringAndCountsKinds) {
  CampaignResult r;
  r.target = "cuda-emu";
  r.profile = "default";
  r.seed = "18446744073709551615";  // UINT64_MAX: would lose precision as a JSON number in jq/JS
  r.cases = 10;
  r.passed = 9;
  r.failed = 1;
  r.seconds = 2;
  FailureRecord f;
  Finding x;
  x.kind = FindingKind::padding_leak;
  x.sentence = "padding row 1 (slot -1) leaked into free block 2";
  f.verdict.findings = {x, x};
  f.file = "out/abc.json";
  f.replay_command = "kvfuzz replay out/abc.json --target cuda-emu";
  r.failures.push_back(f);
  const nlohmann::json j = campaign_json(r, "kvfuzz run");
  EXPECT_EQ(j.at("seed"), "18446744073709551615");
  EXPECT_EQ(j.at("cases_per_second"), 5.0);
  EXPECT_EQ(j.at("findings_by_kind").at("padding_leak"), 2);
  EXPECT_EQ(j.at("failures").at(0).at("replay"), "kvfuzz replay out/abc.json --target cuda-emu");
}

TEST(Render, stagesAreInTheJsonAlwaysAndOnTheTerminalWithStats) {
  CampaignResult r;
  r.cases = 4;
  r.passed = 4;
  r.stages.draw = 0.001;
  r.stages.arena_fill = 0.002;
  r.stages.golden = 0.001;
  r.stages.target = 0.004;
  r.stages.diff = 0.002;
  const nlohmann::json j = campaign_json(r, "kvfuzz run");
  EXPECT_EQ(j.at("stages").at("target"), 0.004);
  EXPECT_EQ(j.at("stages").at("handoff"), 0.0);
  EXPECT_EQ(j.at("stages").size(), 7u);
  EXPECT_EQ(render_stages(r), "");  // without --stats
  r.stats["layout=paged_nhd"] = 4;
  EXPECT_EQ(render_stages(r),
            "kvfuzz: host time per case by stage (µs of a campaign thread; 2500.0 in all): draw 250.0 (10%), arena fill 500.0 (20%), "
            "golden model 250.0 (10%), hand-off 0.0 (0%), target run 1000.0 (40%), copy back 0.0 (0%), diff 500.0 (20%)\n");
}

TEST(Render, failureTextCarriesTheReproductionCommand) {
  FailureRecord f;
  Finding x;
  x.kind = FindingKind::cross_request_write;
  x.sentence = "request 3 (tokens 16..19) wrote into request 7's block 12 slots 0..3, heads 0..7";
  f.verdict.findings = {x};
  f.replay_command = "kvfuzz replay x.json --target cuda-emu";
  const std::string text = render_failure(f);
  EXPECT_NE(text.find("cross_request_write: request 3"), std::string::npos);
  EXPECT_NE(text.find("reproduce: kvfuzz replay x.json --target cuda-emu"), std::string::npos);
}

TEST(Render, skippedCasesAreCountedByReasonInTextAndJson) {
  CampaignResult r;
  EXPECT_EQ(render_skipped(r), "");  // kvfuzz's own targets: nothing skipped, nothing said
  r.cases = 10;
  r.passed = 10;
  r.skipped = 5;
  r.replaced = 4;
  r.skip_reasons = {{"layout packed_kv_nhd", 3}, {"cache dtype int8", 2}};
  EXPECT_EQ(render_skipped(r),
            "kvfuzz: skipped 5 cases outside the target's capabilities (layout packed_kv_nhd: 3, cache dtype int8: 2); "
            "4 replaced by cases drawn inside them, 1 not run\n");
  const nlohmann::json j = campaign_json(r, "kvfuzz run");
  EXPECT_EQ(j.at("skipped").at("cases"), 5);
  EXPECT_EQ(j.at("skipped").at("not_run"), 1);
  EXPECT_EQ(j.at("skipped").at("reasons").at("cache dtype int8"), 2);
}

TEST(Render, casesTheKernelSkippedAreCountedApartFromCapabilitySkips) {
  CampaignResult r;
  r.skipped = 4;
  r.replaced = 4;
  r.skip_reasons = {{"skipped by the kernel: head_dim below 8", 4}};
  EXPECT_EQ(render_skipped(r), "kvfuzz: skipped 4 cases by the kernel (head_dim below 8: 4); 4 replaced by other draws\n");
  r.skipped = 7;
  r.replaced = 6;
  r.skip_reasons = {{"layout packed_kv_nhd", 3}, {"skipped by the kernel: head_dim below 8", 4}};
  EXPECT_EQ(render_skipped(r),
            "kvfuzz: skipped 7 cases: 3 outside the target's capabilities (layout packed_kv_nhd: 3), 4 by the kernel "
            "(head_dim below 8: 4); 6 replaced by other draws, 1 not run\n");
  ReplayResult files;
  files.skipped = 2;
  files.skip_reasons = {{"skipped by the kernel: empty append", 1}, {"family mla", 1}};
  EXPECT_EQ(render_skipped(files),
            "kvfuzz: skipped 2 case files: 1 outside the target's capabilities (family mla: 1), 1 by the kernel "
            "(empty append: 1)\n");
}

TEST(Render, filesThatAreNotCasesAreNotedAndListedInTheReplayJson) {
  ReplayResult r;
  r.target = "cuda-emu";
  EXPECT_EQ(render_not_cases(r), "");
  r.not_cases = {SkippedFile{"corpus/keep.json", "schema kvfuzz-summary"}};
  r.skipped_files = {SkippedFile{"corpus/p.json", "layout packed_kv_nhd"}};
  EXPECT_EQ(render_not_cases(r), "kvfuzz: note: corpus/keep.json is not a case file (schema kvfuzz-summary), not replayed\n");
  const nlohmann::json j = replay_json(r, "kvfuzz replay corpus");
  EXPECT_EQ(j.at("not_cases").at(0).at("file"), "corpus/keep.json");
  EXPECT_EQ(j.at("not_cases").at(0).at("reason"), "schema kvfuzz-summary");
  EXPECT_EQ(j.at("skipped").at("files").at(0).at("file"), "corpus/p.json");
}

}  // namespace
}  // namespace kvf
