// case_files_test.cpp — case files on disk: atomic writes, hash-named saves, and read_case_file's
// refusals (missing, directory, FIFO, oversized) before any parsing.
//   ./build/tests/kvfuzz_case_tests --gtest_filter='CaseFiles.*'
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "case/case_json.h"
#include "case_fixture.h"

namespace kvf {
namespace {

namespace fs = std::filesystem;
using test::make_case;

// A fresh directory per test, removed afterwards.
class CaseFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kvfuzz_case_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(CaseFiles, writeFileAtomicLeavesNoTemporaryFileBehind) {
  const fs::path file = dir_ / "a.json";
  write_file_atomic(file, "first\n");
  write_file_atomic(file, "second\n");  // replaces
  EXPECT_EQ(slurp(file), "second\n");
  EXPECT_EQ(names(), std::vector<std::string>{"a.json"});
}

TEST_F(CaseFiles, writeFileAtomicMakesAMissingFolder) {
  const fs::path file = dir_ / "no_such_dir" / "deeper" / "a.json";
  write_file_atomic(file, "x");
  std::ifstream in(file);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "x");
}

TEST_F(CaseFiles, writeFileAtomicThrowsInfraErrorNamingThePath) {
  { std::ofstream(dir_ / "blocker") << "a file, not a folder"; }
  const fs::path file = dir_ / "blocker" / "sub" / "a.json";
  try {
    write_file_atomic(file, "x");
    FAIL() << "expected InfraError";
  } catch (const InfraError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("cannot create its folder"), std::string::npos) << what;
  }
  EXPECT_EQ(names(), std::vector<std::string>{"blocker"});
}

TEST_F(CaseFiles, saveCaseNamesTheFileByHashAndReadsBack) {
  Case c = make_case();
  c.genotype = test::make_genotype();
  const fs::path sub = dir_ / "failing" / "nested";  // created on demand
  const fs::path file = save_case(c, sub);
  EXPECT_EQ(file, sub / (case_hash(c) + ".json"));
  const std::string text = slurp(file);
  EXPECT_EQ(text, case_to_json(c).dump(2) + "\n");
  test::expect_same_case(read_case_file(file), c);
  // The same batch from another run lands on the same name.
  Case again = c;
  again.provenance.command_line = "kvfuzz run --seed 1";
  EXPECT_EQ(save_case(again, sub), file);
  EXPECT_EQ(std::distance(fs::directory_iterator(sub), fs::directory_iterator{}), 1);
}

TEST_F(CaseFiles, writeNewFileAtomicNeverReplacesAFile) {
  const fs::path file = dir_ / "a.json";
  EXPECT_TRUE(write_new_file_atomic(file, "first\n"));
  EXPECT_FALSE(write_new_file_atomic(file, "second\n"));
  EXPECT_EQ(slurp(file), "first\n");
  EXPECT_EQ(names(), std::vector<std::string>{"a.json"});  // no temporary file left either
}

TEST_F(CaseFiles, saveCaseKeepsTheSameCaseAndRefusesToOverwriteAnythingElse) {
  const Case c = make_case();
  const fs::path file = save_case(c, dir_);
  const std::string first = slurp(file);
  Case again = c;  // the same batch found by another run: the first file stays as it is
  again.provenance.command_line = "kvfuzz run --seed 99";
  EXPECT_EQ(save_case(again, dir_), file);
  EXPECT_EQ(slurp(file), first);
  // A file of the user's under that name is not replaced.
  write_file_atomic(file, "my notes\n");
  EXPECT_THROW(save_case(c, dir_), InfraError);
  EXPECT_EQ(slurp(file), "my notes\n");
  EXPECT_EQ(names(), std::vector<std::string>{file.filename().string()});
}

TEST_F(CaseFiles, readCaseFileRefusesAMissingFile) {
  const fs::path file = dir_ / "missing.json";
  try {
    read_case_file(file);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), file.string());
    EXPECT_EQ(e.json_path(), "");
    EXPECT_EQ(e.message(), "no such file; expected a kvfuzz case file (.json)");
  }
}

TEST_F(CaseFiles, readCaseFileRefusesADirectory) {
  try {
    read_case_file(dir_);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), dir_.string());
    EXPECT_EQ(e.message(), "is a directory; expected a kvfuzz case file (.json)");
  }
}

TEST_F(CaseFiles, readCaseFileRefusesAFifoWithoutHanging) {
  const fs::path fifo = dir_ / "pipe.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    read_case_file(fifo);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(), "not a regular file; expected a kvfuzz case file (.json)");
  }
}

TEST_F(CaseFiles, readCaseFileRefusesAFileOverTheSizeLimitBeforeReadingIt) {
  const fs::path file = dir_ / "huge.json";
  { std::ofstream(file) << "{"; }
  fs::resize_file(file, static_cast<uintmax_t>(kMaxCaseFileBytes) + 1);  // sparse: costs no disk
  try {
    read_case_file(file);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(), "the file is larger than the 64 MiB limit on case files (67108865 bytes)");
  }
}

TEST_F(CaseFiles, readCaseFileNamesTheFileInParseErrors) {
  const fs::path file = dir_ / "empty.json";
  { std::ofstream{file}; }
  try {
    read_case_file(file);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), file.string());
    EXPECT_EQ(std::string(e.what()), file.string() + ": the file is empty; expected a JSON object (a kvfuzz case)");
  }
}

TEST_F(CaseFiles, jsonFileSchemaNamesWhatAFileClaimsToBeAndNothingForTheRest) {
  const fs::path c = save_case(make_case(), dir_);
  EXPECT_EQ(json_file_schema(c), kCaseSchemaName);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  };
  EXPECT_EQ(json_file_schema(write("s.json", R"({"schema": "kvfuzz-summary", "version": 1})")), "kvfuzz-summary");
  EXPECT_EQ(json_file_schema(write("none.json", R"({"version": 1})")), "");
  EXPECT_EQ(json_file_schema(write("num.json", R"({"schema": 7})")), "");
  EXPECT_EQ(json_file_schema(write("array.json", R"(["schema"])")), "");
  EXPECT_EQ(json_file_schema(write("cut.json", R"({"schema": "kvfuzz-summary")")), "");
  EXPECT_EQ(json_file_schema(write("dup.json", R"({"schema": "a", "schema": "b"})")), "");
  EXPECT_EQ(json_file_schema(write("empty.json", "")), "");
  EXPECT_EQ(json_file_schema(dir_), "");
  EXPECT_EQ(json_file_schema(dir_ / "missing.json"), "");
}

}  // namespace
}  // namespace kvf
