// remainder_test.cpp — values/remainder.h's remainder by multiplication is x % d, exactly.
//
//   build/tests/kvfuzz_verify_tests --gtest_filter='Remainder*'
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "base/rng.h"
#include "values/remainder.h"

namespace kvf::golden {
namespace {

// Numerators at the edges for divisor d: around 0, d and its multiples, powers of two, and the top
// of the 61-bit range the payload's exponent draw uses (h >> 3) and of the whole 64 bits.
std::vector<uint64_t> edges(uint64_t d) {
  std::vector<uint64_t> x;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (uint64_t base : {uint64_t{0}, d, 2 * d, kMax / d * d, (kMax >> 3) / d * d, (uint64_t{1} << 32) / d * d}) {
    for (uint64_t k = 0; k < 3; ++k) {
      x.push_back(base + k);
      x.push_back(base - k);
    }
  }
  for (int b = 0; b < 64; ++b) {
    const uint64_t p = uint64_t{1} << b;
    x.insert(x.end(), {p - 1, p, p + 1});
  }
  x.insert(x.end(), {kMax, kMax - 1, kMax >> 3, (kMax >> 3) - 1});
  return x;
}

TEST(Remainder, isThePercentRemainderForEverySmallDivisorAtTheEdges) {
  // Every divisor the payload uses is below 256 (exponent counts, the 1-byte context codes).
  for (uint64_t d = 1; d <= 1024; ++d) {
    const Remainder r(d);
    for (uint64_t x : edges(d)) ASSERT_EQ(r.of(x), x % d) << x << " mod " << d;
  }
}

TEST(Remainder, isThePercentRemainderForLargeDivisors) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> divisors = {kMax, kMax - 1, kMax / 2, kMax / 3, uint64_t{1} << 63, (uint64_t{1} << 63) + 1};
  for (int b = 9; b < 64; ++b) {
    const uint64_t p = uint64_t{1} << b;
    divisors.insert(divisors.end(), {p - 1, p, p + 1});
  }
  for (uint64_t d : divisors) {
    const Remainder r(d);
    for (uint64_t x : edges(d)) ASSERT_EQ(r.of(x), x % d) << x << " mod " << d;
  }
}

TEST(Remainder, isThePercentRemainderForHashedNumerators) {
  uint64_t h = 1;
  for (uint64_t d = 1; d <= 300; ++d) {
    const Remainder r(d);
    for (int i = 0; i < 2000; ++i) {
      h = mix64(h + static_cast<uint64_t>(i));
      ASSERT_EQ(r.of(h), h % d) << h << " mod " << d;
      ASSERT_EQ(r.of(h >> 3), (h >> 3) % d) << (h >> 3) << " mod " << d;
    }
  }
}

}  // namespace
}  // namespace kvf::golden
