// json.cpp — the strict JSON parser and the quoting of user text in messages (json.h).
#include "json.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "errors.h"

namespace kvf {

using json = nlohmann::json;

namespace {

void append_escaped(std::string& out, unsigned char ch) {
  static const char kHex[] = "0123456789abcdef";
  if (ch >= 0x20 && ch < 0x7f) {
    out.push_back(static_cast<char>(ch));
  } else {
    out += "\\x";
    out.push_back(kHex[ch >> 4]);
    out.push_back(kHex[ch & 15]);
  }
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 4 * kMaxShown; ++i) append_escaped(out, static_cast<unsigned char>(s[i]));
  if (s.size() > 4 * kMaxShown) out += "...";
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const char ch = s[i];
    if (ch == '"' || ch == '\\') out.push_back('\\');
    append_escaped(out, static_cast<unsigned char>(ch));
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "\"";
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (size_t i = 0; i < key.size() && i < kMaxShown; ++i) {
    const char ch = key[i];
    if (ch == '~') {
      out += "~0";
    } else if (ch == '/') {
      out += "~1";
    } else {
      append_escaped(out, static_cast<unsigned char>(ch));
    }
  }
  if (key.size() > kMaxShown) out += "...";
  return out;
}

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "the integer " + v.dump();
    case json::value_t::number_float:
      return "the non-integer number " + v.dump();
    case json::value_t::string:
      return "the string " + quote(v.get_ref<const json::string_t&>());
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::binary:
      return "binary data";
    case json::value_t::discarded:
      return "a discarded value";
  }
  return "an unknown value";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Strict parsing: a SAX handler that builds the DOM like nlohmann's own, but refuses duplicate
// keys and nesting deeper than kMaxJsonDepth, and records where.

class StrictSax : public json::json_sax_t {
 public:
  json root;                                                   // the document, once parsing succeeded
  std::optional<std::pair<std::string, std::string>> failure;  // (json path, message) of a refusal
  std::optional<std::pair<size_t, std::string>> syntax;        // (byte position, nlohmann message)

  bool null() override { return put(json(nullptr)); }
  bool boolean(bool v) override { return put(json(v)); }
  bool number_integer(json::number_integer_t v) override { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) override { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) override { return put(json(v)); }
  bool string(json::string_t& v) override { return put(json(std::move(v))); }
  bool binary(json::binary_t& v) override { return put(json::binary(std::move(v))); }

  bool start_object(std::size_t) override { return open(json::value_t::object); }
  bool start_array(std::size_t) override { return open(json::value_t::array); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(json::string_t& k) override {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) {
      failure.emplace(json_child(path(), k),
                      "duplicate key " + quote(k) + "; each key may appear only once in an object");
      return false;
    }
    f.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    syntax.emplace(position, ex.what());
    return false;
  }

 private:
  struct Frame {
    json* value;                 // the open object or array
    std::set<std::string> keys;  // keys seen so far (objects)
    std::string key;             // key of the value being read (objects)
  };
  std::vector<Frame> frames_;  // open containers, outermost first

  // Reference token of the value about to be added to (or being read in) frame f.
  static std::string token_in(const Frame& f, bool pending) {
    if (f.value->is_array()) return std::to_string(f.value->size() - (pending ? 0 : 1));
    return pointer_token(f.key);
  }
  // JSON path of the innermost open container.
  std::string path() const {
    std::string p;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) p += "/" + token_in(frames_[i], false);
    return p;
  }

  json* insert(json&& v) {
    if (frames_.empty()) {
      root = std::move(v);
      return &root;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    json& slot = (*f.value)[f.key];
    slot = std::move(v);
    return &slot;
  }
  bool put(json&& v) {
    insert(std::move(v));
    return true;
  }
  bool open(json::value_t type) {
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      failure.emplace(
          path() + "/" + token_in(frames_.back(), true),
          "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels; a kvfuzz case needs fewer than 10");
      return false;
    }
    json* p = insert(json(type));
    frames_.push_back({p, {}, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
};

// "not valid JSON at byte offset 6 (line 1, column 7): ... ; the file looks truncated".
std::string syntax_message(std::string_view text, size_t position, const std::string& what) {
  const size_t offset = std::min(position > 0 ? position - 1 : 0, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  // nlohmann's text: "[json.exception.parse_error.101] parse error at line 1, column 7: <detail>".
  std::string detail = what;
  if (const size_t close = detail.find("] "); detail.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
    detail.erase(0, close + 2);
  }
  if (detail.rfind("parse error at line", 0) == 0) {
    if (const size_t colon = detail.find(": "); colon != std::string::npos) detail.erase(0, colon + 2);
  }
  std::string msg = "not valid JSON at byte offset " + std::to_string(offset) + " (line " + std::to_string(line) +
                    ", column " + std::to_string(offset - line_start + 1) + "): " + printable(detail);
  if (text.find('\0') != std::string_view::npos) {
    msg += "; the file looks binary, not JSON text";
  } else if (detail.find("ill-formed UTF-8") != std::string::npos) {
    msg += "; the file is not valid UTF-8 text";
  } else if (offset >= text.size()) {
    msg += "; the file looks truncated";
  }
  return msg;
}

}  // namespace

json parse_json_strict(std::string_view text, const std::string& file) {
  if (std::all_of(text.begin(), text.end(),
                  [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; })) {
    throw InputError(file, "", "the file is empty; expected a JSON object (a kvfuzz case)");
  }
  StrictSax sax;
  try {
    json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const json::exception& e) {  // not expected: errors arrive through parse_error()
    throw InputError(file, "", "not valid JSON: " + printable(e.what()));
  }
  if (sax.failure) throw InputError(file, sax.failure->first, sax.failure->second);
  if (sax.syntax) throw InputError(file, "", syntax_message(text, sax.syntax->first, sax.syntax->second));
  return std::move(sax.root);
}

}  // namespace kvf
