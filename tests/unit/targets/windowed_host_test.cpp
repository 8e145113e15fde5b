// windowed_host_test.cpp — Target::run_windowed()'s host path (src/targets/windowed_host.cpp) and
// run_case() in windowed mode: the cache outside the windows is filled as the kernel touches it,
// and whatever the kernel changed there comes back.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

#include "arena/windows.h"
#include "campaign/check.h"
#include "campaign/isolation.h"
#include "gen/materialize.h"
#include "golden/golden.h"
#include "values/payload.h"

namespace kvf {
namespace {

// A paged case whose cache is 50x its windows.
Case big_case(uint64_t seed) {
  Genotype g;
  g.layout = Layout::paged_nhd;
  g.block_size = 8;
  g.num_heads = 2;
  g.head_dim = 16;
  g.requests = {{5, 3}, {0, 2}};
  g.spare_blocks = 4000;
  g.layout_seed = seed;
  return materialize(g);
}

// A free-block element no window covers.
int64_t outside_free_elem(const Case& c) {
  const ArenaLayout l = plan_arena(c);
  const WindowPlan plan = plan_windows(c, l);
  const CacheLocator loc(c);
  const std::vector<ElemRange> outside = cache_outside(plan, l);
  const ElemRange& mid = outside[outside.size() / 2];
  for (int64_t e = (mid.begin + mid.end) / 2; e < mid.end; ++e)
    if (loc.locate(e).role == CacheCell::Role::free_block) return e;
  return -1;
}

// The golden model, plus one planted write, or a write far outside the image.
class PlantingTarget final : public Target {
 public:
  PlantingTarget(int64_t elem, uint32_t bits, bool wild = false) : elem_(elem), bits_(bits), wild_(wild) {}
  const TargetInfo& info() const override { return info_; }
  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    golden::golden_append(c, image, layout);
    if (wild_) image[-(int64_t{1} << 34)] = std::byte{1};  // 16 GiB before the image: in the fence
    if (elem_ >= 0) store_elem(image + layout.cache_begin, elem_, dtype_size(c.cache_dtype), bits_);
    return {};
  }

 private:
  int64_t elem_;
  uint32_t bits_;
  bool wild_;
  TargetInfo info_{"planting", "test", "", "exact", false};
};

IsolationOptions windowed(bool fork) {
  IsolationOptions o;
  o.fork = fork;
  o.windowed_above_bytes = 0;  // every case windowed
  return o;
}

TEST(WindowedHost, cudaEmuPassesALargeCacheWithoutTouchingItsFreeBlocks) {
  auto target = make_target("cuda-emu");
  for (bool fork : {false, true}) {
    Isolator isolator(*target, windowed(fork));
    const Case c = big_case(3);
    const CaseRun r = run_case(isolator, c);
    EXPECT_TRUE(r.actual.windowed());
    EXPECT_TRUE(r.outside.checked);
    EXPECT_TRUE(r.verdict.pass()) << (r.verdict.pass() ? "" : r.verdict.findings.front().sentence);
    EXPECT_LT(r.actual.materialized().size(), 64u);
  }
}

TEST(WindowedHost, reportsAWriteIntoAFreeBlockOutsideTheWindows) {
  const Case c = big_case(4);
  const int64_t e = outside_free_elem(c);
  ASSERT_GE(e, 0);
  for (bool fork : {false, true}) {
    PlantingTarget target(e, 0x1234);
    Isolator isolator(target, windowed(fork));
    const CaseRun r = run_case(isolator, c);
    ASSERT_EQ(r.status, IsolatedStatus::ok);
    EXPECT_EQ(r.outside.differing_elems, 1);
    ASSERT_EQ(r.outside.runs.size(), 1u);
    EXPECT_EQ(r.outside.runs[0].begin, e);
    EXPECT_EQ(load_cache_bits(r.outside.runs[0].bytes.data(), 0, 2), 0x1234u);
    ASSERT_FALSE(r.verdict.pass());
    EXPECT_EQ(r.verdict.findings.front().kind, FindingKind::stray_write) << r.verdict.findings.front().sentence;
    EXPECT_NE(r.verdict.findings.front().sentence.find("free block"), std::string::npos);
  }
}

TEST(WindowedHost, writingTheFillBackIsNoDifference) {
  // The kernel touches a page outside the windows but leaves its bits as they were.
  const Case c = big_case(5);
  const int64_t e = outside_free_elem(c);
  PlantingTarget target(e, golden::canary_bits(DType::f16, golden::Canary::free_block));
  Isolator isolator(target, windowed(true));
  const CaseRun r = run_case(isolator, c);
  EXPECT_TRUE(r.outside.checked);
  EXPECT_TRUE(r.verdict.pass());
}

TEST(WindowedHost, aWildWriteStillCrashesTheWorker) {
  const Case c = big_case(6);
  // The page-fill handler is installed in this process by now (the no-fork runs above) and inherited
  // by the worker: faults it does not own, and signals sent by raise(), must still kill.
  PlantingTarget target(-1, 0, true);
  Isolator isolator(target, windowed(true));
  const CaseRun r = run_case(isolator, c);
  EXPECT_EQ(r.status, IsolatedStatus::crash);
  EXPECT_EQ(r.verdict.findings.front().kind, FindingKind::crash);

  class Raising final : public Target {
   public:
    const TargetInfo& info() const override { return info_; }
    RunResult run(const Case&, std::byte*, const ArenaLayout&) override {
      std::raise(SIGSEGV);
      return {};
    }
    TargetInfo info_{"raising", "test", "", "exact", false};
  } raising;
  Isolator isolator2(raising, windowed(true));
  EXPECT_EQ(run_case(isolator2, c).status, IsolatedStatus::crash);
}

}  // namespace
}  // namespace kvf
