// verdict.cpp — the verdict of one run: the classified cells of arena/classify.h, grouped.
//
// Every differing element arrives as an ImageCell with integer keys. Cells sharing (kind, victim,
// writer) form one group: groups aggregate ranges of the cells' coordinates, and strings are built
// once per group (its first cell becomes the example), so a catastrophic run with millions of
// differing cells costs integer work per cell and a bounded number of groups. Each group becomes
// one Finding with its sentence.
#include "verdict.h"

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

#include "arena/windows.h"
#include "case/context_parallel.h"
#include "case/csr.h"
#include "base/rng.h"
#include "values/convert.h"
#include "values/payload.h"

namespace kvf {

namespace {

using golden::Canary;

// ---------------------------------------------------------------------------------------------
// Group keys: what was hit (victim) and whose data landed there (writer)

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
  bool in_cache = false;        // its cells are cache or scale cache elements
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
  // wrong_value: counts the distance of a cell holding `act` instead of `exp` in stored format t.
  void add_distance(uint32_t exp, uint32_t act, DType t) {
    const int64_t u = golden::ulp_distance(exp, act, t);
    if (u < 0) {
      incomparable = true;
    } else {
      max_ulp = std::max(max_ulp, u);
    }
  }
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

// ---------------------------------------------------------------------------------------------
// The comparison

class Grouper {
 public:
  Grouper(const Case& c, const Arena& expected, const Arena& actual)
      : c_(c),
        expected_(expected),
        actual_(actual),
        loc_(c),
        fields_(c.fields()),
        quantized_(is_quantized(c.cache_dtype)),
        scale_count_(static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks)) {}

  // Files one classified cell in its group.
  void add(const ImageCell& x) {
    in_cache_ = x.section == Section::cache || x.section == Section::scale_cache;
    switch (x.section) {
      case Section::guard: return guard(x);
      case Section::input: return input_elem(x);
      case Section::slots: return c_.has_cp() ? cp_slot_elem(x) : slot_elem(x);
      case Section::scales: return scales_elem(x);
      case Section::counter: return counter();
      case Section::cache:
      case Section::scale_cache: break;
    }
    if (x.tolerated) return;
    if (c_.has_format()) {
      if (x.cell.field < 0) return format_gap(x);
      if (x.follows_scale >= 0) {  // counted in the finding of its group's scale
        ++groups_[scale_groups_[static_cast<size_t>(x.follows_scale)]].codes_under_wrong_scale;
        return;
      }
      return format_elem(x);
    }
    if (x.section == Section::scale_cache) return scale_cache_elem(x);
    if (x.victim == Victim::many) return outside_rest(x);
    cache_elem(x);
  }

  // The findings, most severe kind first, then by victim (requests in order, free blocks by
  // number), then writer.
  Verdict finish(int64_t differing) const {
    std::vector<const Group*> order;
    for (const Group& g : groups_) order.push_back(&g);
    std::sort(order.begin(), order.end(), [](const Group* a, const Group* b) {
      const GroupKey& x = a->key;
      const GroupKey& y = b->key;
      return std::make_tuple(severity(x.kind), x.scale_cache, x.victim, x.victim_id, x.writer, x.writer_id) <
             std::make_tuple(severity(y.kind), y.scale_cache, y.victim, y.victim_id, y.writer, y.writer_id);
    });
    Verdict verdict;
    verdict.differing_cells = differing;
    for (const Group* g : order) verdict.findings.push_back(render(*g));
    return verdict;
  }

 private:
  void guard(const ImageCell& x) {
    const int64_t band = x.victim_id, offset = x.offset;
    Group& g = group(GroupKey{FindingKind::oob_write, Victim::guard_band, Writer::kernel, band, -1}, [&](Group& ng) {
      ng.example = "image byte " + num(x.elem) + " (" + (offset >= 0 ? "+" : "") + num(offset) + (offset >= 0 ? " past the end" : " before the start") +
                   " of the " + kSectionNames[band / 2] + "): expected " + hex_bits(x.expected, 1) + " (guard pattern), found " + hex_bits(x.found, 1);
    });
    g.elem.add(offset);
  }

  void input_elem(const ImageCell& x) {
    const bool located = x.row >= 0;  // in a key or value view
    Group& g = group(GroupKey{FindingKind::input_modified, x.victim, Writer::kernel, -1, -1}, [&](Group& ng) {
      std::string where = "input element " + num(x.elem);
      if (located)
        where = (x.victim == Victim::key_view ? "key" : "value") + std::string(" row ") + num(x.row) + " head " + num(x.head) + " dim " + num(x.dim) +
                " (" + where + ")";
      ng.example = where + ": expected " + hex_bits(x.expected, x.size) + ", found " + hex_bits(x.found, x.size);
    });
    g.elem.add(x.elem);
    if (located) {
      g.row.add(x.row);
      g.head.add(x.head);
      g.dim.add(x.dim);
    }
  }

