// case_json.cpp — corpus format v1, v2 (docs/corpus-format.md): Case <-> JSON, the canonical content
// hash and saving a case.
//
// The reader treats every file as hostile. Parsing goes through base/json.h's strict parser (its own
// SAX handler refuses duplicate keys and deep nesting, which nlohmann's DOM parser would accept);
// the typed reader then checks every key, type and integer range before a value reaches a Case, and
// validate() checks the semantics. Only InputError leaves the readers.
#include "case_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "placement.h"

namespace kvf {

using json = nlohmann::json;

namespace {

constexpr const char* kSchemaName = kCaseSchemaName;
std::string join_quoted(std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + quote(n);
  return out;
}


// ---------------------------------------------------------------------------------------------
// Typed reading. Each function checks the JSON type and the range representable in the Case field;
// semantic ranges (sizes >= 1, blocks < num_blocks, ...) are validate()'s.

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw InputError(file_, path, message);
  }

  // Checks that v is an object holding exactly `required` plus any of `optional`.
  void expect_keys(const json& v, const std::string& path, std::initializer_list<const char*> required,
                   std::initializer_list<const char*> optional = {}) const {
    if (!v.is_object()) fail(path, "expected an object, got " + describe(v));
    for (const auto& item : v.items()) {
      const std::string& k = item.key();
      const auto is_k = [&](const char* n) { return k == n; };
      if (std::any_of(required.begin(), required.end(), is_k) || std::any_of(optional.begin(), optional.end(), is_k)) {
        continue;
      }
      std::string expected = join_quoted(required);
      if (optional.size() > 0) expected += " (optional: " + join_quoted(optional) + ")";
      fail(json_child(path, k), "unknown key " + quote(k) + "; expected one of " + expected);
    }
    for (const char* n : required) {
      if (!v.contains(n)) fail(json_child(path, n), "missing key " + quote(n));
    }
  }

  // The value under a key expect_keys() has checked.
  static const json& at(const json& obj, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end()) throw std::logic_error("case_json: key not checked");  // unreachable
    return *it;
  }

  int64_t integer(const json& v, const std::string& path, int64_t lo, int64_t hi, const char* kind) const {
    const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (" + kind + ")";
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (hi >= 0 && u <= static_cast<uint64_t>(hi)) return static_cast<int64_t>(u);
      fail(path, "expected " + range + ", got " + std::to_string(u));
    }
    if (v.is_number_integer()) {
      const int64_t s = v.get<int64_t>();
      if (s >= lo && s <= hi) return s;
      fail(path, "expected " + range + ", got " + std::to_string(s));
    }
    fail(path, "expected an integer, got " + describe(v));
  }
  int64_t int64_field(const json& obj, const std::string& path, const char* key) const {
    return integer(at(obj, key), json_child(path, key), std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max(), "int64");
  }
  int32_t int32_field(const json& obj, const std::string& path, const char* key) const {
    return static_cast<int32_t>(integer(at(obj, key), json_child(path, key), std::numeric_limits<int32_t>::min(),
                                        std::numeric_limits<int32_t>::max(), "int32"));
  }

  bool boolean_field(const json& obj, const std::string& path, const char* key) const {
    const json& v = at(obj, key);
    if (!v.is_boolean()) fail(json_child(path, key), "expected true or false, got " + describe(v));
    return v.get<bool>();
  }

  std::string string_field(const json& obj, const std::string& path, const char* key) const {
    const json& v = at(obj, key);
    if (!v.is_string()) fail(json_child(path, key), "expected a string, got " + describe(v));
    return v.get_ref<const json::string_t&>();
  }

  // A uint64 written as a string of decimal digits ("42"), so that jq and JavaScript keep it exact.
  uint64_t seed_field(const json& obj, const std::string& path, const char* key) const {
    const json& v = at(obj, key);
    const std::string p = json_child(path, key);
    const char* expected = "expected a uint64 as a string of decimal digits (e.g. \"42\"), got ";
    if (!v.is_string()) fail(p, expected + describe(v));
    const std::string& s = v.get_ref<const json::string_t&>();
    if (s.empty() || s.size() > 20 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      fail(p, expected + describe(v));
    }
    uint64_t value = 0;
    for (const char ch : s) {
      const uint64_t d = static_cast<uint64_t>(ch - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - d) / 10) fail(p, expected + describe(v) + " (too large)");
      value = value * 10 + d;
    }
    return value;
  }

  template <typename E>
  E enum_field(const json& obj, const std::string& path, const char* key, std::optional<E> (*parse)(std::string_view),
               const char* what) const {
    const std::string names = quoted_names<E>();
    const json& v = at(obj, key);
    const std::string p = json_child(path, key);
    if (v.is_string()) {
      if (const std::optional<E> e = parse(v.get_ref<const json::string_t&>())) return *e;
      fail(p, std::string("unknown ") + what + " " + quote(v.get_ref<const json::string_t&>()) + "; expected one of " + names);
    }
    fail(p, std::string("expected a string, one of ") + names + ", got " + describe(v));
  }

  const json& array_field(const json& obj, const std::string& path, const char* key) const {
    const json& v = at(obj, key);
    if (!v.is_array()) fail(json_child(path, key), "expected an array, got " + describe(v));
    return v;
  }

  std::vector<int64_t> int64_array(const json& obj, const std::string& path, const char* key) const {
    const json& a = array_field(obj, path, key);
    const std::string p = json_child(path, key);
    std::vector<int64_t> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      out.push_back(integer(a.at(i), json_child(p, i), std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), "int64"));
    }
    return out;
  }

 private:
  const std::string& file_;
};

