// isolation_test.cpp — a faulting, hanging or refusing kernel becomes a finding, not a dead kvfuzz.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

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

// A kernel whose first try overwrites the whole image and then dies; every later try (on a fresh
// worker) does what the golden model does. Tries are counted in memory shared with the workers.
class DiesOnceAfterScribbling final : public Target {
 public:
  DiesOnceAfterScribbling()
      : tries_(static_cast<int*>(mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0))) {
    *tries_ = 0;
  }
  ~DiesOnceAfterScribbling() override { munmap(tries_, sizeof(int)); }
  const TargetInfo& info() const override { return info_; }
  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    if ((*tries_)++ == 0) {
      std::memset(image, 0x5A, static_cast<size_t>(layout.total_bytes));
      _exit(9);
    }
    Arena a(layout);
    std::memcpy(a.data(), image, static_cast<size_t>(layout.total_bytes));
    golden::golden_append(c, a);
    std::memcpy(image, a.data(), static_cast<size_t>(layout.total_bytes));
    return {};
  }
  int tries() const { return *tries_; }

 private:
  int* tries_;  // shared with every worker
  TargetInfo info_{"dies-once", "", "", "exact", false};
};

// The shared image still holds what the dead try wrote; the retry must start from the pre-run arena.
TEST(Isolation, aRetryStartsFromThePreRunArenaNotFromWhatTheDeadTryLeft) {
  DiesOnceAfterScribbling t;
  Isolator isolator(t, IsolationOptions{});
  const CaseRun r = run_case(isolator, small_case());
  EXPECT_EQ(t.tries(), 2);
  EXPECT_EQ(isolator.events().deaths_retried, 1);
  EXPECT_EQ(r.status, IsolatedStatus::ok);
  EXPECT_TRUE(r.verdict.pass()) << r.verdict.findings.front().sentence;
}

// The initial arena is only read: after a run in a worker or in process it is still the pre-run image.
TEST(Isolation, leavesTheInitialArenaAsItWas) {
  for (bool fork : {true, false}) {
    FakeTarget t(FakeTarget::Mode::write_guard);
    IsolationOptions opts;
    opts.fork = fork;
    Isolator isolator(t, opts);
    const Case c = small_case();
    const Arena initial = make_initial_arena(c);
    Arena actual = Arena::shaped_like(initial);
    ASSERT_EQ(isolator.run(c, initial, actual).status, IsolatedStatus::ok) << "fork=" << fork;
    const Arena fresh = make_initial_arena(c);
    EXPECT_EQ(std::memcmp(initial.data(), fresh.data(), static_cast<size_t>(initial.size())), 0) << "fork=" << fork;
    EXPECT_EQ(actual.data()[0], std::byte{0}) << "fork=" << fork;  // the target's write came back
    EXPECT_EQ(std::memcmp(actual.data() + 1, fresh.data() + 1, static_cast<size_t>(initial.size() - 1)), 0) << "fork=" << fork;
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
