// classify.h — the one pass over three images: every differing element, located and classified.
//
// classify_image() walks the whole image of one run (initial, expected, actual; the same layout):
// guard bands, input sections, the cache buffer (a quantised format's fields, then the bytes no
// field holds), the scale cache and the counter; of a windowed arena every materialised byte, plus
// the target's report of the cache outside the windows (windows.h). Each differing element becomes
// one ImageCell: where it is, its bits, and its classification as integer keys (the finding kind,
// whose cell was hit, whose value it holds). Nothing here is English: the verdict
// (report/verdict.h) and the report's cell map (report/cell_map.h) are folds over the same cells,
// so they cannot disagree about a cell.
//
// The rules, for a differing element of the KV cache, in order:
//   1. it holds the input-gap canary or the guard pattern       -> oob_read_suspected
//   2. it is an expected write still holding its pre-run value  -> missing_write
//   3. its value is that of padding/invalid/graph rows only     -> padding_leak
//   4. by location: new-token cell -> wrong_value; another request's context (a writer decoded as
//      another request, an ambiguous value whose candidates are all another request's, or an
//      unknown/ambiguous writer while some request other than the cell's own has new tokens) or a
//      shared prefix block (whoever wrote) -> cross_request_write; own context (also an ambiguous
//      value whose candidates are all the own request's, and an unknown/ambiguous writer when no
//      other request has new tokens: nobody else could have written), free block, hole, block
//      tail, stride gap -> stray_write (case/placement.h: holes and shared blocks).
// Writers are decoded by value (ValueDecoder, decode.h): the converted bits of every input element
// are indexed once, lazily, when the first cache difference needs it.
//
// Quantised caches (fp8_e4m3, fp8_e5m2, int8, and every quantised format's fields) are classified by
// location only: with 256 codes per element, a value matches many input elements (and every canary
// is also a value a correct quantisation can produce, see payload.cpp), so a match would be
// coincidence, not evidence. A differing new-token cell is missing_write if it still holds its
// pre-run value, else wrong_value; a context cell is cross_request_write (unknown writer) when a
// request other than its own has new tokens or it is in a shared block, else stray_write; free
// blocks, block tails and stride gaps are stray_write.
// The static scales section is an input: any change is input_modified. The scale cache (per
// token-head) is classified like a quantised cache, except that a differing new-token cell is
// scale_mismatch (also when it was not written at all). A quantised format's scale and zero fields
// are compared before its codes: a new token's scale (or zero point) that differs is scale_mismatch,
// and the differing codes of the group it covers follow from it (ImageCell::follows_scale).
// Tolerance (TolerancePolicy) applies to expected-write cells only (KV cache and scale cache
// new-token cells) whose value differs: ulp:N judges the value alone and accepts a distance of at
// most N in the stored format (golden::ulp_distance; NaN against a number is never accepted), even
// when that value equals the cell's pre-run value (in 1-byte formats the pre-run pattern is a real
// value, and a 1-ulp-off kernel can legitimately store it); written-any-value accepts any value
// except the pre-run one. A per-format rule (TolerancePolicy::per_format) replaces the policy for
// cells stored in that format: KV cache cells in the cache dtype (a format's field: its dtype),
// scale cache cells as f32. Every other location is exact under every policy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arena.h"
#include "case/case.h"
#include "decode.h"
#include "finding.h"
#include "outside_diff.h"
#include "values/payload.h"

namespace kvf {

// How the values of expected writes are judged (locations are always checked exactly). The
// project's own kernels are held to `exact`; the others exist for external kernels that follow
// another rounding or scale convention (docs/contract.md "Quantisation"), and for targets that cannot
// produce some stored format faithfully (a target's default, TargetInfo::default_tolerance).
struct TolerancePolicy {
  enum class Kind : uint8_t {
    exact,              // bit for bit
    ulp,                // within `ulps` units in the last place of the stored format
    written_any_value,  // any value other than the cell's pre-run value
  };
  Kind kind = Kind::exact;
  int64_t ulps = 0;
  // Values stored as `format` are judged by (kind, ulps) of their entry instead: the fp8 values of
  // "exact,fp8_e4m3=written-any-value". KV cache cells are stored in the cache dtype, scale cache
  // cells as f32.
  struct ForFormat {
    DType format = DType::f16;
    Kind kind = Kind::exact;
    int64_t ulps = 0;
  };
  std::vector<ForFormat> per_format;