DType read_dtype(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  return rd.enum_field<DType>(obj, path, key, dtype_from_string, "dtype");
}
IndexType read_index_type(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  return rd.enum_field<IndexType>(obj, path, key, index_type_from_string, "index type");
}
Layout read_layout(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  return rd.enum_field<Layout>(obj, path, key, layout_from_string, "layout");
}
ValueDist read_dist(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  return rd.enum_field<ValueDist>(obj, path, key, value_dist_from_string, "value distribution");
}
ScaleKind read_scale_kind(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  return rd.enum_field<ScaleKind>(obj, path, key, scale_kind_from_string, "scale kind");
}
ScaleDist read_scale_dist(const Reader& rd, const json& obj, const std::string& path, const char* key) {
  return rd.enum_field<ScaleDist>(obj, path, key, scale_dist_from_string, "scale distribution");
}

void read_schema(const Reader& rd, const json& j) {
  if (!j.is_object()) rd.fail("", "expected a JSON object (a kvfuzz case), got " + describe(j));
  const auto schema = j.find("schema");
  if (schema == j.end()) rd.fail("/schema", "missing key \"schema\"; is this a kvfuzz case file?");
  if (!schema->is_string() || schema->get_ref<const json::string_t&>() != kSchemaName) {
    rd.fail("/schema", std::string("expected \"") + kSchemaName + "\", got " + describe(*schema) +
                           "; is this a kvfuzz case file?");
  }
  const auto version = j.find("version");
  if (version == j.end()) rd.fail("/version", "missing key \"version\"");
  const std::string reads = "this kvfuzz reads version " + std::to_string(kCaseSchemaVersion);
  if (version->is_number_unsigned() && version->get<uint64_t>() > static_cast<uint64_t>(kCaseSchemaVersion)) {
    rd.fail("/version", "case schema version " + version->dump() + " was written by a newer kvfuzz; " + reads);
  }
  if (!version->is_number_integer()) rd.fail("/version", "expected the integer 1 or 2, got " + describe(*version));
  if (version->get<int64_t>() != 1 && version->get<int64_t>() != 2) {
    rd.fail("/version", "case schema version " + version->dump() + " is not one kvfuzz ever wrote; " + reads);
  }
}

void read_shape(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/shape";
  const json& s = Reader::at(j, "shape");
  rd.expect_keys(s, p, {"num_heads", "head_dim", "num_q_heads", "input_dtype", "cache_dtype", "slot_dtype"});
  c.num_heads = rd.int32_field(s, p, "num_heads");
  c.head_dim = rd.int32_field(s, p, "head_dim");
  c.num_q_heads = rd.int32_field(s, p, "num_q_heads");
  c.input_dtype = read_dtype(rd, s, p, "input_dtype");
  c.cache_dtype = read_dtype(rd, s, p, "cache_dtype");
  c.slot_dtype = read_index_type(rd, s, p, "slot_dtype");
}

void read_cache(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/cache";
  const json& s = Reader::at(j, "cache");
  rd.expect_keys(s, p, {"layout", "num_blocks", "block_size", "stride_block", "stride_pos", "stride_head", "k_offset",
                        "v_offset", "buffer_elems"});
  c.layout = read_layout(rd, s, p, "layout");
  c.cache.num_blocks = rd.int64_field(s, p, "num_blocks");
  c.cache.block_size = rd.int64_field(s, p, "block_size");
  c.cache.stride_block = rd.int64_field(s, p, "stride_block");
  c.cache.stride_pos = rd.int64_field(s, p, "stride_pos");
  c.cache.stride_head = rd.int64_field(s, p, "stride_head");
  c.cache_k_offset = rd.int64_field(s, p, "k_offset");
  c.cache_v_offset = rd.int64_field(s, p, "v_offset");
  c.cache_buffer_elems = rd.int64_field(s, p, "buffer_elems");
}

CacheGeometry read_strides(const Reader& rd, const json& j, const std::string& path, const char* key) {
  const std::string p = json_child(path, key);
  const json& s = Reader::at(j, key);
  rd.expect_keys(s, p, {"stride_block", "stride_pos", "stride_head"});
  CacheGeometry g;
  g.stride_block = rd.int64_field(s, p, "stride_block");
  g.stride_pos = rd.int64_field(s, p, "stride_pos");
  g.stride_head = rd.int64_field(s, p, "stride_head");
  return g;
}

InputView read_view(const Reader& rd, const json& j, const std::string& path, const char* key) {
  const std::string p = json_child(path, key);
  const json& s = Reader::at(j, key);
  rd.expect_keys(s, p, {"offset", "stride_token", "stride_head"});
  InputView v;
  v.offset = rd.int64_field(s, p, "offset");
  v.stride_token = rd.int64_field(s, p, "stride_token");
  v.stride_head = rd.int64_field(s, p, "stride_head");
  return v;
}

