// command_line.cpp — see command_line.h.
#include "report/command_line.h"

#include <cstring>

namespace kvf {

namespace {

bool safe_in_shell(char ch) {
  if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) return true;
  return ch != '\0' && std::strchr("_@%+=:,./-", ch) != nullptr;
}

}  // namespace

std::string shell_quote(const std::string& word) {
  bool safe = !word.empty();
  for (char ch : word) safe = safe && safe_in_shell(ch);
  if (safe) return word;
  std::string q = "'";
  for (char ch : word) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string reproduce_command(const std::string& program, const std::vector<std::string>& args) {
  std::string s = shell_quote(program.empty() ? std::string("kvfuzz") : program);
  for (const std::string& a : args) s += " " + shell_quote(a);
  return s;
}

std::string Invocation::command(const std::string& verb, const std::filesystem::path& file,
                                const std::string& target) const {
  std::vector<std::string> args{verb, file.string(), "--target", target};
  args.insert(args.end(), options.begin(), options.end());
  return reproduce_command(program, args);
}

std::vector<std::string> sanitizer_words(const std::string& sanitizer) {
  return {sanitizer, "--tool", "memcheck", "--target-processes", "all", "--error-exitcode", "1"};
}

std::string Invocation::locate(const Verdict& verdict, const std::filesystem::path& file, const std::string& target,
                               bool needs_gpu) const {
  if (verdict.pass()) return "";
  const FindingKind kind = verdict.findings.front().kind;
  if (kind != FindingKind::crash && !(needs_gpu && kind == FindingKind::launch_error)) return "";
  std::vector<std::string> args{"replay", file.string(), "--target", target};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back("--no-fork");  // the launch runs in the process the tool watches
  if (needs_gpu) {
    std::vector<std::string> words = sanitizer_words("compute-sanitizer");
    words.push_back(program.empty() ? std::string("kvfuzz") : program);
    words.insert(words.end(), args.begin(), args.end());
    return reproduce_command(words.front(), {words.begin() + 1, words.end()});
  }
  const bool python = target.rfind("python", 0) == 0 || target.rfind("triton-interp", 0) == 0;
  if (python) return "PYTHONFAULTHANDLER=1 " + reproduce_command(program, args);
  std::vector<std::string> words{"-batch", "-ex", "run", "-ex", "bt", "--args", program.empty() ? std::string("kvfuzz") : program};
  words.insert(words.end(), args.begin(), args.end());
  return reproduce_command("gdb", words);
}

}  // namespace kvf