  // The rule for values stored as `format`: its per_format entry, else (kind, ulps); per_format empty.
  TolerancePolicy rule_for(DType format) const;
  // True when the rule for `format` accepts `found` in an expected-write cell that should hold
  // `expected` and held `pre_run` before the run (found != expected).
  bool accepts(uint64_t expected, uint64_t found, uint64_t pre_run, DType format) const;
};

// Parses "exact", "ulp:N" (N >= 0) or "written-any-value", optionally followed by per-format
// rules ",FORMAT=RULE" with a dtype name and one of those three ("exact,fp8_e4m3=written-any-value");
// std::nullopt otherwise. to_string() prints the same form.
std::optional<TolerancePolicy> parse_tolerance(std::string_view text);
std::string to_string(const TolerancePolicy& p);

// The sections of the image, in image order (arena.h, ArenaLayout).
enum class Section : uint8_t { input, slots, scales, cache, scale_cache, counter, guard };

// Whose element was hit.
enum class Victim : uint8_t {
  guard_band,    // id: band (2 * section + 1 if after the section, section in image order)
  key_view,      // input buffer cell of the key view
  value_view,    // input buffer cell of the value view
  input_other,   // input buffer cell outside both views
  slot_mapping,  // a slot_mapping entry (slot_mapping_mismatch: id is the rank)
  static_scales, // an element of the static scales section
  counter,       // the invalid-slot counter
  context,       // id: request owning the earlier-context cell
  new_token,     // id: request owning the expected-write cell
  tail,          // id: request owning the block whose unused tail was hit
  hole,          // id: request whose unwritten position below its written extent was hit (placement.h)
  shared_block,  // id: a prefix block several requests share (every write into it corrupts them all)
  free_block,    // id: the free block
  gap,           // a cache buffer element no (tensor, block, pos, head, dim) addresses
  many,          // the verdict's overflow bucket; also cache cells outside the windows not returned
};

// Whose value the element holds.
enum class Writer : uint8_t {
  kernel,          // not attributable by value (guard bands, inputs, counter, missing writes)
  request,         // id: request whose new token's value landed there
  padding_row,     // id: the row (slot < 0), -1 if several
  invalid_row,     // id: the row (slot >= capacity), -1 if several
  graph_row,       // id: the row (row >= T), -1 if several
  unwritten_rows,  // rows of several of the three kinds above
  unknown,         // the value matches no input element, or is judged by location only
  ambiguous,       // the value matches several input elements
  input_gap,       // the input-gap canary (oob_read_suspected)
  guard_pattern,   // the guard pattern (oob_read_suspected)
  many,            // the verdict's overflow bucket
};

// Names of the classes, for finding signatures (campaign/signature.h): stable, never renamed.
const char* victim_class_name(Victim v);
const char* writer_class_name(Writer w);

// What a KV cache element's classification rests on.
enum class Basis : uint8_t {
  location,     // judged by where it is (quantised caches and fields, scale caches, gaps of formats)
  over_read,    // the found bits are all ones, the guard pattern or the input-gap canary (`tag`)
  not_written,  // an expected write still holding its pre-run value
  value,        // decoded (`value`); a padding/invalid/graph-row canary no row converts to counts as that row kind
};

// One differing element of the image.
struct ImageCell {
  Section section = Section::cache;
  // Its index: in its section, in the section's element size (input dtype, slot dtype, 4-byte
  // scales, cache dtype; a format's field: the element in the field's dtype, or the byte of a gap;
  // the scale cache: 4-byte elements, or a format's field element); guard bytes: the image offset.
  int64_t elem = -1;
  int size = 1;  // bytes of the element (a 4-bit field's nibble: 1)
  uint64_t expected = 0, found = 0, pre_run = 0;  // its bits (every section but the counter)

  FindingKind kind = FindingKind::wrong_value;
  Victim victim = Victim::many;
  int64_t victim_id = -1;
  Writer writer = Writer::kernel;
  int64_t writer_id = -1;  // request (Writer::request), else the row, -1 if several

  // Cache and scale cache elements.
  CacheCell cell;                     // where it is (field, elem: a format's field element)
  Basis basis = Basis::location;
  DecodedValue value;                 // basis value: whose value it holds
  std::optional<golden::Canary> tag;  // the canary the found bits are, if any (float caches only)
  bool tolerated = false;             // an expected write the policy accepts: counted, not a finding
  int follows_scale = -1;             // a code whose group's scale differs: that scale's `scale_id`
  int scale_id = -1;                  // a new token's differing scale or zero point: its number
  bool outside = false;               // a cache element outside a windowed arena's windows

  // Other sections.
  int64_t row = -1, head = -1, dim = -1;  // input: the view cell; slot_mapping_mismatch: the row
  int64_t offset = 0;                     // guard: bytes from the section edge (>= 0 past the end, < 0 before it)
  int64_t count = 1;                      // elements this cell stands for (the rest outside the windows: many)
  int64_t last = -1;                      // count > 1: the last of them, if known
};

// The three arenas share one layout and one set of materialised ranges. For windowed arenas
// (windows.h) `outside` is what the target found in the cache outside the windows (required, and
// checked). Calls visit() for every differing element in image order (a quantised format's scale
// fields before its codes), then returns how many elements differ (tolerated ones and the
// unconstrained sink slot included). Throws std::invalid_argument on mismatched arenas.
int64_t classify_image(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual,
                       const TolerancePolicy& policy, const OutsideDiff* outside,
                       const std::function<void(const ImageCell&)>& visit);

// Whether nothing differs (a memcmp of each materialised range, and the target's outside report).
bool images_equal(const Arena& expected, const Arena& actual, const OutsideDiff* outside);

}  // namespace kvf
