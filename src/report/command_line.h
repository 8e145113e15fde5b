// command_line.h — copy-pastable shell command lines (the "reproduce:" lines of every output).
//
// A reproduction command must run as printed in a POSIX shell (sh, bash, zsh): every word that is
// not made only of safe characters is single-quoted, so paths with spaces, quotes, $, `, ! or
// newlines come back exactly. The program is the invoked binary's path as given (argv[0]), so a
// mutant or a build-tree binary reproduces with itself, not with whatever `kvfuzz` is on PATH.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "arena/finding.h"

namespace kvf {

// `word` as one shell word: unchanged when it is non-empty and made only of
// A-Z a-z 0-9 and _ @ % + = : , . / -; otherwise inside single quotes, each ' written as '\''.
// The empty word is ''.
std::string shell_quote(const std::string& word);

// `program` followed by `args`, each shell_quote()d, separated by single spaces; an empty
// `program` is "kvfuzz".
std::string reproduce_command(const std::string& program, const std::vector<std::string>& args);

// How kvfuzz was invoked, kept to print the commands that run a case again. Every "reproduce:" line
// of every output (text, JSON, JUnit, Markdown, HTML) is Invocation::command(), nowhere else.
struct Invocation {
  std::string program = "kvfuzz";    // argv[0] as given: a build-tree or mutant binary reproduces with itself
  std::vector<std::string> options;  // options that change what a case gives, as words ("--timeout", "5")

  // PROGRAM VERB FILE --target TARGET OPTIONS..., every word shell-quoted.
  std::string command(const std::string& verb, const std::filesystem::path& file, const std::string& target) const;
  // The words of command() without the shell quoting: PROGRAM VERB FILE --target TARGET OPTIONS...
  std::vector<std::string> words(const std::string& verb, const std::filesystem::path& file, const std::string& target) const;

  // How to see where a run that died (a crash; on a GPU also a refused launch, which an illegal
  // address can cause) went wrong: `replay FILE --target TARGET --no-fork` under the tool that shows
  // the place. A target that runs on a GPU: compute-sanitizer's memcheck (what `replay --sanitize`
  // runs); a Python one: Python's fault handler, which prints the Python stack; else gdb, which
  // prints the native stack. Empty for any other verdict (the findings name the cells already).
  std::string locate(const Verdict& verdict, const std::filesystem::path& file, const std::string& target,
                     bool needs_gpu) const;
};

// The words `replay --sanitize` puts before kvfuzz's own: compute-sanitizer's memcheck, every child
// process included (a python-cuda target's interpreter), exit status 1 when it reports an error.
std::vector<std::string> sanitizer_words(const std::string& sanitizer);

}  // namespace kvf
