// rng.h — SplitMix64: the only pseudo-random source of materialisation and payload generation.
// Fully specified (unlike <random>'s distributions), so corpus files replay the same everywhere.
#pragma once

#include <cstdint>

namespace kvf {

// One step of SplitMix64 on a given state: a strong 64-bit mix of x.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}
  constexpr uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n > 0 (rejection sampling, no modulo bias).
  constexpr uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  constexpr bool percent(int p) { return static_cast<int>(below(100)) < p; }

 private:
  uint64_t state_;
};

}  // namespace kvf
