// explicit_inputs.h — input values a case carries as data instead of drawing them from its seed.
//
// A case found by hand, by another tool or in a production trace has inputs no payload seed makes.
// Its written rows (slot >= 0, < capacity, row < T) can carry them: the key (and value) bits of
// each listed row, for every head and dim, in the case's input dtype. values/payload.cpp returns
// them in place of the seeded payload; every other row keeps its canaries and every unlisted row its
// seeded values. In a case file (docs/corpus-format.md, "explicit_inputs"):
//   {"encoding": "le-bits-base64-v1", "rows": [0, 3, ...], "key": BASE64, "value": BASE64,
//    "digest": "fnv1a64:HEX"}
// key is the little-endian element bits of [rows, H, D] (2 bytes an element for f16/bf16, 4 for
// f32), value those of [rows, H, Dv] (absent for k_only and mla, whose one input is key: an MLA
// row is kv_c's dims then k_pe's), digest the FNV-1a 64 of the decoded key bytes then the value
// bytes. The reader checks all of it (explicit_inputs_from_json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "types.h"

namespace kvf {

struct Case;

struct ExplicitInputs {
  std::vector<int64_t> rows;  // input rows that carry values, ascending and distinct
  std::vector<uint32_t> key;  // [rows, num_heads, head_dim] element bits
  std::vector<uint32_t> value;  // [rows, num_heads, value_dim] element bits; empty without a value input

  // The index of `row` in rows, or -1.
  int64_t index_of(int64_t row) const;
  bool operator==(const ExplicitInputs&) const = default;
};

// The element bits of (tensor, row, head, dim) if the case lists the row, else nullopt.
std::optional<uint32_t> explicit_bits(const Case& c, bool is_value, int64_t row, int64_t head, int64_t dim);

// The case file member, and its inverse. The reader throws InputError(file, "/explicit_inputs/...",
// what was expected) for an unknown encoding, bad base64, a digest that does not match, a size that
// is not rows x heads x dims of the case, rows out of order or not written rows, a value input the
// case's family has no tensor for, and bits that are one of kvfuzz's canary or guard patterns.
// The canary patterns are values/payload.cpp's (a quiet NaN tagged in its low mantissa bits, and
// all ones); payload_test checks that the reader refuses each.
nlohmann::json explicit_inputs_to_json(const Case& c);
ExplicitInputs explicit_inputs_from_json(const nlohmann::json& j, const Case& c, const std::string& file);

// True for the bits of a canary or guard pattern of input dtype t (f16, bf16, f32).
bool is_input_canary_pattern(uint32_t bits, DType t);

}  // namespace kvf