  void slot_elem(const ImageCell& x) {
    const bool csr = c_.addressing == Addressing::csr;
    const int64_t i = x.elem;
    Group& g = group(GroupKey{FindingKind::input_modified, Victim::slot_mapping, Writer::kernel, -1, -1}, [&](Group& ng) {
      const int64_t t = c_.num_slots();
      const std::string what = csr    ? "CSR input " + csr_element_name(csr_arrays(c_), i)
                               : i >= 2 * t ? "window input seq_lens[" + num(i - 2 * t) + "]"  // a ring's rows (case/window.h)
                               : i >= t     ? "window input positions[" + num(i - t) + "]"
                                            : "slot_mapping entry " + num(i) + " (" + num(c_.slot_mapping[static_cast<size_t>(i)]) + ")";
      ng.example = what + ": expected " + hex_bits(x.expected, x.size) + ", found " + hex_bits(x.found, x.size);
    });
    g.elem.add(i);
  }

  // Element i of a sharded case's slots section (case/context_parallel.h, CpSection): a rank's slot
  // mapping (input slot_mapping: the producer's output, expected as the formula gives it) or an input.
  void cp_slot_elem(const ImageCell& x) {
    const CpSection s = cp_section(c_);
    const int64_t T = c_.num_slots(), i = x.elem;
    const auto exp = static_cast<int32_t>(x.expected);
    const auto act = static_cast<int32_t>(x.found);
    if (x.kind == FindingKind::slot_mapping_mismatch) {
      const int64_t rank = x.victim_id, row = x.row;
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
  void scales_elem(const ImageCell& x) {
    const bool is_value = x.elem >= scale_count_;
    const int64_t index = is_value ? x.elem - scale_count_ : x.elem;
    Group& g = group(GroupKey{FindingKind::input_modified, Victim::static_scales, Writer::kernel, -1, -1}, [&](Group& ng) {
      const auto exp = static_cast<uint32_t>(x.expected), act = static_cast<uint32_t>(x.found);
      ng.example = std::string("static ") + c_.field_name(is_value) + " scale " + num(index) + " (scales element " + num(x.elem) + "): expected " +
                   hex_bits(exp, 4) + " (" + value_text(exp, DType::f32) + "), found " + hex_bits(act, 4) + " (" + value_text(act, DType::f32) + ")";
    });
    (is_value ? g.v : g.k) = true;
    g.elem.add(index);
  }

  // Element of the scale cache buffer (per_token_head), classified by location.
  void scale_cache_elem(const ImageCell& x) {
    const CacheCell& cell = x.cell;
    const GroupKey key{x.kind, x.victim, x.writer, x.victim_id, -1, true};
    const auto exp = static_cast<uint32_t>(x.expected), act = static_cast<uint32_t>(x.found);
    const bool unwritten = x.found == x.pre_run;
    Group& g = group(key, [&](Group& ng) {
      ng.example = cell_name(cell, x.elem, true) + ": expected " + hex_bits(exp, 4) + " (" + meaning_expected(cell, true) + ", " +
                   value_text(exp, DType::f32) + "), found " + hex_bits(act, 4) + " (" +
                   (unwritten ? "its pre-run value: not written" : value_text(act, DType::f32)) + ")";
      ng.first_clause = std::string(c_.field_name(cell.is_value)) + " head " + num(cell.head) +
                        (unwritten ? " was not written" : " holds " + value_text(act, DType::f32)) + ", expected " + value_text(exp, DType::f32);
    });
    g.elem.add(x.elem);
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

  // One differing element of a quantised format's field (case/quant_format.h), grouped by location.
  // A new token's scale that differs names the dims its group covers; the codes of that group
  // follow from it and are counted in its finding (add()).
  void format_elem(const ImageCell& x) {
    const CacheCell& cell = x.cell;
    const CacheField& f = fields_.field[cell.field];
    GroupKey key{x.kind, x.victim, x.writer, x.victim_id, -1, f.buffer == FieldBuffer::scale_cache};
    key.field = cell.field;
    const auto exp = static_cast<uint32_t>(x.expected), act = static_cast<uint32_t>(x.found);
    const bool unwritten = x.found == x.pre_run;
    Group& g = group(key, [&](Group& ng) {
      ng.example = format_cell_name(f, cell) + ": expected " + field_value(f, exp) + " (" + format_meaning(f, cell) + "), found " +
                   (unwritten ? field_value(f, act) + ", its pre-run value: not written" : field_value(f, act));
      ng.first_clause = format_cell_short(f, cell) + (unwritten ? " was not written" : " holds " + field_value(f, act)) + ", expected " +
                        field_value(f, exp);
      ng.group_dims = f.group;
    });
    if (x.scale_id >= 0) scale_groups_.push_back(static_cast<size_t>(&g - groups_.data()));  // scale_id == its index here
    if (key.kind == FindingKind::wrong_value) g.add_distance(exp, act, f.dtype);
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
  }

  // A byte of a format's buffer that no field holds (a gap).
  void format_gap(const ImageCell& x) {
    const bool scale = x.section == Section::scale_cache;
    Group& g = group(GroupKey{FindingKind::stray_write, Victim::gap, Writer::unknown, -1, -1, scale}, [&](Group& ng) {
      ng.example = std::string(scale ? "scale cache" : "cache") + " byte " + num(x.elem) + " (no field holds it): expected " +
                   hex_bits(x.expected, 1) + " (the gap canary), found " + hex_bits(x.found, 1);
    });
    g.elem.add(x.elem);
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

  // The cache elements outside a windowed arena's windows whose bits the target did not return.
  void outside_rest(const ImageCell& x) {
    Group& g = group(GroupKey{FindingKind::stray_write, Victim::many, Writer::unknown, -1, -1}, [&](Group& ng) {
      ng.example = "cache elements outside the host's windows (free blocks or stride gaps) whose bits the target did not return: " +
                   num(x.count) + " of " + num(outside_total_) + " differing elements, in " + num(outside_runs_) + " runs";
    });
    g.cells += x.count - 1;
    if (x.elem >= 0) {
      g.elem.add(x.elem);
      g.elem.add(x.last);
    }
  }

  // One differing element of a classic KV cache.
  void cache_elem(const ImageCell& x) {
    const CacheCell& cell = x.cell;
    const int size = x.size;
    const auto exp = static_cast<uint32_t>(x.expected), act = static_cast<uint32_t>(x.found);
    const DecodedValue& d = x.value;
    const GroupKey key{x.kind, x.victim, x.writer, x.victim_id, x.writer_id};
    Group& g = group(key, [&](Group& ng) {
      const std::string where = std::string(c_.field_name(cell.is_value)) + " head " + num(cell.head) + " dim " + num(cell.dim);
      if (quantized_) {
        // Stored codes with their decoded values, and the distance for expected writes.
        const std::string found = key.kind == FindingKind::missing_write ? "its pre-run value" : value_text(act, c_.cache_dtype);
        ng.example = cell_name(cell, x.elem) + ": expected " + hex_bits(exp, size) + " (" + meaning_expected(cell, false, x.outside) + ", " +
                     value_text(exp, c_.cache_dtype) + "), found " + hex_bits(act, size) + " (" + found + ")";
        ng.first_clause = where + " holds " + hex_bits(act, size) + " (" + value_text(act, c_.cache_dtype) + ") instead of " + hex_bits(exp, size) +
                          " (" + value_text(exp, c_.cache_dtype) + ")";
      } else {
        ng.example = cell_name(cell, x.elem) + ": expected " + hex_bits(exp, size) + " (" + meaning_expected(cell, false, x.outside) + "), found " +
                     hex_bits(act, size) + " (" + meaning_found(key, d, x.tag) + ")";
        ng.first_clause = where + " holds " + (key.writer == Writer::request ? value_name(d) : meaning_found(key, d, x.tag));
      }
    });
    if (key.kind == FindingKind::wrong_value) g.add_distance(exp, act, c_.cache_dtype);
    g.elem.add(x.elem);
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

  std::string meaning_expected(const CacheCell& cell, bool scale, bool outside = false) const {
    if (outside && !scale) return "the free-block canary, the fill outside the windows";
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
      groups_.back().in_cache = in_cache_;
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
    f.in_cache = g.in_cache;
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
  const Arena& expected_;
  const Arena& actual_;
  const CacheLocator loc_;        // the KV cache buffer: shared blocks' owners
  const CacheFields fields_;      // c.fields()
  const bool quantized_;          // 1-byte cache dtype: classification by location only
  const int64_t scale_count_;     // static scales per tensor
  std::vector<Group> groups_;
  std::unordered_map<GroupKey, size_t, GroupKeyHash> index_of_;
  Group* last_ = nullptr;         // group of the previous cell (cells of one group are usually adjacent)
  bool in_cache_ = false;         // the cell being filed is a cache or scale cache element
  std::vector<size_t> scale_groups_;  // [scale_id] the group of a new token's differing scale (ImageCell::scale_id)

 public:
  int64_t outside_total_ = 0, outside_runs_ = 0;  // a windowed run: the target's count of differing elements and runs
};

}  // namespace

Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual, const TolerancePolicy& policy,
                       const OutsideDiff* outside) {
  Grouper groups(c, expected, actual);
  if (outside != nullptr) {
    groups.outside_total_ = outside->differing_elems;
    groups.outside_runs_ = outside->runs_total;
  }
  const int64_t differing = classify_image(c, initial, expected, actual, policy, outside, [&](const ImageCell& x) { groups.add(x); });
  if (differing == 0) return Verdict{};
  return groups.finish(differing);
}

}  // namespace kvf
