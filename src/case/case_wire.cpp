// case_wire.cpp — the worker hand-off's binary form of a Case (see case_wire.h).
#include "case_wire.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/errors.h"
#include "types.h"

namespace kvf {

namespace {

constexpr uint32_t kMagic = 0x5743564Bu;  // "KVCW" in little-endian byte order

// Expect has no name table (case.h spells it through Expectation::text()).
std::string_view to_string(Expect e) { return e == Expect::pass ? "pass" : e == Expect::fail ? "fail" : "?"; }

class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_enum_v<T>);
    char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    out_.append(bytes, sizeof(T));
  }
  template <typename E>
  void put_enum(E e) {
    static_assert(std::is_enum_v<E> && sizeof(E) == 1);
    put(static_cast<uint8_t>(e));
  }
  void put_ints(const std::vector<int64_t>& v) {
    put(static_cast<uint64_t>(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));  // data() may be null
  }
  void put_text(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_.append(s);
  }
  void put_geometry(const CacheGeometry& g) {
    for (int64_t v : {g.num_blocks, g.block_size, g.stride_block, g.stride_pos, g.stride_head}) put(v);
  }
  void put_view(const InputView& v) {
    for (int64_t x : {v.offset, v.stride_token, v.stride_head}) put(x);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  template <typename T>
  T get(const char* what) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_enum_v<T>);
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  // An enumeration with names (types.h, quant_format.h): a value without one is refused.
  template <typename E>
  E get_enum(const char* what) {
    static_assert(std::is_enum_v<E> && sizeof(E) == 1);
    const size_t at = at_;
    const auto e = static_cast<E>(get<uint8_t>(what));
    if (to_string(e) == "?") fail(at, std::string(what) + " is " + std::to_string(static_cast<int>(e)) + ", not a value it can have");
    return e;
  }
  bool get_flag(const char* what) {
    const size_t at = at_;
    const auto v = get<uint8_t>(what);
    if (v > 1) fail(at, std::string(what) + " is " + std::to_string(v) + ", expected 0 or 1");
    return v == 1;
  }
  std::vector<int64_t> get_ints(const char* what) {
    const uint64_t n = count(sizeof(int64_t), what);
    std::vector<int64_t> v(n);
    if (n > 0) std::memcpy(v.data(), bytes_.data() + at_, n * sizeof(int64_t));  // an empty vector's data() may be null
    at_ += n * sizeof(int64_t);
    return v;
  }
  std::string get_text(const char* what) {
    const uint64_t n = count(1, what);
    std::string s(bytes_.substr(at_, n));
    at_ += n;
    return s;
  }
  CacheGeometry get_geometry(const char* what) {
    CacheGeometry g;
    for (int64_t* v : {&g.num_blocks, &g.block_size, &g.stride_block, &g.stride_pos, &g.stride_head}) *v = get<int64_t>(what);
    return g;
  }
  InputView get_view(const char* what) {
    InputView v;
    for (int64_t* x : {&v.offset, &v.stride_token, &v.stride_head}) *x = get<int64_t>(what);
    return v;
  }
  // A u64 element count, refused unless that many elements of at least `size` bytes can follow.
  uint64_t count(size_t size, const char* what) {
    const size_t at = at_;
    const auto n = get<uint64_t>(what);
    if (n > (bytes_.size() - at_) / size)
      fail(at, std::string(what) + " claims " + std::to_string(n) + " elements of " + std::to_string(size) + " bytes or more; " +
                   std::to_string(bytes_.size() - at_) + " bytes left");
    return n;
  }
  void finish() {
    if (at_ != bytes_.size()) fail(at_, std::to_string(bytes_.size() - at_) + " bytes follow the end of the case");
  }
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw InputError(source_, "", "malformed case hand-off (" + std::to_string(bytes_.size()) + " bytes), at byte " +
                                      std::to_string(at) + ": " + what);
  }

 private:
  void need(size_t n, const char* what) const {
    if (bytes_.size() - at_ < n)
      fail(at_, std::string("cut short reading ") + what + " (" + std::to_string(n) + " bytes needed, " +
                    std::to_string(bytes_.size() - at_) + " left)");
  }
  std::string_view bytes_;
  const std::string& source_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_case_wire(const Case& c) {
  Writer w;
  w.put(kMagic);
  // shape
  w.put(c.num_heads);
  w.put(c.head_dim);
  w.put(c.num_q_heads);
  w.put_enum(c.input_dtype);
  w.put_enum(c.cache_dtype);
  w.put_enum(c.slot_dtype);
  // format
  w.put_enum(c.family);
  w.put(c.value_head_dim);
  w.put(static_cast<uint8_t>(c.value_cache.has_value()));
  if (c.value_cache) w.put_geometry(*c.value_cache);
  w.put(c.rope_dim);
  w.put_view(c.rope);
  w.put_enum(c.quant_format);
  const QuantRules& q = c.quant_rules;
  w.put_enum(q.nvfp4);
  w.put_enum(q.scale_layout);
  w.put_enum(q.mx);
  w.put_enum(q.ds_mla);
  w.put_enum(q.indexer);
  w.put_enum(q.asym_arith);
  w.put_enum(q.asym_lanes);
  w.put_enum(q.int4_pairing);
  // serving conventions
  w.put_enum(c.padding);
  w.put_enum(c.addressing);
  w.put_enum(c.window_input);
  w.put(c.window_size);
  w.put(c.window_sinks);
  w.put_enum(c.cp_input);
  w.put(c.cp_world_size);
  w.put(c.cp_interleave);
  // cache
  w.put_enum(c.layout);
  w.put_geometry(c.cache);
  w.put(c.cache_k_offset);
  w.put(c.cache_v_offset);
  w.put(c.cache_buffer_elems);
  // inputs
  w.put(c.num_input_rows);
  w.put(c.input_buffer_elems);
  w.put_view(c.key);
  w.put_view(c.value);
  w.put_ints(c.slot_mapping);
  // batch
  w.put(static_cast<uint64_t>(c.requests.size()));
  for (const Request& r : c.requests) {
    w.put(r.context_len);
    w.put(r.new_len);
    w.put_ints(r.blocks);
    w.put_ints(r.positions);
  }
  // quantisation
  w.put_enum(c.scale_kind);
  w.put_enum(c.scale_dist);
  w.put_geometry(c.scale_cache);
  w.put(c.scale_k_offset);
  w.put(c.scale_v_offset);
  w.put(c.scale_cache_elems);
  // payload
  w.put_enum(c.dist);
  w.put(c.payload_seed);
  w.put(static_cast<uint8_t>(c.explicit_inputs.has_value()));
  if (c.explicit_inputs) {
    w.put_ints(c.explicit_inputs->rows);
    for (const std::vector<uint32_t>* bits : {&c.explicit_inputs->key, &c.explicit_inputs->value})
      w.put_ints(std::vector<int64_t>(bits->begin(), bits->end()));
  }
  // bookkeeping
  w.put_enum(c.expect.outcome);
  w.put_text(c.expect.finding_kind);
  w.put_text(c.provenance.seed);
  w.put(c.provenance.case_index);
  w.put_text(c.provenance.tool_version);
  w.put_text(c.provenance.command_line);
  w.put_text(c.provenance.target);
  return w.take();
}

