// format_test.cpp — the format model (kernels/cuda/kv_format.cuh): field_offset() against index
// formulas written out independently (the tensor shapes peers document), the v1 geometry as a
// special case, and FieldShape::locate() as the exact inverse of field_offset().
//
//   ./build/tests/kvfuzz_verify_tests --gtest_filter='Format*'
#include <gtest/gtest.h>

#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "kv_format.cuh"

namespace kvf {
namespace {

Mode mode2(int64_t e0, int64_t s0, int64_t e1, int64_t s1) {
  Mode m;
  m.rank = 2;
  m.extent[0] = e0;
  m.stride[0] = s0;
  m.extent[1] = e1;
  m.stride[1] = s1;
  return m;
}

// vLLM's legacy K cache [num_blocks, H, D/x, block_size, x]: element (b, p, h, d) sits at the
// row-major index of [b][h][d / x][p][d % x].
TEST(Format, xPackedKeyMatchesTheFiveDimensionalTensorIndex) {
  const int64_t nb = 5, bs = 16, H = 3, D = 32, x = 8;
  FieldLayout k;
  k.mode[0] = flat_mode(nb, H * (D / x) * bs * x);
  k.mode[1] = flat_mode(bs, x);
  k.mode[2] = flat_mode(H, (D / x) * bs * x);
  k.mode[3] = mode2(x, 1, D / x, bs * x);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t p = 0; p < bs; ++p)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t tensor = (((b * H + h) * (D / x) + d / x) * bs + p) * x + d % x;
          ASSERT_EQ(field_offset(k, b, p, h, d), tensor) << b << " " << p << " " << h << " " << d;
        }
}

// vLLM's legacy V cache [num_blocks, H, D, block_size]: dim stride = block_size.
TEST(Format, transposedValueMatchesItsTensorIndex) {
  const int64_t nb = 4, bs = 7, H = 2, D = 5;
  FieldLayout v;
  v.mode[0] = flat_mode(nb, H * D * bs);
  v.mode[1] = flat_mode(bs, 1);
  v.mode[2] = flat_mode(H, D * bs);
  v.mode[3] = flat_mode(D, bs);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t p = 0; p < bs; ++p)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) EXPECT_EQ(field_offset(v, b, p, h, d), ((b * H + h) * D + d) * bs + p);
}

TEST(Format, theV1GeometryIsTheFlatSpecialCase) {
  const CacheGeometry g{6, 3, 200, 40, 11};
  const FieldLayout f = geometry_layout(g, 17, 3, 9);
  EXPECT_TRUE(is_geometry_layout(f));
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t p = 0; p < 3; ++p)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t d = 0; d < 9; ++d) EXPECT_EQ(field_offset(f, b, p, h, d), 17 + cache_elem_offset(g, b, p, h, d));
  FieldLayout x = f;
  x.mode[3] = mode2(4, 1, 2, 12);
  EXPECT_FALSE(is_geometry_layout(x));
  x = f;
  x.mode[3] = flat_mode(9, 3);
  EXPECT_FALSE(is_geometry_layout(x));
}

// Two fields in one buffer, K in the first D elements of a 2D-wide row and V in the last D: every
// element belongs to exactly one of them.
TEST(Format, contentPackedFieldsPartitionTheirBuffer) {
  const int64_t nb = 3, bs = 4, H = 2, D = 6;
  FieldLayout k;
  k.mode[0] = flat_mode(nb, bs * H * 2 * D);
  k.mode[1] = flat_mode(bs, H * 2 * D);
  k.mode[2] = flat_mode(H, 2 * D);
  k.mode[3] = flat_mode(D, 1);
  FieldLayout v = k;
  v.offset = D;
  const FieldShape ks(k), vs(v);
  for (int64_t e = 0; e < nb * bs * H * 2 * D; ++e) {
    const FieldCoord a = ks.locate(e), b = vs.locate(e);
    ASSERT_NE(a.found, b.found) << e;
    const FieldCoord& c = a.found ? a : b;
    EXPECT_EQ(field_offset(a.found ? k : v, c.block, c.pos, c.head, c.dim), e);
    EXPECT_EQ(a.found, e % (2 * D) < D) << e;
  }
  EXPECT_FALSE(ks.locate(-1).found);
  EXPECT_FALSE(ks.locate(nb * bs * H * 2 * D).found);
}

// A random nested layout: the sub-modes of all four axes (1 to 3 each) are ordered at random and
// given compact strides in that order, with random gaps, so every layout drawn is injective.
struct Drawn {
  FieldLayout layout;
  int64_t span = 0;  // one past the largest offset
};

Drawn draw_layout() {
  Drawn out;
  struct Sub {
    int axis, index;
    int64_t extent;
  };
  std::vector<Sub> subs;
  for (int a = 0; a < kAxes; ++a) {
    const int rank = *rc::gen::inRange(1, kMaxSubModes + 1);
    out.layout.mode[a].rank = rank;
    for (int i = 0; i < rank; ++i) {
      const int64_t e = *rc::gen::inRange<int64_t>(1, 5);
      out.layout.mode[a].extent[i] = e;
      subs.push_back({a, i, e});
    }
  }
  const std::vector<Sub> order = *rc::gen::exec([&] {
    std::vector<Sub> s = subs;
    for (size_t i = s.size(); i > 1; --i) std::swap(s[i - 1], s[*rc::gen::inRange<size_t>(0, i)]);
    return s;
  });
  int64_t stride = 1;
  for (const Sub& s : order) {
    stride += *rc::gen::inRange<int64_t>(0, 3);  // a gap
    out.layout.mode[s.axis].stride[s.index] = stride;
    stride *= s.extent;
  }
  out.layout.offset = *rc::gen::inRange<int64_t>(0, 50);
  out.span = out.layout.offset + stride;
  return out;
}

RC_GTEST_PROP(Format, locateInvertsFieldOffsetOnEveryNestedLayout, ()) {
  const Drawn d = draw_layout();
  const FieldLayout& f = d.layout;
  const FieldShape shape(f);
  std::map<int64_t, std::vector<int64_t>> seen;  // offset -> coordinate
  const int64_t n[4] = {mode_size(f.mode[0]), mode_size(f.mode[1]), mode_size(f.mode[2]), mode_size(f.mode[3])};
  for (int64_t b = 0; b < n[0]; ++b)
    for (int64_t p = 0; p < n[1]; ++p)
      for (int64_t h = 0; h < n[2]; ++h)
        for (int64_t x = 0; x < n[3]; ++x) {
          const int64_t e = field_offset(f, b, p, h, x);
          RC_ASSERT(seen.count(e) == 0u);  // injective
          seen[e] = {b, p, h, x};
          const FieldCoord c = shape.locate(e);
          RC_ASSERT(c.found);
          const std::vector<int64_t> got{c.block, c.pos, c.head, c.dim};
          RC_ASSERT(got == seen[e]);
        }
  for (int64_t e = -2; e < d.span + 2; ++e)  // and nothing else is located
    RC_ASSERT(shape.locate(e).found == (seen.count(e) == 1u));
}

TEST(Format, aLayoutWithANonPositiveStrideIsNotInverted) {
  FieldLayout f;
  f.mode[0] = flat_mode(2, 0);  // two blocks at one place: not injective
  f.mode[3] = flat_mode(4, 1);
  EXPECT_FALSE(FieldShape(f).invertible);
  EXPECT_FALSE(FieldShape(f).locate(0).found);
}

}  // namespace
}  // namespace kvf
