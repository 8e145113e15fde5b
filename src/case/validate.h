// validate.h — semantic checks of a Case beyond JSON types, and the size limits of the harness.
//
// A valid case: shapes positive and within limits; key/value views and the K/V tensors inside
// their buffers; K/V tensor cells distinct (strides do not make two cells overlap, and K and V do
// not overlap); every block owned by at most one request; each request's block table long enough
// for context_len + new_len and inside [0, num_blocks); slot_mapping holds each new-token slot of
// every request exactly once (in any order), plus negative padding and >= capacity invalid entries,
// and nothing else; slot values representable in slot_dtype; num_input_rows >= num_slots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "case.h"

namespace kvf {

// Hard limits that keep a hostile or mistaken case from exhausting memory. Checked before any
// buffer is allocated; configurable from the CLI (--max-case-mib).
struct Limits {
  int64_t max_buffer_bytes = int64_t{1} << 30;  // per buffer (input, cache): 1 GiB
  int64_t max_slots = int64_t{1} << 22;         // slot_mapping entries
  int64_t max_requests = int64_t{1} << 16;
  int32_t max_heads = 1024;
  int32_t max_head_dim = 4096;
};

struct ValidationProblem {
  std::string json_path;  // where, as an RFC 6901 pointer into the case JSON
  std::string message;    // what is wrong and what was expected
};

// All problems found (empty = valid).
std::vector<ValidationProblem> validate(const Case& c, const Limits& limits = {});

}  // namespace kvf
