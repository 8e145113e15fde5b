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

}  // namespace
}  // namespace kvf