void read_input(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/input";
  const json& s = Reader::at(j, "input");
  rd.expect_keys(s, p, {"num_rows", "buffer_elems", "key", "value"});
  c.num_input_rows = rd.int64_field(s, p, "num_rows");
  c.input_buffer_elems = rd.int64_field(s, p, "buffer_elems");
  c.key = read_view(rd, s, p, "key");
  c.value = read_view(rd, s, p, "value");
}

// Refuses key `key` of a version-1 file: it is one of version 2's (at `path`).
void require_v2(const Reader& rd, const json& j, const std::string& path, const char* key) {
  if (j.at("version") == 1) rd.fail(path, "\"" + std::string(key) + "\" is a version 2 key; this file says \"version\": 1");
}

// v2's "serving": the serving conventions of the call (docs/corpus-format.md); absent: the
// default contract (padding rows carry negative slots).
void read_serving(const Reader& rd, const json& j, Case& c) {
  if (!j.contains("serving")) return;
  require_v2(rd, j, "/serving", "serving");
  const std::string p = "/serving";
  const json& s = Reader::at(j, "serving");
  rd.expect_keys(s, p, {}, {"padding", "addressing", "window", "context_parallel"});
  if (s.contains("padding")) c.padding = rd.enum_field<PaddingMode>(s, p, "padding", padding_mode_from_string, "padding mode");
  if (s.contains("addressing")) c.addressing = rd.enum_field<Addressing>(s, p, "addressing", addressing_from_string, "addressing");
  if (s.contains("window")) {
    const std::string wp = p + "/window";
    const json& w = Reader::at(s, "window");
    rd.expect_keys(w, wp, {"size", "sinks", "input"});
    c.window_size = rd.int64_field(w, wp, "size");
    c.window_sinks = rd.int64_field(w, wp, "sinks");
    c.window_input = rd.enum_field<WindowInput>(w, wp, "input", window_input_from_string, "window input");
    if (c.window_input == WindowInput::none) rd.fail(wp + "/input", "expected \"slot_mapping\" or \"positions\"; leave out \"window\" for no window");
  }
  if (s.contains("context_parallel")) {
    const std::string cp = p + "/context_parallel";
    const json& k = Reader::at(s, "context_parallel");
    rd.expect_keys(k, cp, {"world_size", "interleave", "input"});
    c.cp_world_size = rd.int64_field(k, cp, "world_size");
    c.cp_interleave = rd.int64_field(k, cp, "interleave");
    c.cp_input = rd.enum_field<CpInput>(k, cp, "input", cp_input_from_string, "context-parallel input");
    if (c.cp_input == CpInput::none)
      rd.fail(cp + "/input", "expected \"slot_mapping\" or \"positions\"; leave out \"context_parallel\" for no shards");
  }
}

// v2's "format": the family and what it adds (docs/corpus-format.md); absent: family kv. V's
// num_blocks and block_size are the cache's, so read_cache() must have run.
void read_format(const Reader& rd, const json& j, Case& c) {
  if (!j.contains("format")) return;
  require_v2(rd, j, "/format", "format");
  const std::string p = "/format";
  const json& s = Reader::at(j, "format");
  rd.expect_keys(s, p, {"family"}, {"value_head_dim", "value_cache", "rope_dim", "rope"});
  c.family = rd.enum_field<Family>(s, p, "family", family_from_string, "format family");
  auto refuse = [&](const char* key, const char* why) {
    if (s.contains(key)) rd.fail(json_child(p, key), std::string("family ") + std::string(to_string(c.family)) + " has no " + key + ": " + why);
  };
  if (c.family == Family::kv_split) {
    c.value_head_dim = rd.int32_field(s, p, "value_head_dim");
    c.value_cache = read_strides(rd, s, p, "value_cache");
    c.value_cache->num_blocks = c.cache.num_blocks;
    c.value_cache->block_size = c.cache.block_size;
  } else {
    refuse("value_head_dim", "V has K's head dim");
    refuse("value_cache", "V has K's strides");
  }
  if (c.family == Family::mla) {
    c.rope_dim = rd.int32_field(s, p, "rope_dim");
    c.rope = read_view(rd, s, p, "rope");
  } else {
    refuse("rope_dim", "only an MLA entry has a k_pe part");
    refuse("rope", "only an MLA entry has a k_pe part");
  }
}

// The conventions format f reads, as quant.rules holds them (empty for none and the inline formats).
json rules_json(QuantFormat f, const QuantRules& q) {
  switch (f) {
    case QuantFormat::nvfp4: return {{"nvfp4", to_string(q.nvfp4)}, {"scale_layout", to_string(q.scale_layout)}};
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4: return {{"mx", to_string(q.mx)}};
    case QuantFormat::ds_mla: return {{"ds_mla", to_string(q.ds_mla)}};
    case QuantFormat::indexer_k: return {{"indexer", to_string(q.indexer)}};
    case QuantFormat::asym_int8: return {{"asym_arith", to_string(q.asym_arith)}, {"asym_lanes", to_string(q.asym_lanes)}};
    case QuantFormat::asym_int4:
      return {{"asym_arith", to_string(q.asym_arith)}, {"asym_lanes", to_string(q.asym_lanes)}, {"int4_pairing", to_string(q.int4_pairing)}};
    default: return json::object();
  }
}

