// types_test.cpp — enum names round-trip and element sizes.
//   ./build/tests/kvfuzz_case_tests --gtest_filter='Types.*'
#include <gtest/gtest.h>

#include "case/types.h"

namespace kvf {
namespace {

TEST(Types, namesEveryDTypeAndReadsItBack) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    EXPECT_EQ(dtype_from_string(to_string(t)), t);
  }
  EXPECT_EQ(to_string(DType::bf16), "bf16");
  EXPECT_EQ(to_string(DType::fp8_e4m3), "fp8_e4m3");
  EXPECT_EQ(to_string(DType::fp8_e5m2), "fp8_e5m2");
  EXPECT_EQ(to_string(DType::int8), "int8");
  EXPECT_EQ(dtype_from_string("fp8"), std::nullopt);
  EXPECT_EQ(dtype_from_string("fp16"), std::nullopt);
  EXPECT_EQ(dtype_from_string(""), std::nullopt);
}

TEST(Types, namesEveryIndexTypeAndReadsItBack) {
  for (IndexType t : {IndexType::i32, IndexType::i64}) EXPECT_EQ(index_type_from_string(to_string(t)), t);
  EXPECT_EQ(to_string(IndexType::i32), "i32");
  EXPECT_EQ(index_type_from_string("int64"), std::nullopt);
}

TEST(Types, namesEveryLayoutAndReadsItBack) {
  for (Layout l : {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd, Layout::contiguous_bhsd,
                   Layout::packed_kv_nhd}) {
    EXPECT_EQ(layout_from_string(to_string(l)), l);
  }
  EXPECT_EQ(to_string(Layout::contiguous_bhsd), "contiguous_bhsd");
  EXPECT_EQ(layout_from_string("PAGED_NHD"), std::nullopt);
}

TEST(Types, namesEveryValueDistAndReadsItBack) {
  for (ValueDist d : {ValueDist::finite, ValueDist::special, ValueDist::constant, ValueDist::ties}) {
    EXPECT_EQ(value_dist_from_string(to_string(d)), d);
  }
  EXPECT_EQ(to_string(ValueDist::ties), "ties");
  EXPECT_EQ(value_dist_from_string("normal"), std::nullopt);
}

TEST(Types, namesEveryScaleKindAndReadsItBack) {
  for (ScaleKind k : {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_block,
                      ScaleKind::per_token_head}) {
    EXPECT_EQ(scale_kind_from_string(to_string(k)), k);
  }
  EXPECT_EQ(to_string(ScaleKind::none), "none");
  EXPECT_EQ(to_string(ScaleKind::per_token_head), "per_token_head");
  EXPECT_EQ(scale_kind_from_string("per_token"), std::nullopt);
  EXPECT_EQ(to_string(static_cast<ScaleKind>(9)), "?");
}

TEST(Types, namesEveryScaleDistAndReadsItBack) {
  for (ScaleDist d : {ScaleDist::unit, ScaleDist::pow2, ScaleDist::random, ScaleDist::extreme}) {
    EXPECT_EQ(scale_dist_from_string(to_string(d)), d);
  }
  EXPECT_EQ(to_string(ScaleDist::pow2), "pow2");
  EXPECT_EQ(scale_dist_from_string("one"), std::nullopt);
}

TEST(Types, tellsQuantisedDTypes) {
  for (DType t : {DType::f16, DType::bf16, DType::f32}) EXPECT_FALSE(is_quantized(t)) << to_string(t);
  for (DType t : {DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) EXPECT_TRUE(is_quantized(t)) << to_string(t);
}

TEST(Types, countsStaticScalesPerTensor) {
  EXPECT_EQ(static_scale_count(ScaleKind::none, 8, 100), 0);
  EXPECT_EQ(static_scale_count(ScaleKind::per_tensor, 8, 100), 1);
  EXPECT_EQ(static_scale_count(ScaleKind::per_head, 8, 100), 8);
  EXPECT_EQ(static_scale_count(ScaleKind::per_block, 8, 100), 800);
  EXPECT_EQ(static_scale_count(ScaleKind::per_token_head, 8, 100), 0);  // dynamic: a scale cache instead
  EXPECT_EQ(static_scale_count(ScaleKind::per_block, 1024, INT64_MAX), INT64_MAX);  // saturates
}

TEST(Types, namesAnOutOfRangeValueWithAQuestionMark) {
  EXPECT_EQ(to_string(static_cast<Layout>(200)), "?");
  EXPECT_EQ(dtype_size(static_cast<DType>(99)), 0);
}

TEST(Types, givesElementSizes) {
  EXPECT_EQ(dtype_size(DType::f16), 2);
  EXPECT_EQ(dtype_size(DType::bf16), 2);
  EXPECT_EQ(dtype_size(DType::f32), 4);
  EXPECT_EQ(dtype_size(DType::fp8_e4m3), 1);
  EXPECT_EQ(dtype_size(DType::fp8_e5m2), 1);
  EXPECT_EQ(dtype_size(DType::int8), 1);
  EXPECT_EQ(dtype_size(DType::fp4_e2m1), 1);  // the byte that holds it
  EXPECT_EQ(dtype_bits(DType::fp4_e2m1), 4);
  EXPECT_EQ(dtype_bits(DType::uint4), 4);
  EXPECT_EQ(dtype_bits(DType::fp8_e8m0), 8);
  EXPECT_EQ(dtype_bits(DType::f32), 32);
  EXPECT_EQ(index_type_size(IndexType::i32), 4);
  EXPECT_EQ(index_type_size(IndexType::i64), 8);
}

}  // namespace
}  // namespace kvf
