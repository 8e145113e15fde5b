// remainder.h — x mod d by multiplication, for a divisor fixed over many elements (the arena fill's
// payload rows, values/payload.cpp), where a 64-bit division per element was the fill's largest cost.
//
// Lemire, Kaser and Kurz, "Faster remainder by direct computation" (2019), fastmod_u64: with
// M = ceil(2^128 / d), x mod d = floor(((M x) mod 2^128) d / 2^128) for every 64-bit x and every
// d >= 1 (their Theorem 1 with N = 64 bits of numerator and F = 128 bits of fraction, F >= N +
// log2 d). d = 1 gives M = 2^128 mod 2^128 = 0 and the remainder 0. Exact, so a payload computed
// with it is bit for bit the payload computed with %: remainder_test checks it against % over the
// edge cases, fill_rows_test the whole pre-run image against its bytes from before.
#pragma once

#include <cstdint>

namespace kvf::golden {

__extension__ typedef unsigned __int128 u128;  // __extension__: -Wpedantic accepts the GCC/Clang type

class Remainder {
 public:
  // d >= 1 (d = 0 gives remainders 0 where x % 0 would be undefined).
  explicit Remainder(uint64_t d) : d_(d), m_(d == 0 ? 0 : ~u128{0} / d + 1) {}
  uint64_t divisor() const { return d_; }
  // x % divisor().
  uint64_t of(uint64_t x) const {
    const u128 low = m_ * x;  // (M x) mod 2^128
    const u128 bottom = static_cast<u128>(static_cast<uint64_t>(low)) * d_;
    const u128 top = (low >> 64) * d_;
    return static_cast<uint64_t>((top + (bottom >> 64)) >> 64);  // (low d) >> 128
  }

 private:
  uint64_t d_;
  u128 m_;  // ceil(2^128 / d) mod 2^128
};

}  // namespace kvf::golden
