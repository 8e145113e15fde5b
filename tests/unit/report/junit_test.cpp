// junit_test.cpp — JUnit XML (src/report/junit.h): structure per harness-anchors §5.2, escaping.
#include <gtest/gtest.h>

#include "report/junit.h"

namespace kvf {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

Finding finding(FindingKind k, const std::string& sentence) {
  Finding f;
  f.kind = k;
  f.sentence = sentence;
  return f;
}

TEST(Junit, campaignIsOneTestcaseWhoseFailureCarriesTheSummaryAndTheReproduction) {
  CampaignResult r;
  r.target = "cuda-emu";
  r.seed = "7";
  r.cases = 20;
  r.passed = 19;
  r.failed = 1;
  FailureRecord f;
  f.file = "found/abc.json";
  f.verdict.findings = {finding(FindingKind::cross_request_write, "request 3 (tokens 16..19) wrote into request 7's block 12 <&>")};
  f.replay_command = "kvfuzz replay found/abc.json --target cuda-emu";
  r.failures.push_back(f);
  const std::string x = campaign_junit(r, "kvfuzz run --seed 7");
  EXPECT_EQ(count(x, "<testsuite "), 1u);
  EXPECT_EQ(count(x, "<testcase "), 1u);
  EXPECT_NE(x.find("<testsuite name=\"cuda-emu\" tests=\"1\" failures=\"1\" errors=\"0\""), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"cross_request_write: request 3 (tokens 16..19) wrote into request 7&apos;s block 12 &lt;&amp;&gt;\" "
                   "type=\"cross_request_write\">"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("reproduce: kvfuzz replay found/abc.json --target cuda-emu"), std::string::npos);
  EXPECT_NE(x.find("found/abc.report/report.html"), std::string::npos);
  EXPECT_NE(x.find("<property name=\"seed\" value=\"7\"/>"), std::string::npos);
}

TEST(Junit, replayHasATestcasePerFileAndACrashIsAnError) {
  ReplayResult r;
  r.target = "cuda-emu";
  ReplayItem ok;
  ok.file = "corpus/a.json";
  ok.expected = Expectation{};
  ok.as_expected = true;
  ReplayItem crash;
  crash.file = "corpus/b.json";
  crash.expected = Expectation{};
  crash.outcome.verdict.findings = {finding(FindingKind::crash, "the kernel crashed: signal 11")};
  ReplayItem leak;
  leak.file = "corpus/c.json";
  leak.expected = Expectation{};
  leak.outcome.verdict.findings = {finding(FindingKind::padding_leak, "padding row 1 leaked")};
  r.items = {ok, crash, leak};
  const std::string x = replay_junit(r, "kvfuzz replay corpus");
  EXPECT_EQ(count(x, "<testcase "), 3u);
  EXPECT_NE(x.find("tests=\"3\" failures=\"1\" errors=\"1\""), std::string::npos) << x;
  EXPECT_EQ(count(x, "<error "), 1u);
  EXPECT_EQ(count(x, "<failure "), 1u);
  EXPECT_NE(x.find("name=\"corpus/c.json\""), std::string::npos);
  EXPECT_NE(x.find("expected pass, got fail:padding_leak: padding row 1 leaked"), std::string::npos);
}

TEST(Junit, campaignTestNameIsTheSameWhateverTheSeedAndCaseCount) {
  CampaignResult a, b;
  a.target = b.target = "cuda-emu";
  a.profile = b.profile = "smoke";
  a.seed = "3";
  a.cases = a.passed = 661;
  b.seed = "18446744073709551615";
  b.cases = b.passed = 20;
  const std::string xa = campaign_junit(a, "kvfuzz run --seed 3"), xb = campaign_junit(b, "kvfuzz run");
  const std::string name = "<testcase classname=\"kvfuzz.run.cuda-emu\" name=\"campaign, profile smoke\"";
  EXPECT_NE(xa.find(name), std::string::npos) << xa;
  EXPECT_NE(xb.find(name), std::string::npos) << xb;
  EXPECT_NE(xa.find("<property name=\"cases\" value=\"661\"/>"), std::string::npos);
}

TEST(Junit, replayListsFilesOutsideTheCapabilitiesAsSkippedTestcases) {
  ReplayResult r;
  r.target = "plugin:./naive.so";
  ReplayItem ok;
  ok.file = "corpus/a.json";
  ok.expected = Expectation{};
  ok.as_expected = true;
  r.items = {ok};
  r.skipped = 1;
  r.skip_reasons["layout packed_kv_nhd"] = 1;
  r.skipped_files = {SkippedFile{"corpus/p.json", "layout packed_kv_nhd"}};
  const std::string x = replay_junit(r, "kvfuzz replay corpus");
  EXPECT_EQ(count(x, "<testcase "), 2u);
  EXPECT_NE(x.find("tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"corpus/p.json\" time=\"0.000\">\n      <skipped message=\"outside the target&apos;s "
                   "capabilities: layout packed_kv_nhd\"/>"),
            std::string::npos)
      << x;
}

TEST(Junit, escapesWhatXmlForbids) {
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
  EXPECT_EQ(xml_escape(std::string("x\x01y")), "x\xEF\xBF\xBDy");
  EXPECT_EQ(xml_escape("tab\tnl\n"), "tab\tnl\n");
}

}  // namespace
}  // namespace kvf