// v2's quant.rules: the conventions of the case's format (quant_format.h); only the keys its
// format reads (those rules_json writes for it) may appear.
void read_rules(const Reader& rd, const json& r, const std::string& rp, QuantFormat format, QuantRules& q) {
  if (!r.is_object()) rd.fail(rp, "expected an object of the format's conventions");
  const json read = rules_json(format, QuantRules{});
  for (const auto& item : r.items()) {
    if (read.contains(item.key())) continue;
    std::string known;
    for (const auto& k : read.items()) known += (known.empty() ? "" : ", ") + quote(k.key());
    rd.fail(json_child(rp, item.key()), "unknown key " + quote(item.key()) + "; format " + std::string(to_string(format)) +
                                       " reads " + (known.empty() ? std::string("no conventions") : known));
  }
  if (r.contains("nvfp4")) q.nvfp4 = rd.enum_field<Nvfp4Rule>(r, rp, "nvfp4", nvfp4_rule_from_string, "NVFP4 rule");
  if (r.contains("scale_layout")) q.scale_layout = rd.enum_field<ScaleLayout>(r, rp, "scale_layout", scale_layout_from_string, "scale layout");
  if (r.contains("mx")) q.mx = rd.enum_field<MxScaleRule>(r, rp, "mx", mx_scale_rule_from_string, "MX scale rule");
  if (r.contains("ds_mla")) q.ds_mla = rd.enum_field<DsMlaScale>(r, rp, "ds_mla", ds_mla_scale_from_string, "ds_mla scale rule");
  if (r.contains("indexer")) q.indexer = rd.enum_field<IndexerScale>(r, rp, "indexer", indexer_scale_from_string, "indexer scale rule");
  if (r.contains("asym_arith")) q.asym_arith = rd.enum_field<AsymArith>(r, rp, "asym_arith", asym_arith_from_string, "arithmetic");
  if (r.contains("asym_lanes")) q.asym_lanes = rd.enum_field<AsymLanes>(r, rp, "asym_lanes", asym_lanes_from_string, "lane policy");
  if (r.contains("int4_pairing"))
    q.int4_pairing = rd.enum_field<Int4Pairing>(r, rp, "int4_pairing", int4_pairing_from_string, "int4 pairing");
}

// The scale cache's num_blocks and block_size are not stored: they are the cache's for
// per_token_head and the formats with a scale cache, 0 otherwise (case.h), so read_cache() must
// have run.
void read_quant(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/quant";
  const json& s = Reader::at(j, "quant");
  rd.expect_keys(s, p, {"scale_kind", "scale_dist", "scale_cache", "scale_k_offset", "scale_v_offset",
                        "scale_cache_elems"}, {"format", "rules"});
  c.scale_kind = read_scale_kind(rd, s, p, "scale_kind");
  c.scale_dist = read_scale_dist(rd, s, p, "scale_dist");
  if (s.contains("format")) {
    require_v2(rd, j, p + "/format", "quant.format");
    c.quant_format = rd.enum_field<QuantFormat>(s, p, "format", quant_format_from_string, "quantised format");
    if (c.quant_format == QuantFormat::none) rd.fail(p + "/format", "expected a quantised format; leave out \"format\" for the classic caches");
  }
  if (s.contains("rules")) {
    require_v2(rd, j, p + "/rules", "quant.rules");
    if (c.quant_format == QuantFormat::none) rd.fail(p + "/rules", "conventions belong to a quantised format (\"format\")");
  }
  if (s.contains("rules")) read_rules(rd, Reader::at(s, "rules"), p + "/rules", c.quant_format, c.quant_rules);
  c.scale_cache = read_strides(rd, s, p, "scale_cache");
  if (c.uses_scale_cache()) {
    c.scale_cache.num_blocks = c.cache.num_blocks;
    c.scale_cache.block_size = c.cache.block_size;
  }
  c.scale_k_offset = rd.int64_field(s, p, "scale_k_offset");
  c.scale_v_offset = rd.int64_field(s, p, "scale_v_offset");
  c.scale_cache_elems = rd.int64_field(s, p, "scale_cache_elems");
}

void read_requests(const Reader& rd, const json& j, Case& c) {
  const json& a = rd.array_field(j, "", "requests");
  c.requests.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = json_child("/requests", i);
    const json& s = a.at(i);
    rd.expect_keys(s, p, {"context_len", "new_len", "blocks"}, {"positions"});
    Request r;
    r.context_len = rd.int64_field(s, p, "context_len");
    r.new_len = rd.int64_field(s, p, "new_len");
    r.blocks = rd.int64_array(s, p, "blocks");
    // Optional: absent = consecutive from context_len (placement.h), as in files from before it.
    if (s.contains("positions")) {
      require_v2(rd, j, p + "/positions", "positions");
      r.positions = rd.int64_array(s, p, "positions");
    }
    c.requests.push_back(std::move(r));
  }
}

void read_payload(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/payload";
  const json& s = Reader::at(j, "payload");
  rd.expect_keys(s, p, {"dist", "seed"});
  c.dist = read_dist(rd, s, p, "dist");
  c.payload_seed = rd.seed_field(s, p, "seed");
}

