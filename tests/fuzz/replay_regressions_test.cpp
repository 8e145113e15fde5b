// replay_regressions_test.cpp — the fuzzers' oracles (oracles.h) over their seeds and every input
// a fuzzer ever found, without clang or libFuzzer: part of `ctest -L unit`.
//   ./build/tests/fuzz/kvfuzz_fuzz_regression_tests
//
// tests/fuzz/regressions/<target>/ holds inputs that once crashed or misled a reader (kept after the
// fix); tests/fuzz/seeds/<target>/ hand-written hostile seeds; corpus/ and configs/ the real files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "oracles.h"

namespace kvf::fuzz {
namespace {

namespace fs = std::filesystem;

// Regular files directly under `dir` (sorted), optionally only those ending in `suffix`.
std::vector<fs::path> files_in(const fs::path& dir, const std::string& suffix = "") {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind('.', 0) == 0) continue;  // skip .gitkeep and the like
    if (suffix.empty() || (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const fs::path kSource = KVFUZZ_SOURCE_DIR;

TEST(FuzzRegressions, caseReaderHandlesEveryKeptInput) {
  std::vector<fs::path> inputs = files_in(kSource / "tests/fuzz/regressions/fuzz_case_reader");
  for (const fs::path& f : files_in(kSource / "tests/fuzz/seeds/fuzz_case_reader")) inputs.push_back(f);
  for (const fs::path& f : inputs) EXPECT_EQ(check_case_reader(slurp(f)), "") << f;
}

TEST(FuzzRegressions, caseReaderAcceptsEveryCorpusFileAndRoundTripsIt) {
  const std::vector<fs::path> corpus = files_in(kSource / "corpus", ".json");
  ASSERT_GT(corpus.size(), 10u);
  for (const fs::path& f : corpus) EXPECT_EQ(check_case_reader(slurp(f)), "") << f;
}

TEST(FuzzRegressions, profileReaderHandlesEveryKeptInput) {
  std::vector<fs::path> inputs = files_in(kSource / "tests/fuzz/regressions/fuzz_profile_reader");
  for (const fs::path& f : files_in(kSource / "tests/fuzz/seeds/fuzz_profile_reader")) inputs.push_back(f);
  for (const fs::path& f : inputs) EXPECT_EQ(check_profile_reader(slurp(f)), "") << f;
}

TEST(FuzzRegressions, profileReaderHandlesEveryShippedProfile) {
  const std::vector<fs::path> configs = files_in(kSource / "configs", ".json");
  ASSERT_GE(configs.size(), 3u);
  for (const fs::path& f : configs) EXPECT_EQ(check_profile_reader(slurp(f)), "") << f;
}

}  // namespace
}  // namespace kvf::fuzz
