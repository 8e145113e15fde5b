// diff.cpp — whole-image comparison, classification of each differing element, grouping.
//
// Passing runs (the common case) cost one memcmp of the image. Otherwise each region is scanned in
// chunks (memcmp again), and only differing chunks are walked element by element. Every differing
// element becomes a (kind, victim, writer) key plus a few integer coordinates; groups aggregate
// ranges of those coordinates, and strings are built once per group (its first cell becomes the
// example), so a catastrophic run with millions of differing cells costs integer work per cell and
// a bounded number of groups.
//
// Classification of a differing cache element, in order:
//   1. it holds the input-gap canary or the guard pattern       -> oob_read_suspected
//   2. it is an expected write still holding its pre-run value  -> missing_write
//   3. its value is that of padding/invalid/graph rows only     -> padding_leak
//   4. by location: new-token cell -> wrong_value; another request's context (a writer decoded as
//      another request, an ambiguous value whose candidates are all another request's, or an
//      unknown/ambiguous writer while some request other than the cell's own has new tokens) or a
//      shared prefix block (whoever wrote) -> cross_request_write; own context (also an ambiguous
//      value whose candidates are all the own request's, and an unknown/ambiguous writer when no
//      other request has new tokens: nobody else could have written), free block, hole, block
//      tail, stride gap -> stray_write
//      (case/placement.h: holes and shared blocks).
// Steps 1-4 are classify_cache_diff() (diff.h), which the cell map (report/cell_map.cpp) shares.
// Writers are decoded by value (ValueDecoder, decode.h): the converted bits of every input element
// (tensor, row, head, dim) are indexed once, lazily, when the first cache difference needs it.
//
// Quantised caches (fp8_e4m3, fp8_e5m2, int8) are classified by location only: with 256 codes per
// element, a value matches many input elements (and every canary is also a value a correct
// quantisation can produce, see payload.cpp), so a match would be coincidence, not evidence. Even a
// unique match is not trusted: no writer decoding, no padding_leak, no oob_read_suspected. A
// differing new-token cell is missing_write if it still holds its pre-run value, else
// wrong_value; a context cell is cross_request_write (unknown writer) when a request other than
// its own has new tokens or it is in a shared block, else stray_write; free blocks, block tails and
// stride gaps are stray_write.
// The static scales section is an input: any change is input_modified. The scale cache (per
// token-head) is classified like a quantised KV cache, except that a differing new-token cell is
// scale_mismatch (also when it was not written at all; the example says so).
// Tolerance (TolerancePolicy) applies to expected-write cells only (KV cache and scale cache
// new-token cells) whose value differs: ulp:N judges the value alone and accepts a distance of at
// most N in the stored format (golden::ulp_distance; NaN against a number is never accepted), even
// when that value equals the cell's pre-run value (in 1-byte formats the pre-run pattern is a real
// value, and a 1-ulp-off kernel can legitimately store it); written-any-value accepts any value
// except the pre-run one. A per-format rule (TolerancePolicy::per_format) replaces the policy for
// cells stored in that format: KV cache cells in the cache dtype, scale cache cells in f32. Every
// other location is exact under every policy. Tolerated cells still count in differing_cells.
#include "diff.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "windows.h"
#include "case/context_parallel.h"
#include "case/csr.h"
#include "base/rng.h"
#include "values/convert.h"
#include "values/payload.h"