Case decode_case_wire(std::string_view bytes, const std::string& source) {
  Reader r(bytes, source);
  if (r.get<uint32_t>("the magic number") != kMagic) r.fail(0, "not a case hand-off (wrong magic number)");
  Case c;
  c.num_heads = r.get<int32_t>("num_heads");
  c.head_dim = r.get<int32_t>("head_dim");
  c.num_q_heads = r.get<int32_t>("num_q_heads");
  c.input_dtype = r.get_enum<DType>("input_dtype");
  c.cache_dtype = r.get_enum<DType>("cache_dtype");
  c.slot_dtype = r.get_enum<IndexType>("slot_dtype");
  c.family = r.get_enum<Family>("family");
  c.value_head_dim = r.get<int32_t>("value_head_dim");
  if (r.get_flag("the value_cache flag")) c.value_cache = r.get_geometry("value_cache");
  c.rope_dim = r.get<int32_t>("rope_dim");
  c.rope = r.get_view("rope");
  c.quant_format = r.get_enum<QuantFormat>("quant_format");
  QuantRules& q = c.quant_rules;
  q.nvfp4 = r.get_enum<Nvfp4Rule>("quant_rules.nvfp4");
  q.scale_layout = r.get_enum<ScaleLayout>("quant_rules.scale_layout");
  q.mx = r.get_enum<MxScaleRule>("quant_rules.mx");
  q.ds_mla = r.get_enum<DsMlaScale>("quant_rules.ds_mla");
  q.indexer = r.get_enum<IndexerScale>("quant_rules.indexer");
  q.asym_arith = r.get_enum<AsymArith>("quant_rules.asym_arith");
  q.asym_lanes = r.get_enum<AsymLanes>("quant_rules.asym_lanes");
  q.int4_pairing = r.get_enum<Int4Pairing>("quant_rules.int4_pairing");
  c.padding = r.get_enum<PaddingMode>("padding");
  c.addressing = r.get_enum<Addressing>("addressing");
  c.window_input = r.get_enum<WindowInput>("window_input");
  c.window_size = r.get<int64_t>("window_size");
  c.window_sinks = r.get<int64_t>("window_sinks");
  c.cp_input = r.get_enum<CpInput>("cp_input");
  c.cp_world_size = r.get<int64_t>("cp_world_size");
  c.cp_interleave = r.get<int64_t>("cp_interleave");
  c.layout = r.get_enum<Layout>("layout");
  c.cache = r.get_geometry("cache");
  c.cache_k_offset = r.get<int64_t>("cache_k_offset");
  c.cache_v_offset = r.get<int64_t>("cache_v_offset");
  c.cache_buffer_elems = r.get<int64_t>("cache_buffer_elems");
  c.num_input_rows = r.get<int64_t>("num_input_rows");
  c.input_buffer_elems = r.get<int64_t>("input_buffer_elems");
  c.key = r.get_view("key");
  c.value = r.get_view("value");
  c.slot_mapping = r.get_ints("slot_mapping");
  // Each request takes at least 32 bytes (two lengths, two counts).
  c.requests.resize(r.count(32, "requests"));
  for (Request& q : c.requests) {
    q.context_len = r.get<int64_t>("a request's context_len");
    q.new_len = r.get<int64_t>("a request's new_len");
    q.blocks = r.get_ints("a request's blocks");
    q.positions = r.get_ints("a request's positions");
  }
  c.scale_kind = r.get_enum<ScaleKind>("scale_kind");
  c.scale_dist = r.get_enum<ScaleDist>("scale_dist");
  c.scale_cache = r.get_geometry("scale_cache");
  c.scale_k_offset = r.get<int64_t>("scale_k_offset");
  c.scale_v_offset = r.get<int64_t>("scale_v_offset");
  c.scale_cache_elems = r.get<int64_t>("scale_cache_elems");
  c.dist = r.get_enum<ValueDist>("dist");
  c.payload_seed = r.get<uint64_t>("payload_seed");
  if (r.get_flag("the explicit_inputs flag")) {
    ExplicitInputs x;
    x.rows = r.get_ints("explicit_inputs.rows");
    for (std::vector<uint32_t>* bits : {&x.key, &x.value}) {
      const std::vector<int64_t> v = r.get_ints("explicit_inputs bits");
      bits->assign(v.begin(), v.end());
    }
    c.explicit_inputs = std::move(x);
  }
  c.expect.outcome = r.get_enum<Expect>("expect.outcome");
  c.expect.finding_kind = r.get_text("expect.finding_kind");
  c.provenance.seed = r.get_text("provenance.seed");
  c.provenance.case_index = r.get<int64_t>("provenance.case_index");
  c.provenance.tool_version = r.get_text("provenance.tool_version");
  c.provenance.command_line = r.get_text("provenance.command_line");
  c.provenance.target = r.get_text("provenance.target");
  r.finish();
  return c;
}

}  // namespace kvf
