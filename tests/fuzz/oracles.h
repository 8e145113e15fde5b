// oracles.h — what counts as a bug in the readers of user input, shared by the libFuzzer targets
// (fuzz_*.cpp) and by the unit test that replays their seeds and regressions without clang
// (replay_regressions_test.cpp).
#pragma once

#include <string>
#include <string_view>

namespace kvf::fuzz {

// Feeds `text` to case_from_text. Returns "" when the reader behaved: it refused the input with an
// InputError naming "fuzz.json", a JSON pointer (or "") and a non-empty printable-ASCII message
// (newlines allowed between problems), or
// it accepted a case that survives a write/read round trip unchanged (same JSON, same hash).
// Otherwise returns what went wrong (an escaped exception, a bad message, a changed round trip).
// Sanitizer reports, crashes and hangs are caught by the caller's build, not here.
std::string check_case_reader(std::string_view text);

// Feeds `text` to profile_from_text. Returns "" when the reader refused it properly (as above) or
// accepted a profile that, when its budget is small enough to try quickly, generates a first case
// that validates; otherwise what went wrong.
std::string check_profile_reader(std::string_view text);

}  // namespace kvf::fuzz