namespace kvf {

namespace {

using golden::Canary;

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

// ---------------------------------------------------------------------------------------------
// Group keys: what was hit (victim) and whose data landed there (writer)

enum class Victim : uint8_t {
  guard_band,    // id: band (2 * section + 1 if after the section, see kSectionNames)
  key_view,      // input buffer cell of the key view
  value_view,    // input buffer cell of the value view
  input_other,   // input buffer cell outside both views
  slot_mapping,  // a slot_mapping entry
  static_scales, // an element of the static scales section
  counter,       // the invalid-slot counter
  context,       // id: request owning the earlier-context cell
  new_token,     // id: request owning the expected-write cell
  tail,          // id: request owning the block whose unused tail was hit
  hole,          // id: request whose unwritten position below its written extent was hit (placement.h)
  shared_block,  // id: a prefix block several requests share (every write into it corrupts them all)
  free_block,    // id: the free block
  gap,           // a cache buffer element no (tensor, block, pos, head, dim) addresses
  many,          // overflow bucket once kMaxGroups groups exist
};

enum class Writer : uint8_t {
  kernel,          // not attributable by value (guard bands, inputs, counter, missing writes)
  request,         // id: request whose new token's value landed there
  padding_row,     // id: the row (slot < 0), -1 if several
  invalid_row,     // id: the row (slot >= capacity), -1 if several
  graph_row,       // id: the row (row >= T), -1 if several
  unwritten_rows,  // rows of several of the three kinds above
  unknown,         // the value matches no input element
  ambiguous,       // the value matches several input elements
  input_gap,       // the input-gap canary (oob_read_suspected)
  guard_pattern,   // the guard pattern (oob_read_suspected)
  many,            // overflow bucket
};

// Names of the classes, for finding signatures (campaign/signature.h): stable, never renamed.
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

struct GroupKey {
  FindingKind kind = FindingKind::wrong_value;
  Victim victim = Victim::many;
  Writer writer = Writer::kernel;
  int64_t victim_id = -1;
  int64_t writer_id = -1;
  bool scale_cache = false;  // the victim cell is in the scale cache buffer (else the KV cache, if a cache cell)
  int field = -1;            // a quantised format: the field of the victim cells (c.fields() index)
  bool operator==(const GroupKey&) const = default;
};

struct GroupKeyHash {
  size_t operator()(const GroupKey& k) const {
    uint64_t h = mix64((static_cast<uint64_t>(k.kind) << 16) | (static_cast<uint64_t>(k.victim) << 8) |
                       static_cast<uint64_t>(k.writer));
    h = mix64(h ^ static_cast<uint64_t>(k.victim_id) ^ (k.scale_cache ? 0x5ca1eull : 0) ^ (static_cast<uint64_t>(k.field + 1) << 40));
    return static_cast<size_t>(mix64(h ^ static_cast<uint64_t>(k.writer_id)));
  }
};

constexpr size_t kMaxGroups = 4096;   // beyond this, new keys share one overflow group per kind
constexpr size_t kMaxListedBlocks = 64;

// ---------------------------------------------------------------------------------------------
// Aggregates

struct Range {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  void add(int64_t v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
  int64_t count() const { return empty() ? 0 : hi - lo + 1; }
};

// Distinct block ids in first-seen order, the first kMaxListedBlocks of them.
struct BlockList {
  std::vector<int64_t> ids;
  bool more = false;
  void add(int64_t b) {
    if (!ids.empty() && ids.back() == b) return;
    if (std::find(ids.begin(), ids.end(), b) != ids.end()) return;
    if (ids.size() < kMaxListedBlocks) {
      ids.push_back(b);
    } else {
      more = true;
    }
  }
};

struct Group {
  GroupKey key;
  int64_t cells = 0;
  bool k = false, v = false;    // cache: tensors hit
  BlockList blocks;             // cache: physical blocks hit
  Range pos, head, dim;         // cache: slot / head / dim ranges; input: head / dim ranges
  Range row;                    // input views: row range
  Range elem;                   // cache / input / slot_mapping element indices; guard: byte offsets from the section edge
  Range writer_token;           // writer request's token range
  std::unordered_set<int64_t> victim_tokens;  // missing_write / wrong_value: distinct victim tokens
  Range victim_token;
  std::string example;          // first cell, rendered once
  std::string first_clause;     // wrong_value / scale_mismatch: what the first cell holds, for the sentence
  int64_t max_ulp = -1;         // wrong_value: largest ulp distance of a comparable cell, -1 if none
  bool incomparable = false;    // wrong_value: some cell holds NaN where a number is expected, or vice versa
  int64_t group_dims = 0;       // a quantised format's scale finding: dims one scale covers
  int64_t codes_under_wrong_scale = 0;  // ... and codes of those groups that differ too (not reported one by one)
};

// ---------------------------------------------------------------------------------------------
// Formatting helpers

std::string num(int64_t v) { return std::to_string(v); }

// A stored value as a decimal ("1.625", "nan", "-inf"): %.9g is exact for every format's values
// that matter here (fp8 and int8 exactly, f16/bf16 exactly, f32 to round-trip precision).
std::string value_text(uint32_t bits, DType t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(golden::bits_to_f32(bits, t)));
  return buf;
}

// "slot 2" or "slots 0..3".
std::string span(const char* singular, const char* plural, const Range& r) {
  if (r.empty()) return std::string(plural) + " none";
  if (r.lo == r.hi) return std::string(singular) + " " + num(r.lo);
  return std::string(plural) + " " + num(r.lo) + ".." + num(r.hi);
}

std::string count_of(int64_t n, const char* singular, const char* plural) {
  return num(n) + " " + (n == 1 ? singular : plural);
}

std::string tensors(const Case& c, const Group& g) { return g.k && g.v ? "K and V" : c.field_name(g.v); }

// Block `id` of the cache buffer: its number, or in a sharded case (case/context_parallel.h) its
// shard-local number and rank ("3 of rank 1"), as block tables and each rank's call see it.
std::string block_name(const Case& c, int64_t id) {
  if (!c.has_cp()) return num(id);
  const int64_t shard = std::max<int64_t>(c.shard_blocks(), 1);
  return num(id % shard) + " of rank " + num(id / shard);
}

std::string block_list(const Case& c, const BlockList& b) {
  if (b.ids.empty()) return "no block";
  std::vector<int64_t> ids = b.ids;
  std::sort(ids.begin(), ids.end());
  std::string s = ids.size() == 1 && !b.more ? "block " : "blocks ";
  const size_t shown = std::min<size_t>(ids.size(), 8);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + block_name(c, ids[i]);
  if (ids.size() > shown || b.more) s += b.more ? ", ... (more than " + num(kMaxListedBlocks) + ")" : ", ... (" + num(static_cast<int64_t>(ids.size())) + " blocks)";
  return s;
}

// "block 12 slots 0..3, heads 0..7" — the part of a cache location sentences use.
std::string cells_phrase(const Case& c, const Group& g) {
  return block_list(c, g.blocks) + " " + span("slot", "slots", g.pos) + ", " + span("head", "heads", g.head);
}

const char* kSectionNames[6] = {"input buffer", "slot_mapping",       "static scales",
                                "cache buffer", "scale cache buffer", "invalid-slot counter"};

std::string band_name(int64_t band) {
  return std::string("guard band ") + (band % 2 ? "after" : "before") + " the " + kSectionNames[band / 2];
}

// The group writer of a value decoded by decode.h.
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

// Inverts an input view: (row, head, dim) of input element e, if the view addresses it.
struct ViewCell {
  int64_t row = -1, head = -1, dim = -1;
};
std::optional<ViewCell> locate_in_view(const Case& c, const InputView& v, int64_t width, int64_t e) {
  struct Dim {
    int64_t stride, extent;
    int which;
  };
  Dim dims[3] = {{v.stride_token, c.num_input_rows, 0}, {v.stride_head, c.num_heads, 1}, {1, width, 2}};
  std::sort(dims, dims + 3, [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  int64_t rest = e - v.offset;
  if (rest < 0) return std::nullopt;
  int64_t index[3] = {0, 0, 0};
  for (const Dim& d : dims) {
    if (d.extent <= 1) continue;
    if (d.stride <= 0) return std::nullopt;
    const int64_t q = rest / d.stride;
    if (q >= d.extent) return std::nullopt;
    index[d.which] = q;
    rest -= q * d.stride;
  }
  if (rest != 0 || v.offset + input_elem_offset(v.stride_token, v.stride_head, index[0], index[1], index[2]) != e) {
    return std::nullopt;
  }
  return ViewCell{index[0], index[1], index[2]};
}

// ---------------------------------------------------------------------------------------------
// The comparison

class Differ {
 public:
  Differ(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual, const TolerancePolicy& policy,
         const OutsideDiff* outside)
      : c_(c),
        initial_(initial),
        expected_(expected),
        actual_(actual),
        layout_(expected.layout()),
        policy_(policy),
        loc_(c),
        scale_loc_(CacheLocator::scale_cache(c)),
        fields_(c.fields()),
        quantized_(is_quantized(c.cache_dtype)),
        scale_count_(static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks)),
        values_(c, initial, loc_),
        outside_(outside) {}

  Verdict run() {
    const ArenaLayout& l = layout_;
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
      scan(l.cache_begin, cache_end, 1, [&](int64_t i) { format_gap(FieldBuffer::cache, i); });
      guard(cache_end, l.scale_cache_begin, 3, 4);
      scan(l.scale_cache_begin, scale_cache_end, 1, [&](int64_t i) { format_gap(FieldBuffer::scale_cache, i); });
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

    // Most severe kind first, then by victim (requests in order, free blocks by number), then writer.
    std::vector<const Group*> order;
    for (const Group& g : groups_) order.push_back(&g);
    std::sort(order.begin(), order.end(), [](const Group* a, const Group* b) {
      const GroupKey& x = a->key;
      const GroupKey& y = b->key;
      return std::make_tuple(severity(x.kind), x.scale_cache, x.victim, x.victim_id, x.writer, x.writer_id) <
             std::make_tuple(severity(y.kind), y.scale_cache, y.victim, y.victim_id, y.writer, y.writer_id);
    });
    Verdict verdict;
    verdict.differing_cells = differing_;
    for (const Group* g : order) verdict.findings.push_back(render(*g));
    return verdict;
  }

 private:
  // Calls on_diff(element index within the section) for every differing element of [begin, end) (a
  // section starting 256-byte aligned and holding whole elements, or a part of one that starts at
  // `origin`).
  template <typename F>
  void scan(int64_t begin, int64_t end, int elem_size, F&& on_diff, int64_t origin = -1) {
    if (origin < 0) origin = begin;
    constexpr int64_t kChunk = 4096;  // a multiple of every element size
    const std::byte* e = expected_.data();
    const std::byte* a = actual_.data();
    for (int64_t off = begin; off < end; off += kChunk) {
      const int64_t n = std::min(kChunk, end - off);
      if (std::memcmp(e + off, a + off, static_cast<size_t>(n)) == 0) continue;
      for (int64_t x = off; x + elem_size <= off + n; x += elem_size) {
        if (std::memcmp(e + x, a + x, static_cast<size_t>(elem_size)) == 0) continue;
        ++differing_;
        on_diff((x - origin) / elem_size);
      }
    }
  }

  // Guard bytes [begin, end) between section `before` (-1: image start) and section `after` (-1:
  // image end). A byte is attributed to the nearer section.
  void guard(int64_t begin, int64_t end, int before, int after) {
    const int64_t mid = begin + (end - begin) / 2;
    scan(begin, end, 1, [&](int64_t i) {
      const int64_t at = begin + i;
      const bool after_prev = before >= 0 && (after < 0 || at < mid);
      const int section = after_prev ? before : after;
      const int64_t band = 2 * section + (after_prev ? 1 : 0);
      const int64_t offset = after_prev ? at - begin : at - end;  // >= 0 past the end, < 0 before the start
      Group& g = group(GroupKey{FindingKind::oob_write, Victim::guard_band, Writer::kernel, band, -1}, [&](Group& ng) {
        ng.example = "image byte " + num(at) + " (" + (offset >= 0 ? "+" : "") + num(offset) + (offset >= 0 ? " past the end" : " before the start") +
                    " of the " + kSectionNames[section] + "): expected " + hex_bits(load_elem(expected_.data(), at, 1), 1) +
                    " (guard pattern), found " + hex_bits(load_elem(actual_.data(), at, 1), 1);
      });
      g.elem.add(offset);
    });
  }

  void input_elem(int64_t e) {
    const int size = dtype_size(c_.input_dtype);
    Victim part = Victim::input_other;
    std::optional<ViewCell> vc;
    for (const CacheField& field : c_.fields()) {  // the views of each field's source (MLA: kv_c, k_pe)
      int64_t first = 0;
      for (int i = 0; i < field.num_parts && !vc; ++i) {
        if ((vc = locate_in_view(c_, field.parts[i].view, field.parts[i].width, e))) {
          part = field.index == 1 ? Victim::value_view : Victim::key_view;
          vc->dim += first;
        }
        first += field.parts[i].width;
      }
      if (vc) break;
    }
    Group& g = group(GroupKey{FindingKind::input_modified, part, Writer::kernel, -1, -1}, [&](Group& ng) {
      std::string where = "input element " + num(e);
      if (vc) where = (part == Victim::key_view ? "key" : "value") + std::string(" row ") + num(vc->row) + " head " + num(vc->head) + " dim " + num(vc->dim) + " (" + where + ")";
      ng.example = where + ": expected " + hex_bits(load_elem(expected_.input(), e, size), size) + ", found " + hex_bits(load_elem(actual_.input(), e, size), size);
    });
    g.elem.add(e);
    if (vc) {
      g.row.add(vc->row);
      g.head.add(vc->head);
      g.dim.add(vc->dim);
    }
  }

  void slot_elem(int64_t i) {
    if (c_.has_cp()) return cp_slot_elem(i);
    const bool csr = c_.addressing == Addressing::csr;
    const int size = index_type_size(c_.slot_dtype);  // i32 for CSR and window rows (validate.cpp)
    Group& g = group(GroupKey{FindingKind::input_modified, Victim::slot_mapping, Writer::kernel, -1, -1}, [&](Group& ng) {
      const uint64_t exp = load_elem(expected_.slots(), i, size);
      const int64_t t = c_.num_slots();
      const std::string what = csr    ? "CSR input " + csr_element_name(csr_arrays(c_), i)
                               : i >= 2 * t ? "window input seq_lens[" + num(i - 2 * t) + "]"  // a ring's rows (case/window.h)
                               : i >= t     ? "window input positions[" + num(i - t) + "]"
                                            : "slot_mapping entry " + num(i) + " (" + num(c_.slot_mapping[static_cast<size_t>(i)]) + ")";
      ng.example = what + ": expected " + hex_bits(exp, size) + ", found " + hex_bits(load_elem(actual_.slots(), i, size), size);
    });
    g.elem.add(i);
  }

  // Element i of a sharded case's slots section (case/context_parallel.h, CpSection): a rank's slot
  // mapping (input slot_mapping: the producer's output, expected as the formula gives it) or an input.
  void cp_slot_elem(int64_t i) {
    const CpSection s = cp_section(c_);
    const int64_t T = c_.num_slots();
    const auto exp = static_cast<int32_t>(load_elem(expected_.slots(), i, 4));
    const auto act = static_cast<int32_t>(load_elem(actual_.slots(), i, 4));
    if (c_.cp_input == CpInput::slot_mapping && i < s.positions) {
      const int64_t rank = i / T, row = i % T;
      Group& g = group(GroupKey{FindingKind::slot_mapping_mismatch, Victim::slot_mapping, Writer::kernel, rank, -1}, [&](Group& ng) {
        const auto pos = static_cast<int32_t>(load_elem(expected_.slots(), s.positions + row, 4));
        const auto req = static_cast<int32_t>(load_elem(expected_.slots(), s.requests + row, 4));
        const std::string token = pos < 0 ? "a padding row"
                                          : "request " + num(req) + "'s token at position " + num(pos) + ", held by rank " +
                                                num(shards_of(c_).owner(pos));
        ng.example = "rank " + num(rank) + "'s slot_mapping[" + num(row) + "] (" + token + "): expected " + num(exp) + ", found " +
                     num(act) + (static_cast<uint32_t>(act) == kCpMappingCanary ? " (never written)" : "");
      });
      g.row.add(row);
      g.elem.add(i);
      return;
    }
    Group& g = group(GroupKey{FindingKind::input_modified, Victim::slot_mapping, Writer::kernel, -1, -1}, [&](Group& ng) {
      const std::string what = c_.cp_input == CpInput::positions && i < s.positions ? "slot_mapping entry " + num(i)
                               : i < s.positions + T                              ? "context-parallel positions[" + num(i - s.positions) + "]"
                               : i < s.requests + T ? "context-parallel requests[" + num(i - s.requests) + "]"
                                                    : "context-parallel block_tables[" + num(i - s.tables) + "]";
      ng.example = what + ": expected " + num(exp) + ", found " + num(act);
    });
    g.elem.add(i);
  }

  // Element i of the static scales section: K scales [0, n), V scales [n, 2n).
  void scales_elem(int64_t i) {
    const bool is_value = i >= scale_count_;
    const int64_t index = is_value ? i - scale_count_ : i;
    Group& g = group(GroupKey{FindingKind::input_modified, Victim::static_scales, Writer::kernel, -1, -1}, [&](Group& ng) {
      const auto exp = static_cast<uint32_t>(load_elem(expected_.scales(), i, 4));
      const auto act = static_cast<uint32_t>(load_elem(actual_.scales(), i, 4));
      ng.example = std::string("static ") + c_.field_name(is_value) + " scale " + num(index) + " (scales element " + num(i) + "): expected " +
                   hex_bits(exp, 4) + " (" + value_text(exp, DType::f32) + "), found " + hex_bits(act, 4) + " (" + value_text(act, DType::f32) + ")";
    });
    (is_value ? g.v : g.k) = true;
    g.elem.add(index);
  }

  // True when the policy accepts `act` in an expected-write cell that should hold `exp` and held
  // `ini` before the run (act != exp). See the file comment for why ulp:N ignores `ini`.
  bool tolerated(uint32_t exp, uint32_t act, uint32_t ini, DType t) const {
    const TolerancePolicy rule = policy_.rule_for(t);
    switch (rule.kind) {
      case TolerancePolicy::Kind::exact: return false;
      case TolerancePolicy::Kind::ulp: {
        const int64_t u = golden::ulp_distance(exp, act, t);
        return u >= 0 && u <= rule.ulps;
      }
      case TolerancePolicy::Kind::written_any_value: return act != ini;
    }
    return false;
  }

  // Element e of the scale cache buffer (per_token_head), classified by location.
  void scale_cache_elem(int64_t e) {
    const auto exp = static_cast<uint32_t>(load_elem(expected_.scale_cache(), e, 4));
    const auto act = static_cast<uint32_t>(load_elem(actual_.scale_cache(), e, 4));
    const auto ini = static_cast<uint32_t>(load_elem(initial_.scale_cache(), e, 4));
    const CacheCell cell = scale_loc_.locate(e);
    if (cell.role == CacheCell::Role::sink) return;  // the sink slot's scale: unconstrained
    if (cell.role == CacheCell::Role::new_token && tolerated(exp, act, ini, DType::f32)) return;
    const auto [victim, victim_id] = victim_of(cell);
    GroupKey key{FindingKind::scale_mismatch, victim, Writer::unknown, victim_id, -1, true};
    if (cell.role == CacheCell::Role::new_token) {
      key.writer = Writer::kernel;
    } else {
      key.kind = context_write_kind(c_, cell);
    }
    const bool unwritten = act == ini;
    Group& g = group(key, [&](Group& ng) {
      ng.example = cell_name(cell, e, true) + ": expected " + hex_bits(exp, 4) + " (" + meaning_expected(cell, true) + ", " + value_text(exp, DType::f32) +
                   "), found " + hex_bits(act, 4) + " (" + (unwritten ? "its pre-run value: not written" : value_text(act, DType::f32)) + ")";
      ng.first_clause = std::string(c_.field_name(cell.is_value)) + " head " + num(cell.head) +
                        (unwritten ? " was not written" : " holds " + value_text(act, DType::f32)) + ", expected " + value_text(exp, DType::f32);
    });
    g.elem.add(e);
    if (cell.role != CacheCell::Role::gap) {
      (cell.is_value ? g.v : g.k) = true;
      g.blocks.add(cell.block);
      g.pos.add(cell.pos);
      g.head.add(cell.head);
    }
    if (key.kind == FindingKind::scale_mismatch) {
      g.victim_tokens.insert(cell.token);
      g.victim_token.add(cell.token);
    }
  }

  // ------------------------------------------------------------------------------------------
  // The quantised formats (case/quant_format.h): every element of every field is compared once,
  // scales and zero points first. Classification is by location (codes are not attributable by
  // value). A new token's scale that differs is a scale_mismatch naming the dims its group covers;
  // the codes of that group are then not reported one by one (they follow from the scale): they are
  // counted in the scale's finding. Elements hold their field's dtype, so differences are counted
  // per element (a nibble, a byte, an fp32 word), not per byte.

  struct ScaledGroup {
    int field;
    int64_t block, pos, head, group;
    bool operator<(const ScaledGroup& o) const {
      return std::tie(field, block, pos, head, group) < std::tie(o.field, o.block, o.pos, o.head, o.group);
    }
  };

  void format_fields() {
    const CacheFields& fields = fields_;
    std::map<ScaledGroup, size_t> wrong_scales;  // new tokens' groups whose scale (or zero point) differs: its finding's group
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
                const uint32_t exp = load_field_elem(e_buf, f.dtype, e), act = load_field_elem(a_buf, f.dtype, e);
                if (exp == act) continue;
                CacheCell cell = role;
                cell.head = h;
                cell.dim = d;
                cell.field = i;
                cell.elem = e;
                ++differing_;
                const uint32_t ini = load_field_elem(i_buf, f.dtype, e);
                if (cell.role == CacheCell::Role::sink) continue;
                if (cell.role == CacheCell::Role::new_token && tolerated(exp, act, ini, f.dtype)) continue;
                if (f.role == FieldRole::data && f.group > 0 && cell.role == CacheCell::Role::new_token) {
                  const CacheField& scale = fields.field[f.scale];
                  const auto it = wrong_scales.find(ScaledGroup{scale.scale, b, p, h, d / f.group});
                  if (it != wrong_scales.end()) {  // follows from its group's wrong scale
                    ++groups_[it->second].codes_under_wrong_scale;
                    continue;
                  }
                }
                Group& g = format_elem(f, cell, exp, act, ini);
                if (f.role != FieldRole::data && cell.role == CacheCell::Role::new_token)
                  wrong_scales.emplace(ScaledGroup{f.scale, b, p, h, d}, static_cast<size_t>(&g - groups_.data()));
              }
          }
      }
    }
  }

  // One differing element of a field: grouped by location.
  Group& format_elem(const CacheField& f, const CacheCell& cell, uint32_t exp, uint32_t act, uint32_t ini) {
    const auto [victim, victim_id] = victim_of(cell);
    const bool scale = f.role != FieldRole::data;
    GroupKey key{FindingKind::wrong_value, victim, Writer::kernel, victim_id, -1, f.buffer == FieldBuffer::scale_cache};
    key.field = cell.field;
    if (cell.role == CacheCell::Role::new_token) {
      key.kind = scale ? FindingKind::scale_mismatch : act == ini ? FindingKind::missing_write : FindingKind::wrong_value;
    } else {
      key.kind = context_write_kind(c_, cell);
      key.writer = Writer::unknown;
    }
    const bool unwritten = act == ini;
    Group& g = group(key, [&](Group& ng) {
      ng.example = format_cell_name(f, cell) + ": expected " + field_value(f, exp) + " (" + format_meaning(f, cell) + "), found " +
                   (unwritten ? field_value(f, act) + ", its pre-run value: not written" : field_value(f, act));
      ng.first_clause = format_cell_short(f, cell) + (unwritten ? " was not written" : " holds " + field_value(f, act)) + ", expected " +
                        field_value(f, exp);
      ng.group_dims = f.group;
    });
    if (key.kind == FindingKind::wrong_value) {
      const int64_t u = golden::ulp_distance(exp, act, f.dtype);
      if (u < 0) {
        g.incomparable = true;
      } else {
        g.max_ulp = std::max(g.max_ulp, u);
      }
    }
    g.elem.add(cell.elem);
    (cell.is_value ? g.v : g.k) = true;
    g.blocks.add(cell.block);
    g.pos.add(cell.pos);
    g.head.add(cell.head);
    g.dim.add(cell.dim);
    if (key.kind == FindingKind::missing_write || key.kind == FindingKind::wrong_value || key.kind == FindingKind::scale_mismatch) {
      g.victim_tokens.insert(cell.token);
      g.victim_token.add(cell.token);
    }
    return g;
  }

  // A byte of a format's buffer that differs: a stray write when no field holds it (a gap).
  void format_gap(FieldBuffer buffer, int64_t byte) {
    CacheCell cells[2];
    if ((buffer == FieldBuffer::cache ? loc_ : scale_loc_).locate_byte(byte, cells) > 0) return;  // a field's: format_fields()
    ++differing_;
    Group& g = group(GroupKey{FindingKind::stray_write, Victim::gap, Writer::unknown, -1, -1, buffer == FieldBuffer::scale_cache},
                     [&](Group& ng) {
                       const std::byte* e = buffer == FieldBuffer::cache ? expected_.cache() : expected_.scale_cache();
                       const std::byte* a = buffer == FieldBuffer::cache ? actual_.cache() : actual_.scale_cache();
                       ng.example = std::string(buffer == FieldBuffer::cache ? "cache" : "scale cache") + " byte " + num(byte) +
                                    " (no field holds it): expected " + hex_bits(load_elem(e, byte, 1), 1) + " (the gap canary), found " +
                                    hex_bits(load_elem(a, byte, 1), 1);
                     });
    g.elem.add(byte);
  }

  // "0x3a (1.5)" — a field element's bits and, where they have one, its value.
  std::string field_value(const CacheField& f, uint32_t bits) const {
    const int bytes = std::max(1, dtype_bits(f.dtype) / 8);
    std::string s = dtype_bits(f.dtype) == 4 ? "0x" + std::string(1, "0123456789abcdef"[bits & 0xF]) : hex_bits(bits, bytes);
    if (f.dtype == DType::uint8 || f.dtype == DType::uint4) return s + " (" + num(bits) + ")";
    return s + " (" + value_text(bits, f.dtype) + ")";
  }

  // "K block 3 slot 1 head 0 dim 5 (cache element 77; request 0's new token 9)"; scale fields name
  // the dims their group covers: "K scale block 3 slot 1 head 0, dims 16..31 (...)".
  std::string format_cell_short(const CacheField& f, const CacheCell& cell) const {
    std::string s = std::string(f.name) + " block " + block_name(c_, cell.block) + " slot " + num(cell.pos) + " head " + num(cell.head);
    if (f.role == FieldRole::data) return s + " dim " + num(cell.dim + f.entry_dim);
    return s + ", dims " + num(cell.dim * f.group) + ".." + num((cell.dim + 1) * f.group - 1);
  }
  std::string format_cell_name(const CacheField& f, const CacheCell& cell) const {
    const std::string unit = dtype_bits(f.dtype) == 4 ? "nibble " : dtype_bits(f.dtype) == 8 ? "byte " : std::string(to_string(f.dtype)) + " element ";
    return format_cell_short(f, cell) + " (" + (f.buffer == FieldBuffer::cache ? "cache " : "scale cache ") + unit + num(cell.elem) + ")";
  }
  std::string format_meaning(const CacheField& f, const CacheCell& cell) const {
    const std::string what = f.role == FieldRole::data ? "code" : f.role == FieldRole::scale ? "scale" : "zero point";
    switch (cell.role) {
      case CacheCell::Role::context: return "request " + num(cell.request) + "'s context token " + num(cell.token) + "'s " + what;
      case CacheCell::Role::new_token: return "request " + num(cell.request) + " token " + num(cell.token) + "'s new " + what;
      case CacheCell::Role::free_block: return "the free-block canary";
      default: return "the block-tail canary";
    }
  }

  void counter() {
    group(GroupKey{FindingKind::invalid_slot_miscount, Victim::counter, Writer::kernel, -1, -1}, [&](Group& g) {
      g.example = "invalid-slot counter: expected " + num(static_cast<int64_t>(expected_.counter_value())) + ", found " +
                  num(static_cast<int64_t>(actual_.counter_value()));
    });
  }

  // Victim of a cache cell by its location.
  static std::pair<Victim, int64_t> victim_of(const CacheCell& cell) {
    switch (cell.role) {
      case CacheCell::Role::context:
        if (cell.shared) return {Victim::shared_block, cell.block};
        return {Victim::context, cell.request};
      case CacheCell::Role::hole: return {Victim::hole, cell.request};
      case CacheCell::Role::new_token: return {Victim::new_token, cell.request};
      case CacheCell::Role::tail: return {Victim::tail, cell.request};
      case CacheCell::Role::free_block:
      case CacheCell::Role::sink: return {Victim::free_block, cell.block};  // never judged (cache_elem)
      case CacheCell::Role::gap: return {Victim::gap, -1};
    }
    return {Victim::gap, -1};
  }

  void cache_elem(int64_t e) {
    const int size = dtype_size(c_.cache_dtype);
    const auto exp = static_cast<uint32_t>(load_elem(expected_.cache(), e, size));
    const auto act = static_cast<uint32_t>(load_elem(actual_.cache(), e, size));
    const auto ini = static_cast<uint32_t>(load_elem(initial_.cache(), e, size));
    cache_elem(e, exp, act, ini);
  }

  // Cache elements outside the windows of a windowed arena, as the target reported them: every
  // element whose bits came back is classified like any cache element (its pre-run and expected
  // bits are the fill, the free-block canary); the rest are counted in one stray_write group (they
  // are free-block cells or stride gaps: every owned block lies inside a window).
  void outside_cache_elems(const OutsideDiff& o) {
    outside_pass_ = true;
    const CacheFill fill = make_cache_fill(c_);
    const int size = fill.elem_size;
    int64_t classified = 0;
    for (const OutsideDiff::Run& run : o.runs) {
      const auto* bytes = run.bytes.data();
      const int64_t fetched = static_cast<int64_t>(run.bytes.size()) / size;
      for (int64_t i = 0; i < fetched && run.begin + i < run.end; ++i) {
        const int64_t e = run.begin + i;
        cache_elem(e, fill.bits, load_cache_bits(bytes, i, size), fill.bits);
        ++classified;
      }
    }
    differing_ += o.differing_elems;  // classified elements count once, here
    const int64_t rest = o.differing_elems - classified;
    if (rest <= 0) return;
    last_ = nullptr;
    Group& g = group(GroupKey{FindingKind::stray_write, Victim::many, Writer::unknown, -1, -1}, [&](Group& ng) {
      ng.example = "cache elements outside the host's windows (free blocks or stride gaps) whose bits the target did not return: " +
                   num(rest) + " of " + num(o.differing_elems) + " differing elements, in " + num(o.runs_total) + " runs";
    });
    g.cells += rest - 1;
    for (const OutsideDiff::Run& run : o.runs) {
      const int64_t fetched = static_cast<int64_t>(run.bytes.size()) / size;
      if (run.begin + fetched < run.end) {
        g.elem.add(run.begin + fetched);
        g.elem.add(run.end - 1);
      }
    }
  }

  // One differing cache element: `exp` expected, `act` found, `ini` before the run.
  void cache_elem(int64_t e, uint32_t exp, uint32_t act, uint32_t ini) {
    const int size = dtype_size(c_.cache_dtype);
    const CacheCell cell = loc_.locate(e);
    if (cell.role == CacheCell::Role::sink) return;  // the sink slot: unconstrained
    if (cell.role == CacheCell::Role::new_token && tolerated(exp, act, ini, c_.cache_dtype)) return;
    const auto [victim, victim_id] = victim_of(cell);
    const CacheDiff x = classify_cache_diff(c_, cell, act, ini, values_);
    const DecodedValue& d = x.value;
    const std::optional<Canary> tag = x.tag;
    GroupKey key{x.kind, victim, Writer::kernel, victim_id, -1};
    switch (x.basis) {
      case CacheDiff::Basis::location:
        if (cell.role != CacheCell::Role::new_token) key.writer = Writer::unknown;
        break;
      case CacheDiff::Basis::over_read: key.writer = tag == Canary::input_gap ? Writer::input_gap : Writer::guard_pattern; break;
      case CacheDiff::Basis::not_written: break;
      case CacheDiff::Basis::value:
        key.writer = writer_of(d.source);
        key.writer_id = d.source == ValueSource::request ? d.request : d.row;
        break;
    }

    Group& g = group(key, [&](Group& ng) {
      const std::string where = std::string(c_.field_name(cell.is_value)) + " head " + num(cell.head) + " dim " + num(cell.dim);
      if (quantized_) {
        // Stored codes with their decoded values, and the distance for expected writes.
        const std::string found = key.kind == FindingKind::missing_write ? "its pre-run value" : value_text(act, c_.cache_dtype);
        ng.example = cell_name(cell, e) + ": expected " + hex_bits(exp, size) + " (" + meaning_expected(cell) + ", " + value_text(exp, c_.cache_dtype) +
                     "), found " + hex_bits(act, size) + " (" + found + ")";
        ng.first_clause = where + " holds " + hex_bits(act, size) + " (" + value_text(act, c_.cache_dtype) + ") instead of " + hex_bits(exp, size) + " (" +
                          value_text(exp, c_.cache_dtype) + ")";
      } else {
        ng.example = cell_name(cell, e) + ": expected " + hex_bits(exp, size) + " (" + meaning_expected(cell) + "), found " + hex_bits(act, size) +
                     " (" + meaning_found(key, d, tag) + ")";
        ng.first_clause = where + " holds " + (key.writer == Writer::request ? value_name(d) : meaning_found(key, d, tag));
      }
    });
    if (key.kind == FindingKind::wrong_value) {
      const int64_t u = golden::ulp_distance(exp, act, c_.cache_dtype);
      if (u < 0) {
        g.incomparable = true;
      } else {
        g.max_ulp = std::max(g.max_ulp, u);
      }
    }
    g.elem.add(e);
    if (cell.role != CacheCell::Role::gap) {
      (cell.is_value ? g.v : g.k) = true;
      g.blocks.add(cell.block);
      g.pos.add(cell.pos);
      g.head.add(cell.head);
      g.dim.add(cell.dim);
    }
    if (key.writer == Writer::request) g.writer_token.add(d.token);
    if (key.kind == FindingKind::missing_write || key.kind == FindingKind::wrong_value) {
      g.victim_tokens.insert(cell.token);
      g.victim_token.add(cell.token);
    }
    if (cell.role == CacheCell::Role::hole) g.victim_token.add(cell.token);  // the holes' positions, for the sentence
  }

  // "prefix block 12 shared by requests 0, 2 and 5": every owner of a shared block, named.
  std::string shared_phrase(int64_t block) const {
    std::string s = "prefix block " + num(block) + " shared by requests ";
    const std::vector<int64_t>* owners = loc_.sharers(block);
    if (owners == nullptr) return s + "?";
    for (size_t i = 0; i < owners->size(); ++i) s += (i == 0 ? "" : i + 1 == owners->size() ? " and " : ", ") + num((*owners)[i]);
    return s;
  }

  // "K block 12 slot 3 head 0 dim 5 (cache element 1234; request 7 context token 195)"; for the
  // scale cache "K scale block 12 slot 3 head 0 (scale cache element 77; ...)".
  std::string cell_name(const CacheCell& cell, int64_t e, bool scale = false) const {
    const std::string buffer = scale ? "scale cache element " : "cache element ";
    if (cell.role == CacheCell::Role::gap) return buffer + num(e) + " (stride gap)";
    std::string s = std::string(c_.field_name(cell.is_value)) + (scale ? " scale" : "") + " block " + block_name(c_, cell.block) + " slot " + num(cell.pos) +
                    " head " + num(cell.head) + (scale ? "" : " dim " + num(cell.dim)) + " (" + buffer + num(e) + "; ";
    switch (cell.role) {
      case CacheCell::Role::context:
        s += cell.shared ? shared_phrase(cell.block) + ", context token " + num(cell.token) + " of request " + num(cell.request)
                         : "request " + num(cell.request) + "'s context token " + num(cell.token);
        break;
      case CacheCell::Role::new_token: s += "request " + num(cell.request) + "'s new token " + num(cell.token); break;
      case CacheCell::Role::tail: s += "request " + num(cell.request) + "'s block tail, token " + num(cell.token); break;
      case CacheCell::Role::hole: s += "request " + num(cell.request) + "'s hole, unwritten position " + num(cell.token); break;
      default: s += "free block"; break;
    }
    return s + ")";
  }

  std::string meaning_expected(const CacheCell& cell, bool scale = false) const {
    if (outside_pass_ && !scale) return "the free-block canary, the fill outside the windows";
    switch (cell.role) {
      case CacheCell::Role::context: return "request " + num(cell.request) + "'s context token " + num(cell.token);
      case CacheCell::Role::new_token:
        return "request " + num(cell.request) + " token " + num(cell.token) + (scale ? "'s new scale" : "'s new value");
      case CacheCell::Role::tail: return "the block-tail canary";
      case CacheCell::Role::hole: return "the block-tail canary (a hole: never written)";
      case CacheCell::Role::free_block: return "the free-block canary";
      case CacheCell::Role::sink: return "anything (the sink slot)";
      case CacheCell::Role::gap: return "the stride-gap canary";
    }
    return "?";
  }

  std::string value_name(const DecodedValue& d) const {
    return "request " + num(d.request) + " token " + num(d.token) + " head " + num(d.head) + " dim " + num(d.dim) + "'s " +
           c_.field_name(d.is_value) + " value";
  }

  std::string meaning_found(const GroupKey& key, const DecodedValue& d, std::optional<Canary> tag) const {
    if (key.kind == FindingKind::missing_write) return "its pre-run value";
    switch (key.writer) {
      case Writer::request: return value_name(d);
      case Writer::padding_row:
      case Writer::invalid_row:
      case Writer::graph_row:
      case Writer::unwritten_rows: return "the value of " + writer_name(key.writer, key.writer_id, Range{});
      case Writer::ambiguous: return "a value several input elements hold";
      default: break;
    }
    if (tag) return canary_name(*tag);
    return "a value no input element holds";
  }

  std::string writer_name(Writer w, int64_t id, const Range& tokens) const {
    const std::string T = num(c_.num_slots());
    switch (w) {
      case Writer::kernel: return "the kernel";
      case Writer::request: return "request " + num(id) + (tokens.empty() ? "" : " (" + span("token", "tokens", tokens) + ")");
      case Writer::padding_row:
        return id >= 0 ? "padding row " + num(id) + " (slot " + num(c_.slot_mapping[static_cast<size_t>(id)]) + ")"
                     : c_.padding == PaddingMode::sink ? "padding rows (slot 0, the sink)" : "padding rows (slot < 0)";
      case Writer::invalid_row:
        return id >= 0 ? "invalid-slot row " + num(id) + " (slot " + num(c_.slot_mapping[static_cast<size_t>(id)]) + " >= capacity " +
                             num(c_.capacity()) + ")"
                       : "invalid-slot rows (slot >= capacity " + num(c_.capacity()) + ")";
      case Writer::graph_row:
        return id >= 0 ? "CUDA-graph padding row " + num(id) + " (row >= T = " + T + ")" : "CUDA-graph padding rows (rows >= T = " + T + ")";
      case Writer::unwritten_rows: return "padding rows (slot < 0, slot >= capacity or row >= T)";
      case Writer::unknown: return "unknown writer";
      case Writer::ambiguous: return "ambiguous writer (the values match several input elements)";
      case Writer::input_gap: return "the input-gap canary";
      case Writer::guard_pattern: return "the guard pattern";
      case Writer::many: return "further writers";
    }
    return "?";
  }

  // Creates the group of `key` on first use (calling init(group) to render its example), counts
  // one cell in it and returns it.
  template <typename Init>
  Group& group(GroupKey key, Init&& init) {
    if (last_ != nullptr && last_->key == key) {
      ++last_->cells;
      return *last_;
    }
    auto it = index_of_.find(key);
    if (it == index_of_.end()) {
      if (groups_.size() >= kMaxGroups) {
        key = GroupKey{key.kind, Victim::many, Writer::many, -1, -1};
        it = index_of_.find(key);
      }
    }
    if (it == index_of_.end()) {
      it = index_of_.emplace(key, groups_.size()).first;
      groups_.emplace_back();
      groups_.back().key = key;
      init(groups_.back());
    }
    last_ = &groups_[it->second];
    ++last_->cells;
    return *last_;
  }

  std::string victim_name(const GroupKey& k) const {
    switch (k.victim) {
      case Victim::guard_band: return band_name(k.victim_id);
      case Victim::key_view: return "key view";
      case Victim::value_view: return "value view";
      case Victim::input_other: return "input buffer outside the key/value views";
      case Victim::slot_mapping: return "slot_mapping";
      case Victim::static_scales: return "static scales";
      case Victim::counter: return "invalid-slot counter";
      case Victim::context:
      case Victim::new_token: return "request " + num(k.victim_id);
      case Victim::tail: return "request " + num(k.victim_id) + "'s block tail";
      case Victim::hole: return "request " + num(k.victim_id) + "'s holes";
      case Victim::shared_block: return shared_phrase(k.victim_id);
      case Victim::free_block: return "free block " + block_name(c_, k.victim_id);
      case Victim::gap: return k.scale_cache ? "scale cache stride gaps" : "cache stride gaps";
      case Victim::many: return "further cells";
    }
    return "?";
  }

  // "request 7's block 12 slots 0..3, heads 0..7" — what a cache finding hit, for sentences.
  std::string victim_phrase(const Group& g, bool own_context) const {
    const std::string cells = (g.key.scale_cache ? "scale cache " : "") + cells_phrase(c_, g);
    switch (g.key.victim) {
      case Victim::context:
        return own_context ? "its own earlier context at " + cells : "request " + num(g.key.victim_id) + "'s " + cells;
      case Victim::new_token: return "request " + num(g.key.victim_id) + "'s new-token cells at " + cells;
      case Victim::tail: return "the unused tail of request " + num(g.key.victim_id) + "'s " + cells;
      case Victim::hole:
        return "request " + num(g.key.victim_id) + "'s holes (unwritten positions between its new tokens, " +
               span("position", "positions", g.victim_token) + ") at " + cells;
      case Victim::shared_block: return "the " + shared_phrase(g.key.victim_id) + " (earlier context of each) at " + cells;
      case Victim::free_block: return "free " + cells;
      case Victim::gap:
        return std::string(g.key.scale_cache ? "the scale cache's" : "the cache's") + " stride gaps at " + span("element", "elements", g.elem);
      default: return "further cache cells at " + span("element", "elements", g.elem);
    }
  }

  std::string cache_where(const Group& g) const {
    if (g.key.field >= 0) {  // a quantised format's field: its name, and dims or the groups of dims
      const CacheField& f = fields_.field[g.key.field];
      if (f.role == FieldRole::data) return std::string(f.name) + " " + cells_phrase(c_, g) + ", " + span("dim", "dims", g.dim);
      return std::string(f.name) + " " + cells_phrase(c_, g) + ", " + span("group", "groups", g.dim) + " of " + num(f.group) + " dims";
    }
    const std::string buffer = g.key.scale_cache ? "scale cache buffer " : "cache buffer ";
    if (g.key.victim == Victim::gap) return buffer + span("element", "elements", g.elem) + " (stride gaps)";
    if (g.blocks.ids.empty()) return buffer + span("element", "elements", g.elem);
    if (g.key.scale_cache) return tensors(c_, g) + " scale cache " + cells_phrase(c_, g);
    return tensors(c_, g) + " " + cells_phrase(c_, g) + ", " + span("dim", "dims", g.dim);
  }

  // "max 3 ulp in fp8_e4m3" (and NaN against a number) for a wrong_value group.
  std::string ulp_phrase(const Group& g) const {
    std::string s;
    if (g.max_ulp >= 0) s = "max " + num(g.max_ulp) + " ulp in " + std::string(to_string(c_.cache_dtype));
    if (g.incomparable) s += std::string(s.empty() ? "" : ", and ") + "NaN against a number in " + std::string(to_string(c_.cache_dtype));
    return s;
  }

  // "request 0's token 5 (block 3 slot 1)" / "request 0's tokens 5..9 (3 tokens)".
  std::string victim_tokens_phrase(const Group& g) const {
    const auto n = static_cast<int64_t>(g.victim_tokens.size());
    if (g.key.victim == Victim::many) return "further requests' tokens";
    std::string s = "request " + num(g.key.victim_id) + "'s ";
    if (n == 1) return s + "token " + num(g.victim_token.lo) + " (" + block_list(c_, g.blocks) + " " + span("slot", "slots", g.pos) + ")";
    s += span("token", "tokens", g.victim_token);
    if (n != g.victim_token.count()) s += " (" + num(n) + " of them)";
    return s;
  }

  Finding render(const Group& g) const {
    const GroupKey& k = g.key;
    Finding f;
    f.kind = k.kind;
    f.cells = g.cells;
    f.example = g.example;
    f.victim = victim_name(k);
    f.writer = writer_name(k.writer, k.writer_id, g.writer_token);
    f.victim_class = std::string(k.scale_cache ? "scale_cache:" : "") + victim_class_name(k.victim);
    f.writer_class = writer_class_name(k.writer);
    if (k.victim == Victim::context || k.victim == Victim::new_token || k.victim == Victim::tail || k.victim == Victim::hole) {
      f.victim_request = k.victim_id;
      f.victim_requests = {k.victim_id};
    }
    if (k.victim == Victim::shared_block) {
      if (const std::vector<int64_t>* owners = loc_.sharers(k.victim_id)) f.victim_requests = *owners;
      if (!f.victim_requests.empty()) f.victim_request = f.victim_requests.front();
    }
    if (k.writer == Writer::request) f.writer_request = k.writer_id;
    // "K and V, 32 cells"; cells of stride gaps belong to neither tensor.
    const std::string cells = (g.k || g.v ? tensors(c_, g) + ", " : std::string()) + count_of(g.cells, "cell", "cells");
    const std::string subject =
        k.writer == Writer::unknown ? "an unknown writer" : k.writer == Writer::ambiguous ? "an ambiguous writer (the values match several input elements)" : f.writer;

    switch (k.kind) {
      case FindingKind::oob_write: {
        const bool after = k.victim_id % 2 == 1;
        f.where = after ? "bytes +" + num(g.elem.lo) + "..+" + num(g.elem.hi) + " past the end of the " + kSectionNames[k.victim_id / 2]
                        : "bytes " + num(g.elem.lo) + ".." + num(g.elem.hi) + " before the start of the " + kSectionNames[k.victim_id / 2];
        f.sentence = "the kernel wrote " + count_of(g.cells, "byte", "bytes") + " into the " + f.victim + " (" + f.where + ")";
        break;
      }
      case FindingKind::cross_request_write:
      case FindingKind::stray_write:
        f.where = cache_where(g);
        f.sentence = subject + " wrote into " + victim_phrase(g, k.kind == FindingKind::stray_write && k.victim == Victim::context) + " (" + cells + ")";
        break;
      case FindingKind::padding_leak:
        f.where = cache_where(g);
        f.sentence = subject + " leaked into " + victim_phrase(g, false) + " (" + cells + ")";
        break;
      case FindingKind::oob_read_suspected:
        f.where = cache_where(g);
        f.sentence = f.writer + " appeared in " + victim_phrase(g, false) + " (" + cells + "): the kernel probably read outside the key/value views";
        break;
      case FindingKind::wrong_value:
      case FindingKind::missing_write: {
        f.where = cache_where(g);
        const int64_t expected_cells = static_cast<int64_t>(g.victim_tokens.size()) * c_.num_heads * (c_.head_dim + (c_.has_value() ? c_.value_dim() : 0));
        const bool one = g.victim_tokens.size() == 1;
        if (k.kind == FindingKind::missing_write) {
          f.sentence = victim_tokens_phrase(g) + (one ? " was" : " were") + " not written: " + num(g.cells) + " of " + num(expected_cells) +
                       " cells still hold their pre-run value";
        } else {
          f.sentence = victim_tokens_phrase(g) + (one ? " was" : " were") + " written with wrong values in " + num(g.cells) + " of " +
                       num(expected_cells) + " cells, " + ulp_phrase(g) + " (first: " + g.first_clause + ")";
        }
        break;
      }
      case FindingKind::scale_mismatch: {
        f.where = cache_where(g);
        const int64_t expected_cells = static_cast<int64_t>(g.victim_tokens.size()) * c_.num_fields() * c_.num_heads;
        if (k.field >= 0) {  // a quantised format: the scale is the cause; its groups' codes follow from it
          const CacheField& sf = fields_.field[k.field];
          const std::string what = sf.role == FieldRole::zero ? "zero points" : "scales";
          f.sentence = victim_tokens_phrase(g) + " got wrong " + what + " in " + count_of(g.cells, "group", "groups") + " of " +
                       num(g.group_dims) + " dims (first: " + g.first_clause + ")";
          if (g.codes_under_wrong_scale > 0)
            f.sentence += "; " + count_of(g.codes_under_wrong_scale, "code", "codes") + " of those groups differ too, as they follow from the " +
                          (sf.role == FieldRole::zero ? "zero point" : "scale");
          break;
        }
        f.sentence = victim_tokens_phrase(g) + " got wrong scales in " + num(g.cells) + " of " + num(expected_cells) + " scale cache cells (first: " +
                     g.first_clause + ")";
        break;
      }
      case FindingKind::input_modified: {
        const std::string elems = count_of(g.cells, "element", "elements");
        if (k.victim == Victim::static_scales) {
          f.where = "static " + tensors(c_, g) + " " + span("scale", "scales", g.elem);
          f.sentence = f.where + " changed (" + elems + ")";
        } else if (k.victim == Victim::slot_mapping) {
          f.where = (c_.has_cp() ? "slots section " : "slot_mapping ") + span("entry", "entries", g.elem);
          f.sentence = "the kernel modified " + f.where + " (" + count_of(g.cells, "entry", "entries") + ")";
        } else if (k.victim == Victim::input_other) {
          f.where = "input buffer " + span("element", "elements", g.elem);
          f.sentence = "the kernel modified " + elems + " of the input buffer outside the key/value views (" + span("element", "elements", g.elem) + ")";
        } else {
          f.where = f.victim + " " + span("row", "rows", g.row) + ", " + span("head", "heads", g.head) + ", " + span("dim", "dims", g.dim);
          f.sentence = "the kernel modified the " + f.where + " (" + elems + ")";
        }
        break;
      }
      case FindingKind::slot_mapping_mismatch:
        f.where = "rank " + num(k.victim_id) + "'s slot_mapping " + span("row", "rows", g.row);
        f.victim = "rank " + num(k.victim_id) + "'s slot_mapping";
        f.writer = "the slot-mapping producer";
        f.sentence = "the slot-mapping producer gave rank " + num(k.victim_id) + " wrong slots in " + count_of(g.cells, "row", "rows") +
                     " of " + num(c_.num_slots()) + " (" + span("row", "rows", g.row) + "; first: " + g.example + ")";
        break;
      case FindingKind::invalid_slot_miscount:
        f.where = "invalid-slot counter";
        f.sentence = "expected " + num(static_cast<int64_t>(expected_.counter_value())) + " slots >= capacity counted, found " +
                     num(static_cast<int64_t>(actual_.counter_value()));
        break;
      default:
        f.sentence = "unexpected finding kind";
        break;
    }
    return f;
  }

  const Case& c_;
  const Arena& initial_;
  const Arena& expected_;
  const Arena& actual_;
  const ArenaLayout& layout_;
  const TolerancePolicy policy_;
  const CacheLocator loc_;        // the KV cache buffer
  const CacheLocator scale_loc_;  // the scale cache buffer
  const CacheFields fields_;      // c.fields()
  const bool quantized_;          // 1-byte cache dtype: classification by location only
  const int64_t scale_count_;     // static scales per tensor
  ValueDecoder values_;           // indexes the input on the first cache difference that needs decoding
  const OutsideDiff* outside_;    // windowed arenas: what the target found outside the windows
  bool outside_pass_ = false;     // classifying those now
  std::vector<Group> groups_;
  std::unordered_map<GroupKey, size_t, GroupKeyHash> index_of_;
  Group* last_ = nullptr;  // group of the previous cell (cells of one group are usually adjacent)
  int64_t differing_ = 0;
};