void read_expect(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/expect";
  const json& s = Reader::at(j, "expect");
  if (!s.is_object()) rd.fail(p, "expected an object, got " + describe(s));
  const auto outcome = s.find("outcome");
  if (outcome == s.end()) rd.fail("/expect/outcome", "missing key \"outcome\"");
  if (outcome->is_string() && outcome->get_ref<const json::string_t&>() == "pass") {
    if (s.contains("finding_kind")) {
      rd.fail("/expect/finding_kind", "a case expected to pass has no finding_kind; remove it or expect \"fail\"");
    }
    rd.expect_keys(s, p, {"outcome"});
    c.expect = {Expect::pass, ""};
  } else if (outcome->is_string() && outcome->get_ref<const json::string_t&>() == "fail") {
    rd.expect_keys(s, p, {"outcome", "finding_kind"});
    c.expect = {Expect::fail, rd.string_field(s, p, "finding_kind")};
  } else {
    rd.fail("/expect/outcome", "expected \"pass\" or \"fail\", got " + describe(*outcome));
  }
}

void read_provenance(const Reader& rd, const json& j, Case& c) {
  const std::string p = "/provenance";
  const json& s = Reader::at(j, "provenance");
  rd.expect_keys(s, p, {"seed", "case_index", "tool_version", "command_line", "target"}, {"target_digest"});
  c.provenance.seed = rd.string_field(s, p, "seed");
  c.provenance.case_index = rd.int64_field(s, p, "case_index");
  c.provenance.tool_version = rd.string_field(s, p, "tool_version");
  c.provenance.command_line = rd.string_field(s, p, "command_line");
  c.provenance.target = rd.string_field(s, p, "target");
  if (s.contains("target_digest")) c.provenance.target_digest = rd.string_field(s, p, "target_digest");  // optional: older files lack it
}

Genotype read_genotype(const Reader& rd, const json& j) {
  const std::string p = "/genotype";
  const json& s = Reader::at(j, "genotype");
  rd.expect_keys(s, p, {"layout", "block_size", "num_heads", "head_dim", "gqa_ratio", "fused_qkv", "input_dtype",
                        "cache_dtype", "slot_dtype", "requests", "tail_padding", "interleaved_padding",
                        "invalid_slots", "extra_input_rows", "spare_blocks", "irregular", "dist", "scale_kind",
                        "scale_dist", "layout_seed"},
                 {"gapped_strides", "misaligned_bases", "kv_views", "family", "value_head_dim", "rope_dim", "scattered_positions",
                  "shared_prefix_blocks", "padding", "addressing", "window_input", "window_size", "window_sinks", "cp_input",
                  "cp_world_size", "cp_interleave", "quant_format", "quant_rules"});
  Genotype g;
  g.layout = read_layout(rd, s, p, "layout");
  g.block_size = rd.int32_field(s, p, "block_size");
  g.num_heads = rd.int32_field(s, p, "num_heads");
  g.head_dim = rd.int32_field(s, p, "head_dim");
  g.gqa_ratio = rd.int32_field(s, p, "gqa_ratio");
  g.fused_qkv = rd.boolean_field(s, p, "fused_qkv");
  g.input_dtype = read_dtype(rd, s, p, "input_dtype");
  g.cache_dtype = read_dtype(rd, s, p, "cache_dtype");
  g.slot_dtype = read_index_type(rd, s, p, "slot_dtype");
  const json& reqs = rd.array_field(s, p, "requests");
  g.requests.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string rp = json_child(p + "/requests", i);
    const json& r = reqs.at(i);
    rd.expect_keys(r, rp, {"context_len", "new_len"});
    g.requests.push_back({rd.int64_field(r, rp, "context_len"), rd.int64_field(r, rp, "new_len")});
  }
  g.tail_padding = rd.int32_field(s, p, "tail_padding");
  g.interleaved_padding = rd.int32_field(s, p, "interleaved_padding");
  g.invalid_slots = rd.int32_field(s, p, "invalid_slots");
  g.extra_input_rows = rd.int32_field(s, p, "extra_input_rows");
  g.spare_blocks = rd.int32_field(s, p, "spare_blocks");
  g.irregular = rd.boolean_field(s, p, "irregular");
  // Optional (written only when they differ from these defaults): files from before the three
  // features were separate had one `irregular` flag for all of them, and K and V views alike.
  g.gapped_strides = s.contains("gapped_strides") ? rd.boolean_field(s, p, "gapped_strides") : g.irregular;
  g.misaligned_bases = s.contains("misaligned_bases") ? rd.boolean_field(s, p, "misaligned_bases") : g.irregular;
  g.kv_views = s.contains("kv_views") ? rd.enum_field<KvViews>(s, p, "kv_views", kv_views_from_string, "K/V views kind")
                                      : KvViews::alike;
  g.family = s.contains("family") ? rd.enum_field<Family>(s, p, "family", family_from_string, "format family") : Family::kv;
  g.value_head_dim = s.contains("value_head_dim") ? rd.int32_field(s, p, "value_head_dim") : 0;
  g.rope_dim = s.contains("rope_dim") ? rd.int32_field(s, p, "rope_dim") : 0;
  // Optional too (absent = consecutive positions, no shared blocks: every genotype before them).
  g.scattered_positions = s.contains("scattered_positions") && rd.boolean_field(s, p, "scattered_positions");
  g.shared_prefix_blocks = s.contains("shared_prefix_blocks") ? rd.int32_field(s, p, "shared_prefix_blocks") : 0;
  g.padding = s.contains("padding") ? rd.enum_field<PaddingMode>(s, p, "padding", padding_mode_from_string, "padding mode")
                                    : PaddingMode::negative;
  g.addressing = s.contains("addressing") ? rd.enum_field<Addressing>(s, p, "addressing", addressing_from_string, "addressing")
                                          : Addressing::slot_mapping;
  g.window_input = s.contains("window_input")
                       ? rd.enum_field<WindowInput>(s, p, "window_input", window_input_from_string, "window input")
                       : WindowInput::none;
  g.window_size = s.contains("window_size") ? rd.int32_field(s, p, "window_size") : 0;
  g.window_sinks = s.contains("window_sinks") ? rd.int32_field(s, p, "window_sinks") : 0;
  g.cp_input = s.contains("cp_input") ? rd.enum_field<CpInput>(s, p, "cp_input", cp_input_from_string, "context-parallel input")
                                      : CpInput::none;
  g.cp_world_size = s.contains("cp_world_size") ? rd.int32_field(s, p, "cp_world_size") : 0;
  g.cp_interleave = s.contains("cp_interleave") ? rd.int32_field(s, p, "cp_interleave") : 0;
  if (s.contains("quant_format")) {
    g.quant_format = rd.enum_field<QuantFormat>(s, p, "quant_format", quant_format_from_string, "quantised format");
    if (s.contains("quant_rules")) read_rules(rd, Reader::at(s, "quant_rules"), p + "/quant_rules", g.quant_format, g.quant_rules);
  }
  g.dist = read_dist(rd, s, p, "dist");
  g.scale_kind = read_scale_kind(rd, s, p, "scale_kind");
  g.scale_dist = read_scale_dist(rd, s, p, "scale_dist");
  g.layout_seed = rd.seed_field(s, p, "layout_seed");
  return g;
}

