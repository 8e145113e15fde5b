// oracles.cpp — the bug definitions of the parser fuzzers (oracles.h).
#include "oracles.h"

#include <cstdint>
#include <exception>
#include <typeinfo>

#include "case/case_json.h"
#include "base/errors.h"
#include "case/validate.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"

namespace kvf::fuzz {
namespace {

// Every byte echoed from the input is escaped by the readers, so a message stays printable ASCII;
// '\n' separates the problems of one refusal ("\n  also at /path: ...").
bool printable_ascii(const std::string& s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n') || c >= 0x7f) return false;
  }
  return true;
}

// "" when the refusal is well-formed.
std::string check_refusal(const InputError& e) {
  if (e.file() != "fuzz.json") return "InputError names the wrong file: " + std::string(e.what());
  if (e.message().empty()) return "InputError without a message: " + std::string(e.what());
  if (!printable_ascii(e.what())) return "InputError message is not printable ASCII: " + std::string(e.what());
  if (!printable_ascii(e.json_path()) || e.json_path().find('\n') != std::string::npos)
    return "json_path is not printable ASCII: " + e.json_path();
  if (!e.json_path().empty() && e.json_path()[0] != '/') return "json_path is not a JSON pointer: " + e.json_path();
  return "";
}

std::string escaped(const std::exception& e) {
  return std::string("an exception other than InputError escaped (") + typeid(e).name() + "): " + e.what();
}

}  // namespace

std::string check_case_reader(std::string_view text) {
  Case c;
  try {
    c = case_from_text(text, "fuzz.json");
  } catch (const InputError& e) {
    return check_refusal(e);
  } catch (const std::exception& e) {
    return escaped(e);
  }
  try {
    const std::string once = case_to_json(c).dump();
    const Case again = case_from_text(once, "roundtrip.json");
    if (case_to_json(again).dump() != once) return "the write/read round trip changed the case: " + once;
    if (case_hash(again) != case_hash(c)) return "the write/read round trip changed the hash: " + once;
  } catch (const InputError& e) {
    return std::string("an accepted case does not read back: ") + e.what();
  } catch (const std::exception& e) {
    return escaped(e);
  }
  return "";
}

std::string check_profile_reader(std::string_view text) {
  Profile p;
  try {
    p = profile_from_text(text, "fuzz.json");
  } catch (const InputError& e) {
    return check_refusal(e);
  } catch (const std::exception& e) {
    return escaped(e);
  }
  // Accepted: the generator must turn it into a valid case (small budgets only, for speed).
  // (Large-cache profiles, min_tensor_elements past 2^24, make cases over the default 1 GiB case
  // limit on purpose: configs/large.json.)
  if (p.max_elements_per_case > (int64_t{1} << 16) || p.max_requests > 16 || p.max_context_len > 1024 ||
      p.max_new_len > 256 || p.min_tensor_elements > (int64_t{1} << 24)) {
    return "";
  }
  try {
    const Case c = materialize(generate_case(p, /*seed=*/1, /*index=*/0));
    const std::vector<ValidationProblem> problems = validate(c, Limits{});
    if (!problems.empty())
      return "an accepted profile generated an invalid case: at " + problems.front().json_path + ": " +
             problems.front().message;
  } catch (const std::exception& e) {
    return std::string("an accepted profile cannot generate a case: ") + e.what();
  }
  return "";
}

}  // namespace kvf::fuzz
