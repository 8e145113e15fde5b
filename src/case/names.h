// names.h — one table of (value, name) per enumeration, read by both to_string and *_from_string,
// so a name cannot drift between the writer and the reader (types.cpp, quant_format.cpp).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kvf {

template <typename E, size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

// "?" for a value outside the enumeration (a corrupted or hand-cast value); never crashes.
template <typename E, size_t N>
std::string_view name_of(const NameTable<E, N>& table, E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}

template <typename E, size_t N>
std::optional<E> value_of(const NameTable<E, N>& table, std::string_view name) {
  for (const auto& [v, n] : table) {
    if (n == name) return v;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::string quote_all(const NameTable<E, N>& table) {
  std::string out;
  for (const auto& [v, name] : table) out += (out.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  return out;
}

}  // namespace kvf