bool same_layout(const ArenaLayout& a, const ArenaLayout& b) {
  return a.guard_bytes == b.guard_bytes && a.input_begin == b.input_begin && a.input_bytes == b.input_bytes &&
         a.slots_begin == b.slots_begin && a.slots_bytes == b.slots_bytes && a.scales_begin == b.scales_begin &&
         a.scales_bytes == b.scales_bytes && a.cache_begin == b.cache_begin && a.cache_bytes == b.cache_bytes &&
         a.scale_cache_begin == b.scale_cache_begin && a.scale_cache_bytes == b.scale_cache_bytes &&
         a.counter_begin == b.counter_begin && a.total_bytes == b.total_bytes;
}

}  // namespace

CacheDiff classify_cache_diff(const Case& c, const CacheCell& cell, uint32_t found, uint32_t pre_run, ValueDecoder& values) {
  CacheDiff x;
  const int size = dtype_size(c.cache_dtype);
  if (is_quantized(c.cache_dtype) || c.has_format()) {
    // By location only (see the file comment); a quantised format's bytes hold codes and scales.
    x.basis = CacheDiff::Basis::location;
    if (cell.role == CacheCell::Role::new_token) {
      x.kind = found == pre_run ? FindingKind::missing_write : FindingKind::wrong_value;
    } else {
      x.kind = context_write_kind(c, cell);
    }
    return x;
  }
  x.tag = golden::canary_of(found, c.cache_dtype);
  const uint32_t all_ones = size == 4 ? 0xFFFFFFFFu : 0xFFFFu;
  if (found == all_ones || x.tag == Canary::guard || x.tag == Canary::input_gap) {
    x.kind = FindingKind::oob_read_suspected;
    x.basis = CacheDiff::Basis::over_read;
    return x;
  }
  if (cell.role == CacheCell::Role::new_token && found == pre_run) {
    x.kind = FindingKind::missing_write;
    x.basis = CacheDiff::Basis::not_written;
    return x;
  }
  DecodedValue& d = x.value;
  d = values.decode(found, cell);
  if ((d.source == ValueSource::unknown || d.source == ValueSource::ambiguous) &&
      (x.tag == Canary::padding_row || x.tag == Canary::invalid_row || x.tag == Canary::graph_row)) {
    // The bits of a padding-row canary that no row converts to (e.g. a raw bit copy across dtypes),
    // or that several rows hold (every padding row carries the one canary).
    d.source = x.tag == Canary::padding_row ? ValueSource::padding_row : x.tag == Canary::invalid_row ? ValueSource::invalid_row : ValueSource::graph_row;
  }
  const bool unwritten = d.source == ValueSource::padding_row || d.source == ValueSource::invalid_row ||
                         d.source == ValueSource::graph_row || d.source == ValueSource::unwritten_rows;
  if (unwritten) {
    x.kind = FindingKind::padding_leak;
  } else if (cell.role == CacheCell::Role::new_token) {
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
  return x;
}

TolerancePolicy TolerancePolicy::rule_for(DType format) const {
  for (const ForFormat& f : per_format)
    if (f.format == format) return TolerancePolicy{f.kind, f.ulps, {}};
  return TolerancePolicy{kind, ulps, {}};
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

Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual, const TolerancePolicy& policy,
                       const OutsideDiff* outside) {
  if (!same_layout(initial.layout(), expected.layout()) || !same_layout(expected.layout(), actual.layout())) {
    throw std::invalid_argument("compare_arenas: the three arenas have different layouts");
  }
  if (initial.materialized() != expected.materialized() || expected.materialized() != actual.materialized()) {
    throw std::invalid_argument("compare_arenas: the three arenas materialise different ranges");
  }
  if (expected.windowed() && (outside == nullptr || !outside->checked)) {
    throw std::invalid_argument("compare_arenas: a windowed arena needs the target's check of the cache outside the windows");
  }
  // The common case: nothing differs.
  bool same = outside == nullptr || outside->clean();
  for (const ByteRange& r : expected.materialized())
    same = same && std::memcmp(expected.data() + r.begin, actual.data() + r.begin, static_cast<size_t>(r.size())) == 0;
  if (same) return Verdict{};
  return Differ(c, initial, expected, actual, policy, outside).run();
}

}  // namespace kvf
