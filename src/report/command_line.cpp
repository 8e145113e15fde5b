// command_line.cpp — see command_line.h.
#include "command_line.h"

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

std::vector<std::string> Invocation::words(const std::string& verb, const std::filesystem::path& file,
                                           const std::string& target) const {
  std::vector<std::string> w{program.empty() ? std::string("kvfuzz") : program, verb, file.string(), "--target", target};
  w.insert(w.end(), options.begin(), options.end());
  return w;
}

std::string Invocation::command(const std::string& verb, const std::filesystem::path& file,
                                const std::string& target) const {
  const std::vector<std::string> w = words(verb, file, target);
  return reproduce_command(w.front(), {w.begin() + 1, w.end()});
}

std::vector<std::string> sanitizer_words(const std::string& sanitizer) {
  return {sanitizer, "--tool", "memcheck", "--target-processes", "all", "--error-exitcode", "1"};
}

std::string Invocation::locate(const Verdict& verdict, const std::filesystem::path& file, const std::string& target,
                               bool needs_gpu) const {
  if (verdict.pass()) return "";
  const FindingKind kind = verdict.findings.front().kind;
  if (kind != FindingKind::crash && !(needs_gpu && kind == FindingKind::launch_error)) return "";
  std::vector<std::string> replay = words("replay", file, target);
  replay.push_back("--no-fork");  // the launch runs in the process the tool watches
  std::vector<std::string> w;
  if (needs_gpu) {
    w = sanitizer_words("compute-sanitizer");
  } else if (target.rfind("python", 0) == 0 || target.rfind("triton-interp", 0) == 0) {
    return "PYTHONFAULTHANDLER=1 " + reproduce_command(replay.front(), {replay.begin() + 1, replay.end()});
  } else {
    w = {"gdb", "-batch", "-ex", "run", "-ex", "bt", "--args"};
  }
  w.insert(w.end(), replay.begin(), replay.end());
  return reproduce_command(w.front(), {w.begin() + 1, w.end()});
}

}  // namespace kvf
