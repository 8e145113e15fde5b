// explicit_inputs.cpp — see explicit_inputs.h.
#include "explicit_inputs.h"

#include <algorithm>
#include <array>

#include "case.h"
#include "case_json.h"
#include "base/errors.h"

namespace kvf {

namespace {

constexpr const char* kEncoding = "le-bits-base64-v1";
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// The bytes of standard base64 with padding; nullopt for any other text.
std::optional<std::string> unbase64(const std::string& text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::array<int, 256> value{};
  value.fill(-1);
  for (int i = 0; i < 64; ++i) value[static_cast<uint8_t>(kAlphabet[i])] = i;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char ch = text[i + static_cast<size_t>(k)];
      if (ch == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = value[static_cast<uint8_t>(ch)];
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t n = static_cast<uint32_t>(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
    out += static_cast<char>(n >> 16);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(n & 0xFF);
  }
  return out;
}

std::string bytes_of(const std::vector<uint32_t>& bits, int width) {
  std::string out;
  out.reserve(bits.size() * static_cast<size_t>(width));
  for (uint32_t b : bits)
    for (int i = 0; i < width; ++i) out += static_cast<char>((b >> (8 * i)) & 0xFF);
  return out;
}

std::vector<uint32_t> bits_of(const std::string& bytes, int width) {
  std::vector<uint32_t> out(bytes.size() / static_cast<size_t>(width));
  for (size_t e = 0; e < out.size(); ++e)
    for (int i = 0; i < width; ++i) out[e] |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[e * static_cast<size_t>(width) + static_cast<size_t>(i)])) << (8 * i);
  return out;
}

int width_of(DType t) { return t == DType::f32 ? 4 : 2; }

int64_t value_dims(const Case& c) { return c.has_value() ? c.value_dim() : 0; }

}  // namespace

int64_t ExplicitInputs::index_of(int64_t row) const {
  const auto it = std::lower_bound(rows.begin(), rows.end(), row);
  return it != rows.end() && *it == row ? it - rows.begin() : -1;
}

std::optional<uint32_t> explicit_bits(const Case& c, bool is_value, int64_t row, int64_t head, int64_t dim) {
  if (!c.explicit_inputs) return std::nullopt;
  const ExplicitInputs& x = *c.explicit_inputs;
  const int64_t i = x.index_of(row);
  if (i < 0) return std::nullopt;
  const int64_t dims = is_value ? value_dims(c) : c.head_dim;
  const std::vector<uint32_t>& v = is_value ? x.value : x.key;
  const size_t at = static_cast<size_t>((i * c.num_heads + head) * dims + dim);
  if (at >= v.size()) return std::nullopt;
  return v[at];
}

bool is_input_canary_pattern(uint32_t bits, DType t) {
  switch (t) {
    case DType::f16: return bits == 0xFFFFu || (bits & ~0xFu) == 0x7E00u;
    case DType::bf16: return bits == 0xFFFFu || (bits & ~0xFu) == 0x7FC0u;
    case DType::f32: return bits == 0xFFFFFFFFu || (bits & ~0xFu) == 0x7FC00000u;
    default: return false;
  }
}

nlohmann::json explicit_inputs_to_json(const Case& c) {
  const ExplicitInputs& x = *c.explicit_inputs;
  const int w = width_of(c.input_dtype);
  const std::string key = bytes_of(x.key, w), value = bytes_of(x.value, w);
  nlohmann::json j = {{"encoding", kEncoding}, {"rows", x.rows}, {"key", base64(key)}};
  if (c.has_value()) j["value"] = base64(value);
  j["digest"] = "fnv1a64:" + fnv1a_hex(key + value);
  return j;
}

