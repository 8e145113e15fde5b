// json.h — strict JSON for every reader of user files (cases, profiles, signatures, summaries), and
// the quoting their messages use.
//
// Everything echoed from the input is reduced to printable ASCII, so messages are valid UTF-8
// whatever the file held (reports embed them in JSON).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvf {

inline constexpr int kMaxJsonDepth = 64;  // deeper nesting is refused
inline constexpr size_t kMaxShown = 64;   // bytes of a user string echoed in a message

// Parses JSON text strictly: duplicate keys in an object, nesting deeper than kMaxJsonDepth,
// trailing content, invalid UTF-8 and every syntax error are refused with an InputError naming
// `file`, the JSON path (duplicates, depth) or the byte offset (syntax). Throws nothing else except
// std::bad_alloc.
nlohmann::json parse_json_strict(std::string_view text, const std::string& file);

// `s` as printable ASCII (other bytes as \xNN), cut after 4 * kMaxShown bytes.
std::string printable(std::string_view s);
// "\"name\"" with quotes and backslashes escaped, non-printable bytes as \xNN, long strings cut.
std::string quote(std::string_view s);
// One RFC 6901 reference token: '~' -> "~0", '/' -> "~1"; non-printable bytes as \xNN.
std::string pointer_token(std::string_view key);
// The JSON path of member `key` / element `index` under `path` ("/requests" + "blocks" -> "/requests/blocks").
inline std::string json_child(const std::string& path, std::string_view key) { return path + "/" + pointer_token(key); }
inline std::string json_child(const std::string& path, size_t index) { return path + "/" + std::to_string(index); }
// What a JSON value is, for "expected X, got Y": "null", "the integer 3", "the string \"x\"", "an object".
std::string describe(const nlohmann::json& v);

}  // namespace kvf
