// hash.h — the 64-bit FNV-1a hash as 16 lowercase hex digits: case names (case_hash), finding
// signatures, explicit-input digests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvf {

inline std::string fnv1a_hex(std::string_view text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (const char ch : text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;  // FNV-1a 64 prime
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = kHex[h & 15];
  return out;
}

}  // namespace kvf
