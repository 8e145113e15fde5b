// types_test.cpp — enum names round-trip and element sizes.
//   ./build/tests/kvfuzz_case_tests --gtest_filter='Types.*'
#include <gtest/gtest.h>

#include "case/types.h"

namespace kvf {
namespace {

TEST(Types, namesEveryDTypeAndReadsItBack) {
  for (DType t : {DType::f16, DType::bf16, DType::f32}) EXPECT_EQ(dtype_from_string(to_string(t)), t);
  EXPECT_EQ(to_string(DType::bf16), "bf16");
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
  for (ValueDist d : {ValueDist::finite, ValueDist::special, ValueDist::constant}) {
    EXPECT_EQ(value_dist_from_string(to_string(d)), d);
  }
  EXPECT_EQ(value_dist_from_string("normal"), std::nullopt);
}

TEST(Types, namesAnOutOfRangeValueWithAQuestionMark) {
  EXPECT_EQ(to_string(static_cast<Layout>(200)), "?");
  EXPECT_EQ(dtype_size(static_cast<DType>(9)), 0);
}

TEST(Types, givesElementSizes) {
  EXPECT_EQ(dtype_size(DType::f16), 2);
  EXPECT_EQ(dtype_size(DType::bf16), 2);
  EXPECT_EQ(dtype_size(DType::f32), 4);
  EXPECT_EQ(index_type_size(IndexType::i32), 4);
  EXPECT_EQ(index_type_size(IndexType::i64), 8);
}

}  // namespace
}  // namespace kvf
