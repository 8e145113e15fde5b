// isolation_test.cpp — a faulting, hanging or refusing kernel becomes a finding, not a dead kvfuzz.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <thread>

#include "campaign/check.h"
#include "campaign/isolation.h"
#include "gen/materialize.h"
#include "golden/golden.h"

namespace kvf {
namespace {

// A target whose behaviour each test chooses.
class FakeTarget final : public Target {
 public:
  enum class Mode { segfault, hang, refuse, skip, write_guard, golden, slow_golden };
  explicit FakeTarget(Mode m) : mode_(m) {}
  const TargetInfo& info() const override { return info_; }
  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    switch (mode_) {
      case Mode::segfault: std::raise(SIGSEGV); break;
      case Mode::hang: std::this_thread::sleep_for(std::chrono::seconds(60)); break;
      case Mode::refuse: return {RunStatus::launch_error, "no specialisation"};
      case Mode::skip: return {RunStatus::skip, "head_dim 3 is not implemented"};
      case Mode::write_guard: image[0] = std::byte{0}; break;  // first byte of the image is guard
      case Mode::slow_golden:  // the golden model after 500 ms: a target whose run dominates the case
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        [[fallthrough]];
      case Mode::golden: {
        Arena a(layout);
        std::memcpy(a.data(), image, layout.total_bytes);
        golden::golden_append(c, a);
        std::memcpy(image, a.data(), layout.total_bytes);
        break;
      }
    }
    return {};
  }

 private:
  Mode mode_;
  TargetInfo info_{"fake", "", "", "exact", false};
};

Case small_case() {
  Genotype g;
  g.requests = {{2, 3}};
  g.layout_seed = 42;
  return materialize(g);
}

TEST(Isolation, reportsASegfaultingKernelAsCrash) {
  FakeTarget t(FakeTarget::Mode::segfault);
  const CaseOutcome o = check_case(t, small_case(), CheckOptions{});
  ASSERT_FALSE(o.pass());
  EXPECT_EQ(o.first_kind(), "crash");
  EXPECT_NE(o.verdict.findings.front().sentence.find("signal"), std::string::npos);
}

TEST(Isolation, killsAHangingKernelAfterTheTimeout) {
  FakeTarget t(FakeTarget::Mode::hang);
  CheckOptions opts;
  opts.isolation.timeout_s = 0.5;
  const auto start = std::chrono::steady_clock::now();
  const CaseOutcome o = check_case(t, small_case(), opts);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(o.first_kind(), "timeout");
}

TEST(Isolation, reportsARefusedLaunch) {
  FakeTarget t(FakeTarget::Mode::refuse);
  const CaseOutcome o = check_case(t, small_case(), CheckOptions{});
  EXPECT_EQ(o.first_kind(), "launch_error");
  EXPECT_NE(o.verdict.findings.front().sentence.find("no specialisation"), std::string::npos);
}

TEST(Isolation, aSkippedCaseIsNeitherAPassNorAFindingInAWorkerOrInProcess) {
  for (bool fork : {true, false}) {
    FakeTarget t(FakeTarget::Mode::skip);
    CheckOptions opts;
    opts.isolation.fork = fork;
    const CaseOutcome o = check_case(t, small_case(), opts);
    EXPECT_FALSE(o.pass()) << "fork=" << fork;
    EXPECT_TRUE(o.verdict.findings.empty()) << "fork=" << fork;
    EXPECT_EQ(o.first_kind(), "") << "fork=" << fork;
    EXPECT_EQ(o.skipped, "skipped by the kernel: head_dim 3 is not implemented") << "fork=" << fork;
  }
}

TEST(Isolation, bringsTheChildsWritesBackForVerification) {
  FakeTarget t(FakeTarget::Mode::write_guard);
  const CaseOutcome o = check_case(t, small_case(), CheckOptions{});
  EXPECT_EQ(o.first_kind(), "oob_write");
}

TEST(Isolation, aKernelThatDoesWhatTheGoldenModelDoesPasses) {
  for (bool fork : {true, false}) {
    FakeTarget t(FakeTarget::Mode::golden);
    CheckOptions opts;
    opts.isolation.fork = fork;
    EXPECT_TRUE(check_case(t, small_case(), opts).pass()) << "fork=" << fork;
  }
}

// The case's time lands in the stage that spent it: a target that sleeps 500 ms shows as the target
// run, not as the hand-off to the worker or the copy back (measured on the second case, once the
// worker has started). In process the target run holds the whole sleep; in a worker it starts when
// the harness has read the worker's "launching" mark, so a harness scheduled late moves some of the
// sleep into the hand-off: the test allows half of it. The stages never add up to more than the case.
TEST(Isolation, stagesPutTheTargetsTimeInTheTargetRunInAWorkerAndInProcess) {
  for (bool fork : {true, false}) {
    FakeTarget t(FakeTarget::Mode::slow_golden);
    IsolationOptions opts;
    opts.fork = fork;
    Isolator isolator(t, opts);
    ASSERT_TRUE(check_case(isolator, small_case(), {}).pass()) << "fork=" << fork;
    const CaseOutcome o = check_case(isolator, small_case(), {});
    ASSERT_TRUE(o.pass()) << "fork=" << fork;
    const StageSeconds& s = o.stages;
    EXPECT_GE(s.target, fork ? 0.25 : 0.5) << "fork=" << fork;
    EXPECT_GE(s.target + s.handoff, 0.5) << "fork=" << fork;
    EXPECT_LT(s.handoff, 0.25) << "fork=" << fork;
    EXPECT_LT(s.copy_back, 0.25) << "fork=" << fork;
    for (double v : {s.arena_fill, s.golden, s.handoff, s.copy_back, s.diff}) EXPECT_GE(v, 0.0);
    EXPECT_EQ(s.draw, 0.0);  // drawing is the campaign's
    if (!fork) EXPECT_EQ(s.copy_back, 0.0);
    EXPECT_LE(s.total(), o.seconds) << "fork=" << fork;
  }
}

}  // namespace
}  // namespace kvf