Case read_case(const Reader& rd, const json& j) {
  read_schema(rd, j);
  rd.expect_keys(j, "", {"schema", "version", "shape", "cache", "quant", "input", "slot_mapping", "requests",
                         "payload", "expect", "provenance"},
                 {"genotype", "format", "serving", "explicit_inputs"});
  Case c;
  read_shape(rd, j, c);
  read_cache(rd, j, c);
  read_format(rd, j, c);
  read_serving(rd, j, c);
  read_quant(rd, j, c);
  read_input(rd, j, c);
  c.slot_mapping = rd.int64_array(j, "", "slot_mapping");
  read_requests(rd, j, c);
  read_payload(rd, j, c);
  read_expect(rd, j, c);
  read_provenance(rd, j, c);
  if (j.contains("genotype")) c.genotype = read_genotype(rd, j);
  // Last: the rows and sizes it is checked against are read.
  if (j.contains("explicit_inputs")) c.explicit_inputs = explicit_inputs_from_json(Reader::at(j, "explicit_inputs"), c, rd.file());
  return c;
}

// The first problem's message, then up to four more with their paths.
std::string summarize(const std::vector<ValidationProblem>& problems) {
  constexpr size_t kShown = 5;
  std::string msg = problems.front().message;
  for (size_t i = 1; i < problems.size() && i < kShown; ++i) {
    msg += "\n  also";
    if (!problems[i].json_path.empty()) msg += " at " + problems[i].json_path;
    msg += ": " + problems[i].message;
  }
  if (problems.size() > kShown) msg += "\n  and " + std::to_string(problems.size() - kShown) + " more";
  return msg;
}

