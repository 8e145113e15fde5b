// classify.cpp — see classify.h for the rules.
//
// Passing runs (the common case) cost one memcmp of the image. Otherwise each region is scanned in
// chunks (memcmp again), and only differing chunks are walked element by element; per element only
// integers are computed.
#include "classify.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>

#include "case/context_parallel.h"
#include "values/convert.h"
#include "windows.h"

namespace kvf {

const char* victim_class_name(Victim v) {
  switch (v) {
    case Victim::guard_band: return "guard_band";
    case Victim::key_view: return "key_view";
    case Victim::value_view: return "value_view";
    case Victim::input_other: return "input_other";
    case Victim::slot_mapping: return "slot_mapping";
    case Victim::static_scales: return "static_scales";
    case Victim::counter: return "counter";
    case Victim::context: return "context";
    case Victim::new_token: return "new_token";
    case Victim::tail: return "tail";
    case Victim::hole: return "hole";
    case Victim::shared_block: return "shared_block";
    case Victim::free_block: return "free_block";
    case Victim::gap: return "gap";
    case Victim::many: return "many";
  }
  return "?";
}

const char* writer_class_name(Writer w) {
  switch (w) {
    case Writer::kernel: return "kernel";
    case Writer::request: return "request";
    case Writer::padding_row: return "padding_row";
    case Writer::invalid_row: return "invalid_row";
    case Writer::graph_row: return "graph_row";
    case Writer::unwritten_rows: return "unwritten_rows";
    case Writer::unknown: return "unknown";
    case Writer::ambiguous: return "ambiguous";
    case Writer::input_gap: return "input_gap";
    case Writer::guard_pattern: return "guard_pattern";
    case Writer::many: return "many";
  }
  return "?";
}

TolerancePolicy TolerancePolicy::rule_for(DType format) const {
  for (const ForFormat& f : per_format)
    if (f.format == format) return TolerancePolicy{f.kind, f.ulps, {}};
  return TolerancePolicy{kind, ulps, {}};
}

bool TolerancePolicy::accepts(uint64_t expected, uint64_t found, uint64_t pre_run, DType format) const {
  const TolerancePolicy rule = rule_for(format);
  switch (rule.kind) {
    case Kind::exact: return false;
    case Kind::ulp: {
      const int64_t u = golden::ulp_distance(static_cast<uint32_t>(expected), static_cast<uint32_t>(found), format);
      return u >= 0 && u <= rule.ulps;
    }
    case Kind::written_any_value: return found != pre_run;
  }
  return false;
}

namespace {

// One rule: "exact", "ulp:N" or "written-any-value".
std::optional<TolerancePolicy> parse_rule(std::string_view text) {
  if (text == "exact") return TolerancePolicy{};
  if (text == "written-any-value") return TolerancePolicy{TolerancePolicy::Kind::written_any_value, 0, {}};
  constexpr std::string_view kUlp = "ulp:";
  if (text.substr(0, kUlp.size()) != kUlp) return std::nullopt;
  const std::string_view digits = text.substr(kUlp.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;  // out of range
  return TolerancePolicy{TolerancePolicy::Kind::ulp, n, {}};
}

std::string rule_text(TolerancePolicy::Kind kind, int64_t ulps) {
  switch (kind) {
    case TolerancePolicy::Kind::exact: return "exact";
    case TolerancePolicy::Kind::ulp: return "ulp:" + std::to_string(ulps);
    case TolerancePolicy::Kind::written_any_value: return "written-any-value";
  }
  return "exact";
}

// The kind of a write into a non-new-token cache cell whose writer is not known (by location only,
// or a value no input element or several hold): into a context cell, cross_request_write when a
// request other than the cell's own has new tokens (it could have written) or the cell is in a
// shared prefix block (every write into it corrupts its other sharers), else stray_write (the
// request wrote into its own context); into any other cell, stray_write.
FindingKind context_write_kind(const Case& c, const CacheCell& cell) {
  if (cell.role != CacheCell::Role::context) return FindingKind::stray_write;
  if (cell.shared) return FindingKind::cross_request_write;
  for (size_t r = 0; r < c.requests.size(); ++r)
    if (static_cast<int64_t>(r) != cell.request && c.requests[r].new_len > 0) return FindingKind::cross_request_write;
  return FindingKind::stray_write;
}

// The victim of a cache cell, by its location.
void set_victim(ImageCell& x) {
  const CacheCell& cell = x.cell;
  switch (cell.role) {
    case CacheCell::Role::context:
      x.victim = cell.shared ? Victim::shared_block : Victim::context;
      x.victim_id = cell.shared ? cell.block : cell.request;
      return;
    case CacheCell::Role::hole: x.victim = Victim::hole; x.victim_id = cell.request; return;
    case CacheCell::Role::new_token: x.victim = Victim::new_token; x.victim_id = cell.request; return;
    case CacheCell::Role::tail: x.victim = Victim::tail; x.victim_id = cell.request; return;
    case CacheCell::Role::free_block:
    case CacheCell::Role::sink: x.victim = Victim::free_block; x.victim_id = cell.block; return;  // sinks are never judged
    case CacheCell::Role::gap: x.victim = Victim::gap; x.victim_id = -1; return;
  }
}

Writer writer_of(ValueSource s) {
  switch (s) {
    case ValueSource::request: return Writer::request;
    case ValueSource::padding_row: return Writer::padding_row;
    case ValueSource::invalid_row: return Writer::invalid_row;
    case ValueSource::graph_row: return Writer::graph_row;
    case ValueSource::unwritten_rows: return Writer::unwritten_rows;
    case ValueSource::unknown: return Writer::unknown;
    case ValueSource::ambiguous: return Writer::ambiguous;
  }
  return Writer::unknown;
}

// Rules 1-4 of classify.h for a KV cache element of a classic cache (found != expected): kind,
// basis, decoded value and writer.
void classify_cache_value(const Case& c, ImageCell& x, ValueDecoder& values) {
  const CacheCell& cell = x.cell;
  const bool new_token = cell.role == CacheCell::Role::new_token;
  if (is_quantized(c.cache_dtype)) {  // by location only (see classify.h)
    x.basis = Basis::location;
    x.kind = new_token ? (x.found == x.pre_run ? FindingKind::missing_write : FindingKind::wrong_value) : context_write_kind(c, cell);
    x.writer = new_token ? Writer::kernel : Writer::unknown;
    return;
  }
  const auto found = static_cast<uint32_t>(x.found);
  x.tag = golden::canary_of(found, c.cache_dtype);
  const uint32_t all_ones = x.size == 4 ? 0xFFFFFFFFu : 0xFFFFu;
  if (found == all_ones || x.tag == golden::Canary::guard || x.tag == golden::Canary::input_gap) {
    x.kind = FindingKind::oob_read_suspected;
    x.basis = Basis::over_read;
    x.writer = x.tag == golden::Canary::input_gap ? Writer::input_gap : Writer::guard_pattern;
    return;
  }
  if (new_token && x.found == x.pre_run) {
    x.kind = FindingKind::missing_write;
    x.basis = Basis::not_written;
    x.writer = Writer::kernel;
    return;
  }
  x.basis = Basis::value;
  DecodedValue& d = x.value;
  d = values.decode(found, cell);
  if ((d.source == ValueSource::unknown || d.source == ValueSource::ambiguous) &&
      (x.tag == golden::Canary::padding_row || x.tag == golden::Canary::invalid_row || x.tag == golden::Canary::graph_row)) {
    // The bits of a padding-row canary that no row converts to (e.g. a raw bit copy across dtypes),
    // or that several rows hold (every padding row carries the one canary).
    d.source = x.tag == golden::Canary::padding_row   ? ValueSource::padding_row
               : x.tag == golden::Canary::invalid_row ? ValueSource::invalid_row
                                                      : ValueSource::graph_row;
  }
  x.writer = writer_of(d.source);
  x.writer_id = d.source == ValueSource::request ? d.request : d.row;
  const bool unwritten = d.source == ValueSource::padding_row || d.source == ValueSource::invalid_row ||
                         d.source == ValueSource::graph_row || d.source == ValueSource::unwritten_rows;
  if (unwritten) {
    x.kind = FindingKind::padding_leak;
  } else if (new_token) {
    x.kind = FindingKind::wrong_value;
  } else if (cell.role == CacheCell::Role::context) {
    // A shared prefix block is every sharer's context: whoever wrote it corrupted the others.
    // A decoded writer is the evidence; an unknown or ambiguous one is judged by who could have written.
    // An ambiguous value all of whose candidates are one request's counts as that request's.
    const int64_t writer = d.source == ValueSource::request ? d.request : d.source == ValueSource::ambiguous ? d.common_request : -1;
    if (writer < 0) {
      x.kind = context_write_kind(c, cell);
    } else {
      x.kind = writer == cell.request && !cell.shared ? FindingKind::stray_write : FindingKind::cross_request_write;
    }
  } else {
    x.kind = FindingKind::stray_write;
  }
}

// Inverts an input view: (row, head, dim) of input element e, if the view addresses it.
bool locate_in_view(const Case& c, const InputView& v, int64_t width, int64_t e, ImageCell& x) {
  struct Dim {
    int64_t stride, extent;
    int which;
  };
  Dim dims[3] = {{v.stride_token, c.num_input_rows, 0}, {v.stride_head, c.num_heads, 1}, {1, width, 2}};
  std::sort(dims, dims + 3, [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  int64_t rest = e - v.offset;
  if (rest < 0) return false;
  int64_t index[3] = {0, 0, 0};
  for (const Dim& d : dims) {
    if (d.extent <= 1) continue;
    if (d.stride <= 0) return false;
    const int64_t q = rest / d.stride;
    if (q >= d.extent) return false;
    index[d.which] = q;
    rest -= q * d.stride;
  }
  if (rest != 0 || v.offset + input_elem_offset(v.stride_token, v.stride_head, index[0], index[1], index[2]) != e) return false;
  x.row = index[0];
  x.head = index[1];
  x.dim = index[2];
  return true;
}

bool same_layout(const ArenaLayout& a, const ArenaLayout& b) {
  return a.guard_bytes == b.guard_bytes && a.input_begin == b.input_begin && a.input_bytes == b.input_bytes &&
         a.slots_begin == b.slots_begin && a.slots_bytes == b.slots_bytes && a.scales_begin == b.scales_begin &&
         a.scales_bytes == b.scales_bytes && a.cache_begin == b.cache_begin && a.cache_bytes == b.cache_bytes &&
         a.scale_cache_begin == b.scale_cache_begin && a.scale_cache_bytes == b.scale_cache_bytes &&
         a.counter_begin == b.counter_begin && a.total_bytes == b.total_bytes;
}

class Classifier {
 public:
  Classifier(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual, const TolerancePolicy& policy,
             const OutsideDiff* outside, const std::function<void(const ImageCell&)>& visit)
      : c_(c),
        initial_(initial),
        expected_(expected),
        actual_(actual),
        policy_(policy),
        loc_(c),
        scale_loc_(CacheLocator::scale_cache(c)),
        values_(c, initial, loc_),
        outside_(outside),
        visit_(visit) {}

  int64_t run() {
    const ArenaLayout& l = expected_.layout();
    const int64_t input_end = l.input_begin + l.input_bytes;
    const int64_t slots_end = l.slots_begin + l.slots_bytes;
    const int64_t scales_end = l.scales_begin + l.scales_bytes;
    const int64_t cache_end = l.cache_begin + l.cache_bytes;
    const int64_t scale_cache_end = l.scale_cache_begin + l.scale_cache_bytes;
    const int64_t counter_end = l.counter_begin + static_cast<int64_t>(sizeof(unsigned long long));

    guard(0, l.input_begin, -1, 0);
    scan(l.input_begin, input_end, dtype_size(c_.input_dtype), [&](int64_t i) { input_elem(i); });
    guard(input_end, l.slots_begin, 0, 1);
    scan(l.slots_begin, slots_end, index_type_size(c_.slot_dtype), [&](int64_t i) { slot_elem(i); });  // CSR, window rows: i32 too
    guard(slots_end, l.scales_begin, 1, 2);
    scan(l.scales_begin, scales_end, 4, [&](int64_t i) { scales_elem(i); });
    guard(scales_end, l.cache_begin, 2, 3);
    if (c_.has_format()) {  // typed fields: field by field, then the bytes no field holds
      format_fields();
      scan(l.cache_begin, cache_end, 1, [&](int64_t i) { format_gap(FieldBuffer::cache, i); }, -1, false);
      guard(cache_end, l.scale_cache_begin, 3, 4);
      scan(l.scale_cache_begin, scale_cache_end, 1, [&](int64_t i) { format_gap(FieldBuffer::scale_cache, i); }, -1, false);
    } else {
      // The cache: whole, or (windowed arenas) its materialised ranges, then what the target found
      // outside them.
      for (const ByteRange& r : expected_.materialized()) {
        const int64_t begin = std::max(r.begin, l.cache_begin), end = std::min(r.end, cache_end);
        if (begin < end) scan(begin, end, dtype_size(c_.cache_dtype), [&](int64_t i) { cache_elem(i); }, l.cache_begin);
      }
      if (outside_ != nullptr) outside_cache_elems(*outside_);
      guard(cache_end, l.scale_cache_begin, 3, 4);
      scan(l.scale_cache_begin, scale_cache_end, 4, [&](int64_t i) { scale_cache_elem(i); });
    }
    guard(scale_cache_end, l.counter_begin, 4, 5);
    scan(l.counter_begin, counter_end, 8, [&](int64_t) { counter(); });
    guard(counter_end, l.total_bytes, 5, -1);
    return differing_;
  }

 private:
  // Calls on_diff(element index within the section) for every differing element of [begin, end) (a
  // section starting 256-byte aligned and holding whole elements, or a part of one that starts at
  // `origin`); with `count`, counts each as a differing element.
  template <typename F>
  void scan(int64_t begin, int64_t end, int elem_size, F&& on_diff, int64_t origin = -1, bool count = true) {
    if (origin < 0) origin = begin;
    constexpr int64_t kChunk = 4096;  // a multiple of every element size
    const std::byte* e = expected_.data();
    const std::byte* a = actual_.data();
    for (int64_t off = begin; off < end; off += kChunk) {
      const int64_t n = std::min(kChunk, end - off);
      if (std::memcmp(e + off, a + off, static_cast<size_t>(n)) == 0) continue;
      for (int64_t x = off; x + elem_size <= off + n; x += elem_size) {
        if (std::memcmp(e + x, a + x, static_cast<size_t>(elem_size)) == 0) continue;
        differing_ += count;
        on_diff((x - origin) / elem_size);
      }
    }
  }

  // Guard bytes [begin, end) between section `before` (-1: image start) and section `after` (-1:
  // image end). A byte is attributed to the nearer section.
  void guard(int64_t begin, int64_t end, int before, int after) {
    const int64_t mid = begin + (end - begin) / 2;
    scan(begin, end, 1, [&](int64_t i) {
      ImageCell x;
      x.section = Section::guard;
      x.elem = begin + i;
      const bool after_prev = before >= 0 && (after < 0 || x.elem < mid);
      x.victim = Victim::guard_band;
      x.victim_id = 2 * (after_prev ? before : after) + (after_prev ? 1 : 0);
      x.offset = after_prev ? x.elem - begin : x.elem - end;
      x.kind = FindingKind::oob_write;
      x.expected = static_cast<uint32_t>(load_elem(expected_.data(), x.elem, 1));
      x.found = static_cast<uint32_t>(load_elem(actual_.data(), x.elem, 1));
      visit_(x);
    });
  }

  void input_elem(int64_t e) {
    ImageCell x;
    x.section = Section::input;
    x.elem = e;
    x.size = dtype_size(c_.input_dtype);
    x.kind = FindingKind::input_modified;
    x.victim = Victim::input_other;
    bool found = false;
    for (const CacheField& field : c_.fields()) {  // the views of each field's source (MLA: kv_c, k_pe)
      int64_t first = 0;
      for (int i = 0; i < field.num_parts && !found; ++i) {
        if ((found = locate_in_view(c_, field.parts[i].view, field.parts[i].width, e, x))) {
          x.victim = field.index == 1 ? Victim::value_view : Victim::key_view;
          x.dim += first;
        }
        first += field.parts[i].width;
      }
      if (found) break;
    }
    x.expected = static_cast<uint32_t>(load_elem(expected_.input(), e, x.size));
    x.found = static_cast<uint32_t>(load_elem(actual_.input(), e, x.size));
    visit_(x);
  }

  // Element i of the slots section: the slot mapping or the CSR arrays (an input), or of a sharded
  // case (case/context_parallel.h, CpSection) a rank's slot mapping (input slot_mapping: the
  // producer's output, expected as the formula gives it) or an input.
  void slot_elem(int64_t i) {
    ImageCell x;
    x.section = Section::slots;
    x.elem = i;
    x.size = c_.has_cp() ? 4 : index_type_size(c_.slot_dtype);  // i32 for CSR and window rows (validate.cpp)
    x.kind = FindingKind::input_modified;
    x.victim = Victim::slot_mapping;
    x.expected = load_elem(expected_.slots(), i, x.size);
    x.found = load_elem(actual_.slots(), i, x.size);
    if (c_.has_cp() && c_.cp_input == CpInput::slot_mapping && i < cp_section(c_).positions) {
      x.kind = FindingKind::slot_mapping_mismatch;
      x.victim_id = i / c_.num_slots();
      x.row = i % c_.num_slots();
    }
    visit_(x);
  }

  // Element i of the static scales section: K scales [0, n), V scales [n, 2n).
  void scales_elem(int64_t i) {
    ImageCell x;
    x.section = Section::scales;
    x.elem = i;
    x.size = 4;
    x.kind = FindingKind::input_modified;
    x.victim = Victim::static_scales;
    x.expected = static_cast<uint32_t>(load_elem(expected_.scales(), i, 4));
    x.found = static_cast<uint32_t>(load_elem(actual_.scales(), i, 4));
    visit_(x);
  }

  // Element e of the scale cache buffer (per_token_head), classified by location.
  void scale_cache_elem(int64_t e) {
    ImageCell x;
    x.section = Section::scale_cache;
    x.elem = e;
    x.size = 4;
    x.expected = static_cast<uint32_t>(load_elem(expected_.scale_cache(), e, 4));
    x.found = static_cast<uint32_t>(load_elem(actual_.scale_cache(), e, 4));
    x.pre_run = static_cast<uint32_t>(load_elem(initial_.scale_cache(), e, 4));
    x.cell = scale_loc_.locate(e);
    if (x.cell.role == CacheCell::Role::sink) return;  // the sink slot's scale: unconstrained
    set_victim(x);
    if (x.cell.role == CacheCell::Role::new_token) {
      x.kind = FindingKind::scale_mismatch;
      x.writer = Writer::kernel;
      x.tolerated = policy_.accepts(x.expected, x.found, x.pre_run, DType::f32);
    } else {
      x.kind = context_write_kind(c_, x.cell);
      x.writer = Writer::unknown;
    }
    visit_(x);
  }

  // A quantised format (case/quant_format.h): every element of every field is compared once,
  // scales and zero points first. A new token's scale that differs is a scale_mismatch; the codes
  // of the group it covers then follow from it. Elements hold their field's dtype, so differences
  // are counted per element (a nibble, a byte, an fp32 word), not per byte.
  void format_fields() {
    struct ScaledGroup {
      int field;
      int64_t block, pos, head, group;
      bool operator<(const ScaledGroup& o) const {
        return std::tie(field, block, pos, head, group) < std::tie(o.field, o.block, o.pos, o.head, o.group);
      }
    };
    std::map<ScaledGroup, int> wrong_scales;  // new tokens' groups whose scale (or zero point) differs: its scale_id
    const CacheFields fields = c_.fields();
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < fields.count; ++i) {
        const CacheField& f = fields.field[i];
        if ((pass == 0) != (f.role != FieldRole::data)) continue;
        const CacheLocator& loc = f.buffer == FieldBuffer::cache ? loc_ : scale_loc_;
        const std::byte* e_buf = field_buffer(expected_, f);
        const std::byte* a_buf = field_buffer(actual_, f);
        const std::byte* i_buf = field_buffer(initial_, f);
        for (int64_t b = 0; b < c_.cache.num_blocks; ++b)
          for (int64_t p = 0; p < c_.cache.block_size; ++p) {
            const CacheCell role = loc.cell(f.index == 1, b, p, 0, 0);
            for (int64_t h = 0; h < f.num_heads; ++h)
              for (int64_t d = 0; d < f.head_dim; ++d) {
                const int64_t e = field_offset(f.layout, b, p, h, d);
                ImageCell x;
                x.expected = load_field_elem(e_buf, f.dtype, e);
                x.found = load_field_elem(a_buf, f.dtype, e);
                if (x.expected == x.found) continue;
                ++differing_;
                if (role.role == CacheCell::Role::sink) continue;
                x.section = f.buffer == FieldBuffer::cache ? Section::cache : Section::scale_cache;
                x.elem = e;
                x.size = std::max(1, dtype_bits(f.dtype) / 8);
                x.pre_run = load_field_elem(i_buf, f.dtype, e);
                x.cell = role;
                x.cell.head = h;
                x.cell.dim = d;
                x.cell.field = i;
                x.cell.elem = e;
                format_elem(f, x);
                if (x.cell.role == CacheCell::Role::new_token && !x.tolerated) {
                  if (f.role == FieldRole::data && f.group > 0) {
                    const auto it = wrong_scales.find(ScaledGroup{fields.field[f.scale].scale, b, p, h, d / f.group});
                    if (it != wrong_scales.end()) {  // follows from its group's wrong scale
                      x.follows_scale = it->second;
                      x.kind = FindingKind::scale_mismatch;
                    }
                  } else if (f.role != FieldRole::data) {
                    x.scale_id = static_cast<int>(wrong_scales.size());
                    wrong_scales.emplace(ScaledGroup{f.scale, b, p, h, d}, x.scale_id);
                  }
                }
                visit_(x);
              }
          }
      }
    }
  }

  // One differing element of a field, by location.
  void format_elem(const CacheField& f, ImageCell& x) const {
    set_victim(x);
    x.basis = Basis::location;
    if (x.cell.role == CacheCell::Role::new_token) {
      x.kind = f.role != FieldRole::data ? FindingKind::scale_mismatch
               : x.found == x.pre_run    ? FindingKind::missing_write
                                         : FindingKind::wrong_value;
      x.writer = Writer::kernel;
      x.tolerated = policy_.accepts(x.expected, x.found, x.pre_run, f.dtype);
    } else {
      x.kind = context_write_kind(c_, x.cell);
      x.writer = Writer::unknown;
    }
  }

  // A byte of a format's buffer that differs: a stray write when no field holds it (a gap).
  void format_gap(FieldBuffer buffer, int64_t byte) {
    CacheCell cells[2];
    if ((buffer == FieldBuffer::cache ? loc_ : scale_loc_).locate_byte(byte, cells) > 0) return;  // a field's: format_fields()
    ++differing_;
    const std::byte* e = buffer == FieldBuffer::cache ? expected_.cache() : expected_.scale_cache();
    const std::byte* a = buffer == FieldBuffer::cache ? actual_.cache() : actual_.scale_cache();
    ImageCell x;
    x.section = buffer == FieldBuffer::cache ? Section::cache : Section::scale_cache;
    x.elem = byte;
    x.expected = static_cast<uint32_t>(load_elem(e, byte, 1));
    x.found = static_cast<uint32_t>(load_elem(a, byte, 1));
    x.kind = FindingKind::stray_write;
    x.victim = Victim::gap;
    x.writer = Writer::unknown;
    visit_(x);
  }

  void counter() {
    ImageCell x;
    x.section = Section::counter;
    x.elem = 0;
    x.size = 8;
    x.kind = FindingKind::invalid_slot_miscount;
    x.victim = Victim::counter;
    visit_(x);
  }

  void cache_elem(int64_t e) {
    const int size = dtype_size(c_.cache_dtype);
    cache_elem(e, static_cast<uint32_t>(load_elem(expected_.cache(), e, size)), static_cast<uint32_t>(load_elem(actual_.cache(), e, size)),
               static_cast<uint32_t>(load_elem(initial_.cache(), e, size)), false);
  }

  // Cache elements outside the windows of a windowed arena, as the target reported them: every
  // element whose bits came back is classified like any cache element (its pre-run and expected
  // bits are the fill, the free-block canary); the rest are one stray_write cell of Victim::many
  // (they are free-block cells or stride gaps: every owned block lies inside a window).
  void outside_cache_elems(const OutsideDiff& o) {
    const CacheFill fill = make_cache_fill(c_);
    const int size = fill.elem_size;
    int64_t classified = 0;
    for (const OutsideDiff::Run& run : o.runs) {
      const auto* bytes = run.bytes.data();
      const int64_t fetched = static_cast<int64_t>(run.bytes.size()) / size;
      for (int64_t i = 0; i < fetched && run.begin + i < run.end; ++i) {
        cache_elem(run.begin + i, fill.bits, load_cache_bits(bytes, i, size), fill.bits, true);
        ++classified;
      }
    }
    differing_ += o.differing_elems;  // classified elements count once, here
    const int64_t rest = o.differing_elems - classified;
    if (rest <= 0) return;
    ImageCell x;
    x.section = Section::cache;
    x.outside = true;
    x.size = size;
    x.kind = FindingKind::stray_write;
    x.victim = Victim::many;
    x.writer = Writer::unknown;
    x.count = rest;
    for (const OutsideDiff::Run& run : o.runs) {  // the range of the elements whose bits did not come back
      const int64_t fetched = static_cast<int64_t>(run.bytes.size()) / size;
      if (run.begin + fetched < run.end) {
        x.elem = x.elem < 0 ? run.begin + fetched : std::min(x.elem, run.begin + fetched);
        x.last = std::max(x.last, run.end - 1);
      }
    }
    visit_(x);
  }

  // One differing cache element: `exp` expected, `act` found, `ini` before the run.
  void cache_elem(int64_t e, uint32_t exp, uint32_t act, uint32_t ini, bool outside) {
    ImageCell x;
    x.section = Section::cache;
    x.elem = e;
    x.size = dtype_size(c_.cache_dtype);
    x.expected = exp;
    x.found = act;
    x.pre_run = ini;
    x.outside = outside;
    x.cell = loc_.locate(e);
    if (x.cell.role == CacheCell::Role::sink) return;  // the sink slot: unconstrained
    set_victim(x);
    x.tolerated = x.cell.role == CacheCell::Role::new_token && policy_.accepts(exp, act, ini, c_.cache_dtype);
    if (x.tolerated) {  // judged by the policy alone (no decoding: the decoder remembers the rows it found)
      x.writer = Writer::kernel;
    } else {
      classify_cache_value(c_, x, values_);
    }
    visit_(x);
  }

  const Case& c_;
  const Arena& initial_;
  const Arena& expected_;
  const Arena& actual_;
  const TolerancePolicy& policy_;
  const CacheLocator loc_;        // the KV cache buffer
  const CacheLocator scale_loc_;  // the scale cache buffer
  ValueDecoder values_;           // indexes the input on the first cache difference that needs decoding
  const OutsideDiff* outside_;    // windowed arenas: what the target found outside the windows
  const std::function<void(const ImageCell&)>& visit_;
  int64_t differing_ = 0;
};

}  // namespace

std::optional<TolerancePolicy> parse_tolerance(std::string_view text) {
  const size_t comma = text.find(',');
  std::optional<TolerancePolicy> policy = parse_rule(text.substr(0, comma));
  if (!policy || comma == std::string_view::npos) return policy;
  std::string_view rest = text.substr(comma + 1);
  for (;;) {  // ",FORMAT=RULE" entries, each format at most once
    const size_t next = rest.find(',');
    const std::string_view entry = rest.substr(0, next);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::optional<DType> format = dtype_from_string(entry.substr(0, eq));
    const std::optional<TolerancePolicy> rule = parse_rule(entry.substr(eq + 1));
    if (!format || !rule) return std::nullopt;
    for (const TolerancePolicy::ForFormat& f : policy->per_format)
      if (f.format == *format) return std::nullopt;
    policy->per_format.push_back({*format, rule->kind, rule->ulps});
    if (next == std::string_view::npos) return policy;
    rest = rest.substr(next + 1);
  }
}

std::string to_string(const TolerancePolicy& p) {
  std::string s = rule_text(p.kind, p.ulps);
  for (const TolerancePolicy::ForFormat& f : p.per_format)
    s += "," + std::string(to_string(f.format)) + "=" + rule_text(f.kind, f.ulps);
  return s;
}

bool images_equal(const Arena& expected, const Arena& actual, const OutsideDiff* outside) {
  if (outside != nullptr && !outside->clean()) return false;
  for (const ByteRange& r : expected.materialized())
    if (std::memcmp(expected.data() + r.begin, actual.data() + r.begin, static_cast<size_t>(r.size())) != 0) return false;
  return true;
}

int64_t classify_image(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual, const TolerancePolicy& policy,
                       const OutsideDiff* outside, const std::function<void(const ImageCell&)>& visit) {
  if (!same_layout(initial.layout(), expected.layout()) || !same_layout(expected.layout(), actual.layout())) {
    throw std::invalid_argument("compare_arenas: the three arenas have different layouts");
  }
  if (initial.materialized() != expected.materialized() || expected.materialized() != actual.materialized()) {
    throw std::invalid_argument("compare_arenas: the three arenas materialise different ranges");
  }
  if (expected.windowed() && (outside == nullptr || !outside->checked)) {
    throw std::invalid_argument("compare_arenas: a windowed arena needs the target's check of the cache outside the windows");
  }
  if (images_equal(expected, actual, outside)) return 0;
  return Classifier(c, initial, expected, actual, policy, outside, visit).run();
}

}  // namespace kvf