ExplicitInputs explicit_inputs_from_json(const nlohmann::json& j, const Case& c, const std::string& file) {
  const std::string p = "/explicit_inputs";
  const auto fail = [&](const std::string& path, const std::string& what) { throw InputError(file, path, what); };
  if (!j.is_object()) fail(p, "expected an object {\"encoding\", \"rows\", \"key\", \"value\", \"digest\"}");
  for (const auto& item : j.items())
    if (item.key() != "encoding" && item.key() != "rows" && item.key() != "key" && item.key() != "value" && item.key() != "digest")
      fail(p + "/" + item.key(), "unknown key \"" + item.key() + "\"; expected encoding, rows, key, value (kv and kv_split), digest");
  for (const char* k : {"encoding", "rows", "key", "digest"})
    if (!j.contains(k)) fail(p + "/" + k, std::string("missing key \"") + k + "\"");
  if (!j["encoding"].is_string() || j["encoding"].get<std::string>() != kEncoding)
    fail(p + "/encoding", std::string("expected \"") + kEncoding + "\" (little-endian element bits, base64), got " + j["encoding"].dump());
  if (c.input_dtype != DType::f16 && c.input_dtype != DType::bf16 && c.input_dtype != DType::f32)
    fail(p, "explicit values need an f16, bf16 or f32 input");
  if (c.has_value() != j.contains("value"))
    fail(p + "/value", c.has_value() ? "missing key \"value\": the case's family has a value input"
                                      : "the case's family (" + std::string(to_string(c.family)) + ") has no value input; leave \"value\" out");
  ExplicitInputs x;
  const nlohmann::json& rows = j["rows"];
  if (!rows.is_array()) fail(p + "/rows", "expected an array of input rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string rp = p + "/rows/" + std::to_string(i);
    if (!rows[i].is_number_integer()) fail(rp, "expected an integer input row, got " + rows[i].dump());
    const int64_t r = rows[i].get<int64_t>();
    if (!x.rows.empty() && r <= x.rows.back()) fail(rp, "rows must be ascending and distinct (" + std::to_string(r) + " after " + std::to_string(x.rows.back()) + ")");
    if (r < 0 || r >= c.num_slots())
      fail(rp, "row " + std::to_string(r) + " is not one of the T = " + std::to_string(c.num_slots()) + " rows the append reads");
    const int64_t slot = c.slot_mapping[static_cast<size_t>(r)];
    if (c.is_padding(slot) || slot >= c.capacity())
      fail(rp, "row " + std::to_string(r) + " has slot " + std::to_string(slot) +
                   " (padding or past capacity): its values are canaries kvfuzz owns; list written rows only");
    x.rows.push_back(r);
  }
  const int w = width_of(c.input_dtype);
  std::string all;
  for (const char* tensor : {"key", "value"}) {
    if (!j.contains(tensor)) continue;
    const std::string tp = p + "/" + tensor;
    if (!j[tensor].is_string()) fail(tp, "expected a base64 string");
    const std::optional<std::string> bytes = unbase64(j[tensor].get<std::string>());
    if (!bytes) fail(tp, "not standard base64 (A-Z a-z 0-9 + /, padded with = to a multiple of 4 characters)");
    const int64_t dims = std::string(tensor) == "key" ? c.head_dim : value_dims(c);
    const int64_t want = static_cast<int64_t>(x.rows.size()) * c.num_heads * dims * w;
    if (static_cast<int64_t>(bytes->size()) != want)
      fail(tp, std::to_string(bytes->size()) + " bytes; expected rows x heads x dims x " + std::to_string(w) + " = " +
                   std::to_string(x.rows.size()) + " x " + std::to_string(c.num_heads) + " x " + std::to_string(dims) + " x " +
                   std::to_string(w) + " = " + std::to_string(want) + " (" + std::string(to_string(c.input_dtype)) + " elements)");
    std::vector<uint32_t> bits = bits_of(*bytes, w);
    for (size_t e = 0; e < bits.size(); ++e)
      if (is_input_canary_pattern(bits[e], c.input_dtype)) {
        const int64_t per_row = c.num_heads * dims;
        fail(tp, "element " + std::to_string(e) + " (row " + std::to_string(x.rows[e / static_cast<size_t>(per_row)]) + ", head " +
                     std::to_string(static_cast<int64_t>(e) % per_row / dims) + ", dim " + std::to_string(static_cast<int64_t>(e) % dims) +
                     ") is one of kvfuzz's canary or guard NaN patterns; use another NaN payload");
      }
    (std::string(tensor) == "key" ? x.key : x.value) = std::move(bits);
    all += *bytes;
  }
  if (!j["digest"].is_string()) fail(p + "/digest", "expected \"fnv1a64:\" and 16 hex digits");
  const std::string digest = "fnv1a64:" + fnv1a_hex(all);
  if (j["digest"].get<std::string>() != digest)
    fail(p + "/digest", "is " + j["digest"].dump() + " but the decoded key and value bytes give \"" + digest +
                            "\": the values were changed or cut; rewrite the digest if the change is meant");
  return x;
}

}  // namespace kvf
