// fuzz_profile_reader.cpp — libFuzzer target for the profile reader (kvf::profile_from_text).
//
//   scripts/fuzz.sh [SECONDS]          build with clang into build-fuzz/ and run both targets
//   build-fuzz/tests/fuzz/fuzz_profile_reader -dict=tests/fuzz/json.dict build-fuzz/corpus/fuzz_profile_reader
//
// A bug is a sanitizer report (ASan, UBSan), a crash, a hang, a leak, or what oracles.h says:
// an exception other than InputError, a malformed refusal, an accepted profile that cannot
// generate a valid case.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "oracles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem = kvf::fuzz::check_profile_reader({reinterpret_cast<const char*>(data), size});
  if (!problem.empty()) {
    std::fprintf(stderr, "fuzz_profile_reader: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
