// command_line_test.cpp — reproduction commands survive a POSIX shell word for word.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "report/command_line.h"

namespace kvf {
namespace {

// What `sh -c 'printf "%s\n" ARGS'` prints for the quoted command line: the words the shell sees.
std::vector<std::string> words_after_sh(const std::string& quoted_args) {
  const std::string cmd = "printf '%s\\0' " + quoted_args;
  FILE* p = ::popen(("sh -c " + shell_quote(cmd)).c_str(), "r");
  std::string out;
  std::array<char, 256> buf{};
  size_t n = 0;
  while (p && (n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  if (p) ::pclose(p);
  std::vector<std::string> words;
  std::string w;
  for (char ch : out) {
    if (ch == '\0') {
      words.push_back(w);
      w.clear();
    } else {
      w += ch;
    }
  }
  return words;
}

TEST(ShellQuote, leavesPlainWordsAlone) {
  EXPECT_EQ(shell_quote("replay"), "replay");
  EXPECT_EQ(shell_quote("--target"), "--target");
  EXPECT_EQ(shell_quote("plugin:./build/libk.so"), "plugin:./build/libk.so");
  EXPECT_EQ(shell_quote("exact,fp8_e4m3=written-any-value"), "exact,fp8_e4m3=written-any-value");
}

TEST(ShellQuote, quotesEverythingTheShellWouldReadDifferently) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("my cases/a.json"), "'my cases/a.json'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_quote("a*"), "'a*'");
  EXPECT_EQ(shell_quote("~/x"), "'~/x'");
}

TEST(ShellQuote, givesBackEveryWordThroughSh) {
  const std::vector<std::string> hostile = {"", "a b", "it's", "\"q\"", "$(id)", "`id`", "a\\b", "x\ny", "!", "#c", "*", "~", ";&|<>"};
  std::string line;
  for (const std::string& w : hostile) line += " " + shell_quote(w);
  EXPECT_EQ(words_after_sh(line), hostile);
}

TEST(ReproduceCommand, isTheProgramAsGivenThenTheQuotedArguments) {
  EXPECT_EQ(reproduce_command("./build/kvfuzz", {"replay", "found/ab.json", "--target", "cuda-emu", "--timeout", "5"}),
            "./build/kvfuzz replay found/ab.json --target cuda-emu --timeout 5");
  EXPECT_EQ(reproduce_command("/opt/my tools/kvfuzz", {"replay", "my cases/a.json", "--config", "it's.json"}),
            "'/opt/my tools/kvfuzz' replay 'my cases/a.json' --config 'it'\\''s.json'");
  EXPECT_EQ(reproduce_command("", {"replay", "a.json"}), "kvfuzz replay a.json");
}

Verdict verdict_of(FindingKind kind) {
  Verdict v;
  v.findings.push_back(Finding{});
  v.findings.back().kind = kind;
  return v;
}

TEST(Locate, aHostCrashRunsTheCaseInOneProcessUnderGdb) {
  const Invocation inv{"./build/kvfuzz", {"--timeout", "5"}};
  EXPECT_EQ(inv.locate(verdict_of(FindingKind::crash), "f/a b.json", "plugin:./k.so", false),
            "gdb -batch -ex run -ex bt --args ./build/kvfuzz replay 'f/a b.json' --target plugin:./k.so --timeout 5 --no-fork");
}

TEST(Locate, aGpuCrashOrRefusedLaunchRunsUnderComputeSanitizer) {
  const Invocation inv{"kvfuzz", {}};
  const std::string want =
      "compute-sanitizer --tool memcheck --target-processes all --error-exitcode 1 kvfuzz replay a.json --target cuda --no-fork";
  EXPECT_EQ(inv.locate(verdict_of(FindingKind::crash), "a.json", "cuda", true), want);
  EXPECT_EQ(inv.locate(verdict_of(FindingKind::launch_error), "a.json", "cuda", true), want);
}

TEST(Locate, aPythonCrashRunsWithPythonsFaultHandler) {
  const Invocation inv{"kvfuzz", {}};
  EXPECT_EQ(inv.locate(verdict_of(FindingKind::crash), "a.json", "python:m:f", false),
            "PYTHONFAULTHANDLER=1 kvfuzz replay a.json --target python:m:f --no-fork");
  EXPECT_EQ(inv.locate(verdict_of(FindingKind::crash), "a.json", "triton-interp", false),
            "PYTHONFAULTHANDLER=1 kvfuzz replay a.json --target triton-interp --no-fork");
}

TEST(Locate, isEmptyForEveryOtherVerdict) {
  const Invocation inv{"kvfuzz", {}};
  EXPECT_EQ(inv.locate(Verdict{}, "a.json", "cuda-emu", false), "");
  EXPECT_EQ(inv.locate(verdict_of(FindingKind::launch_error), "a.json", "cuda-emu", false), "");  // a refusal on the host
  for (FindingKind k : {FindingKind::oob_write, FindingKind::wrong_value, FindingKind::timeout})
    EXPECT_EQ(inv.locate(verdict_of(k), "a.json", "cuda", true), "");
}

}  // namespace
}  // namespace kvf
