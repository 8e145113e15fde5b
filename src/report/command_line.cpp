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

}  // namespace kvf
