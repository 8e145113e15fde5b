// cuda_emu_test.cpp — the emulated CUDA kernel agrees with the golden model on hand-picked shapes,
// and append_params() points into the right arena sections.
#include <gtest/gtest.h>

#include "campaign/check.h"
#include "gen/materialize.h"
#include "targets/target.h"

namespace kvf {
namespace {

TEST(CudaEmu, isListedAndNeedsNoGpu) {
  bool found = false;
  for (const TargetInfo& t : list_targets())
    if (t.name == "cuda-emu") found = !t.needs_gpu && t.tolerance == "exact";
  EXPECT_TRUE(found);
}

TEST(CudaEmu, unknownTargetNamesTheKnownOnes) {
  try {
    make_target("nope");
    FAIL() << "expected InputError";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cuda-emu"), std::string::npos);
  }
}

TEST(CudaEmu, matchesTheGoldenModelOnEveryLayoutAndDtypePair) {
  auto target = make_target("cuda-emu");
  for (Layout layout : {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                        Layout::packed_kv_nhd})
    for (DType in : {DType::f16, DType::bf16, DType::f32})
      for (DType cache : {DType::f16, DType::bf16, DType::f32})
        for (bool irregular : {false, true}) {
          Genotype g;
          g.layout = layout;
          g.block_size = 5;
          g.num_heads = 3;
          g.head_dim = 13;  // a full 16-byte chunk plus a tail for every dtype
          g.input_dtype = in;
          g.cache_dtype = cache;
          g.requests = {{4, 7}, {0, 1}, {9, 2}};
          g.tail_padding = 2;
          g.interleaved_padding = 1;
          g.invalid_slots = 1;
          g.extra_input_rows = 2;
          g.spare_blocks = 2;
          g.irregular = irregular;
          g.dist = ValueDist::special;
          g.layout_seed = 1234;
          const CaseOutcome o = check_case(*target, materialize(g), CheckOptions{});
          EXPECT_TRUE(o.pass()) << to_string(layout) << " " << to_string(in) << "->" << to_string(cache)
                                << " irregular=" << irregular << ": "
                                << (o.pass() ? "" : o.verdict.findings.front().sentence);
        }
}

TEST(CudaEmu, emptyAndAllPaddingBatchesChangeNothing) {
  auto target = make_target("cuda-emu");
  Genotype empty;
  empty.requests = {{3, 0}};
  empty.layout_seed = 9;
  EXPECT_TRUE(check_case(*target, materialize(empty), CheckOptions{}).pass());
  Genotype padding = empty;
  padding.tail_padding = 4;
  padding.invalid_slots = 2;
  EXPECT_TRUE(check_case(*target, materialize(padding), CheckOptions{}).pass());
}

}  // namespace
}  // namespace kvf
