// case_wire.h — a compact binary form of a Case, for handing a case to the isolation worker
// (campaign/isolation.cpp) without printing and parsing JSON for every launch.
//
// It is private to one kvfuzz binary talking to a copy of itself (fork, or fork + exec of the same
// executable): native byte order, no versioning beyond a magic number, never written to a file.
// Everything a user sees or keeps (corpus files, findings, reports, the Python worker) stays JSON
// (case_json.h).
//
// Contents: every field of the Case except its genotype (no target reads it), in a fixed order —
// integers as their native 4 or 8 bytes, enumerations and flags as one byte, vectors and strings as
// a u64 count followed by their elements. A field added to Case must be added to both functions;
// case_wire_test (tests/unit/gen) compares the JSON of a decoded case with the original's over
// generated cases of every profile, so a field that is left out fails there.
#pragma once

#include <string>
#include <string_view>

#include "case.h"

namespace kvf {

// The case without its genotype, as bytes.
std::string encode_case_wire(const Case& c);

// The inverse of encode_case_wire(). Malformed bytes (a wrong magic number, input cut short, a count
// larger than the bytes left, an enumeration or flag value out of range, trailing bytes) are refused
// with an InputError naming `source`, the byte offset and what was being read; nothing else is thrown
// except std::bad_alloc. The result is not validate()d: the caller decides whether to.
Case decode_case_wire(std::string_view bytes, const std::string& source);

}  // namespace kvf