json view_to_json(const InputView& v) {
  return {{"offset", v.offset}, {"stride_token", v.stride_token}, {"stride_head", v.stride_head}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------


int case_schema_version(const Case& c) {
  if (c.family != Family::kv || c.padding != PaddingMode::negative || c.addressing != Addressing::slot_mapping || c.has_window() ||
      c.has_cp() || c.has_format() || c.explicit_inputs)
    return 2;
  std::set<int64_t> seen;  // a block in two tables: a shared prefix block
  for (const Request& r : c.requests) {
    if (!consecutive_positions(r)) return 2;
    for (const int64_t b : r.blocks)
      if (!seen.insert(b).second) return 2;
  }
  if (c.genotype && (c.genotype->family != Family::kv || c.genotype->scattered_positions || c.genotype->shared_prefix_blocks != 0 ||
                     c.genotype->padding != PaddingMode::negative || c.genotype->addressing != Addressing::slot_mapping ||
                     c.genotype->window_input != WindowInput::none || c.genotype->cp_input != CpInput::none))
    return 2;
  return 1;
}

json case_to_json(const Case& c) {
  json j;
  j["schema"] = kSchemaName;
  j["version"] = case_schema_version(c);
  if (c.family != Family::kv) {
    json f = {{"family", to_string(c.family)}};
    if (c.family == Family::kv_split) {
      const CacheGeometry& g = c.value_geometry();
      f["value_head_dim"] = c.value_head_dim;
      f["value_cache"] = {{"stride_block", g.stride_block}, {"stride_pos", g.stride_pos}, {"stride_head", g.stride_head}};
    }
    if (c.family == Family::mla) {
      f["rope_dim"] = c.rope_dim;
      f["rope"] = view_to_json(c.rope);
    }
    j["format"] = std::move(f);
  }
  if (c.padding != PaddingMode::negative) j["serving"]["padding"] = to_string(c.padding);
  if (c.addressing != Addressing::slot_mapping) j["serving"]["addressing"] = to_string(c.addressing);
  if (c.has_window())
    j["serving"]["window"] = {{"size", c.window_size}, {"sinks", c.window_sinks}, {"input", to_string(c.window_input)}};
  if (c.has_cp())
    j["serving"]["context_parallel"] = {
        {"world_size", c.cp_world_size}, {"interleave", c.cp_interleave}, {"input", to_string(c.cp_input)}};
  j["shape"] = {{"num_heads", c.num_heads},
                {"head_dim", c.head_dim},
                {"num_q_heads", c.num_q_heads},
                {"input_dtype", to_string(c.input_dtype)},
                {"cache_dtype", to_string(c.cache_dtype)},
                {"slot_dtype", to_string(c.slot_dtype)}};
  j["cache"] = {{"layout", to_string(c.layout)},
                {"num_blocks", c.cache.num_blocks},
                {"block_size", c.cache.block_size},
                {"stride_block", c.cache.stride_block},
                {"stride_pos", c.cache.stride_pos},
                {"stride_head", c.cache.stride_head},
                {"k_offset", c.cache_k_offset},
                {"v_offset", c.cache_v_offset},
                {"buffer_elems", c.cache_buffer_elems}};
  j["quant"] = {{"scale_kind", to_string(c.scale_kind)},
                {"scale_dist", to_string(c.scale_dist)},
                {"scale_cache",
                 {{"stride_block", c.scale_cache.stride_block},
                  {"stride_pos", c.scale_cache.stride_pos},
                  {"stride_head", c.scale_cache.stride_head}}},
                {"scale_k_offset", c.scale_k_offset},
                {"scale_v_offset", c.scale_v_offset},
                {"scale_cache_elems", c.scale_cache_elems}};
  if (c.has_format()) {
    j["quant"]["format"] = to_string(c.quant_format);
    const json r = rules_json(c.quant_format, c.quant_rules);
    if (!r.empty()) j["quant"]["rules"] = r;
  }
  j["input"] = {{"num_rows", c.num_input_rows},
                {"buffer_elems", c.input_buffer_elems},
                {"key", view_to_json(c.key)},
                {"value", view_to_json(c.value)}};
  j["slot_mapping"] = c.slot_mapping;
  json requests = json::array();
  for (const Request& r : c.requests) {
    json q = {{"context_len", r.context_len}, {"new_len", r.new_len}, {"blocks", r.blocks}};
    // Left out for consecutive placement, so that files and hashes from before `positions` stay.
    // A ring with positions input keeps even a shuffled consecutive order: its rows' slots collide,
    // so they do not say which row is which token (window.h).
    if (!consecutive_positions(r) || (c.window_input == WindowInput::positions && !r.positions.empty())) q["positions"] = r.positions;
    requests.push_back(std::move(q));
  }
  j["requests"] = std::move(requests);
  j["payload"] = {{"dist", to_string(c.dist)}, {"seed", std::to_string(c.payload_seed)}};
  if (c.explicit_inputs) j["explicit_inputs"] = explicit_inputs_to_json(c);
  if (c.expect.outcome == Expect::pass) {
    j["expect"] = {{"outcome", "pass"}};
  } else {
    j["expect"] = {{"outcome", "fail"}, {"finding_kind", c.expect.finding_kind}};
  }
  j["provenance"] = {{"seed", c.provenance.seed},
                     {"case_index", c.provenance.case_index},
                     {"tool_version", c.provenance.tool_version},
                     {"command_line", c.provenance.command_line},
                     {"target", c.provenance.target}};
  if (!c.provenance.target_digest.empty()) j["provenance"]["target_digest"] = c.provenance.target_digest;
  if (c.genotype) {
    const Genotype& g = *c.genotype;
    json reqs = json::array();
    for (const RequestGene& r : g.requests) reqs.push_back({{"context_len", r.context_len}, {"new_len", r.new_len}});
    j["genotype"] = {{"layout", to_string(g.layout)},
                     {"block_size", g.block_size},
                     {"num_heads", g.num_heads},
                     {"head_dim", g.head_dim},
                     {"gqa_ratio", g.gqa_ratio},
                     {"fused_qkv", g.fused_qkv},
                     {"input_dtype", to_string(g.input_dtype)},
                     {"cache_dtype", to_string(g.cache_dtype)},
                     {"slot_dtype", to_string(g.slot_dtype)},
                     {"requests", std::move(reqs)},
                     {"tail_padding", g.tail_padding},
                     {"interleaved_padding", g.interleaved_padding},
                     {"invalid_slots", g.invalid_slots},
                     {"extra_input_rows", g.extra_input_rows},
                     {"spare_blocks", g.spare_blocks},
                     {"irregular", g.irregular},
                     {"dist", to_string(g.dist)},
                     {"scale_kind", to_string(g.scale_kind)},
                     {"scale_dist", to_string(g.scale_dist)},
                     {"layout_seed", std::to_string(g.layout_seed)}};
    // Left out when they have their defaults (read_genotype), so that files and hashes of genotypes
    // expressible before these keys existed stay as they were.
    if (g.gapped_strides != g.irregular) j["genotype"]["gapped_strides"] = g.gapped_strides;
    if (g.misaligned_bases != g.irregular) j["genotype"]["misaligned_bases"] = g.misaligned_bases;
    if (g.kv_views != KvViews::alike) j["genotype"]["kv_views"] = to_string(g.kv_views);
    if (g.family != Family::kv) j["genotype"]["family"] = to_string(g.family);
    if (g.value_head_dim != 0) j["genotype"]["value_head_dim"] = g.value_head_dim;
    if (g.rope_dim != 0) j["genotype"]["rope_dim"] = g.rope_dim;
    if (g.scattered_positions) j["genotype"]["scattered_positions"] = true;
    if (g.shared_prefix_blocks != 0) j["genotype"]["shared_prefix_blocks"] = g.shared_prefix_blocks;
    if (g.padding != PaddingMode::negative) j["genotype"]["padding"] = to_string(g.padding);
    if (g.addressing != Addressing::slot_mapping) j["genotype"]["addressing"] = to_string(g.addressing);
    if (g.window_input != WindowInput::none) {
      j["genotype"]["window_input"] = to_string(g.window_input);
      j["genotype"]["window_size"] = g.window_size;
      j["genotype"]["window_sinks"] = g.window_sinks;
    }
    if (g.quant_format != QuantFormat::none) {
      j["genotype"]["quant_format"] = to_string(g.quant_format);
      j["genotype"]["quant_rules"] = rules_json(g.quant_format, g.quant_rules);
    }
    if (g.cp_input != CpInput::none) {
      j["genotype"]["cp_input"] = to_string(g.cp_input);
      j["genotype"]["cp_world_size"] = g.cp_world_size;
      j["genotype"]["cp_interleave"] = g.cp_interleave;
    }
  }
  return j;
}

Case case_from_json(const json& j, const std::string& file, const Limits& limits) {
  try {
    const Reader rd(file);
    Case c = read_case(rd, j);
    const std::vector<ValidationProblem> problems = validate(c, limits);
    if (!problems.empty()) throw InputError(file, problems.front().json_path, summarize(problems));
    return c;
  } catch (const InputError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw InputError(file, "", "out of memory while reading the case");
  } catch (const std::exception& e) {  // not expected; keeps the "only InputError" promise
    throw InputError(file, "", std::string("cannot read the case: ") + printable(e.what()));
  }
}

Case case_from_text(std::string_view text, const std::string& file, const Limits& limits) {
  try {
    const json j = parse_json_strict(text, file);
    return case_from_json(j, file, limits);
  } catch (const InputError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw InputError(file, "", "out of memory while parsing the file");
  }
}

Case read_case_file(const std::filesystem::path& file, const Limits& limits) {
  const std::string name = file.string();
  // O_NONBLOCK: opening a FIFO must not hang; fstat() below refuses anything but a regular file.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw InputError(name, "", "no such file; expected a kvfuzz case file (.json)");
    throw InputError(name, "", "cannot open the file: " + errno_text(err));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(name, "", "cannot stat the file: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(name, "", "is a directory; expected a kvfuzz case file (.json)");
  if (!S_ISREG(st.st_mode)) throw InputError(name, "", "not a regular file; expected a kvfuzz case file (.json)");
  const std::string too_large = "the file is larger than the " + std::to_string(kMaxCaseFileBytes >> 20) +
                                " MiB limit on case files";
  if (st.st_size > kMaxCaseFileBytes) {
    throw InputError(name, "", too_large + " (" + std::to_string(st.st_size) + " bytes)");
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);  // one byte more reveals a file that grew
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > static_cast<size_t>(kMaxCaseFileBytes)) throw InputError(name, "", too_large);
      text.resize(std::min(text.size() * 2, static_cast<size_t>(kMaxCaseFileBytes) + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(name, "", "cannot read the file: " + errno_text(errno));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return case_from_text(text, name, limits);
}

std::string case_hash(const Case& c) {
  json j = case_to_json(c);
  j.erase("provenance");
  j.erase("expect");
  return fnv1a_hex(j.dump(-1, ' ', false, json::error_handler_t::replace));
}



std::string json_file_schema(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxCaseFileBytes) return "";
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  try {
    const json j = parse_json_strict(text, file.string());
    const auto schema = j.is_object() ? j.find("schema") : j.end();
    return schema != j.end() && schema->is_string() ? schema->get<std::string>() : "";
  } catch (const InputError&) {
    return "";
  }
}


std::filesystem::path save_case(const Case& c, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InfraError("cannot create directory " + dir.string() + ": " + ec.message());
  const std::filesystem::path file = dir / (case_hash(c) + ".json");
  // replace: a provenance string with invalid UTF-8 (a command line) must not make saving fail.
  const std::string text = case_to_json(c).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (write_new_file_atomic(file, text)) return file;
  // The name exists. The same batch saved earlier (another run, another thread, the input of
  // `kvfuzz shrink`) is kept as it is; anything else there is not ours to replace.
  Limits any;  // only the identity of the existing file matters here, not its size
  any.max_buffer_bytes = any.max_slots = any.max_requests = int64_t{1} << 62;
  any.max_heads = any.max_head_dim = 1 << 30;
  try {
    if (case_hash(read_case_file(file, any)) == case_hash(c)) return file;
  } catch (const InputError&) {  // not a case at all: refused below
  }
  throw InfraError("refusing to overwrite " + file.string() +
                   ": it exists and is not the case kvfuzz would save there; move it away or choose another directory");
}

}  // namespace kvf
