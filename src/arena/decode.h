// decode.h — which input element(s) could have produced bits found in the cache.
//
// A cache value is decoded by value alone: every element of the key and value views, converted as
// the contract stores it (golden::convert_bits, input dtype -> cache dtype), is indexed by those
// bits, and a value found in the cache is looked up there. Only float caches are decodable: in a
// 1-byte (quantised) cache every code matches many inputs, so a match is no evidence (classify.cpp).
// The classifier (classify.cpp) decodes through ValueDecoder once for the verdict and the cell map
// alike, so a finding's writer and the map's writer of the same cell are the same.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "case/case.h"
#include "arena.h"
#include "values/payload.h"

namespace kvf {

// Whose data a cache value is, judged by its bits.
enum class ValueSource : uint8_t {
  request,         // a row with a valid slot: the new token `request`, `token` of DecodedValue
  padding_row,     // only rows with slot < 0 hold it
  invalid_row,     // only rows with slot >= capacity hold it
  graph_row,       // only rows >= T (CUDA-graph padding) hold it
  unwritten_rows,  // only rows that must not be written hold it, of several of the three kinds above
  unknown,         // no input element holds it (or the row's slot lies in a free block: an invalid case)
  ambiguous,       // several input elements hold it and the preference rules below pick none
};

// The input element a cache value came from.
struct DecodedValue {
  ValueSource source = ValueSource::unknown;
  int64_t row = -1;                  // input row; -1 if none or several (unwritten kinds: their rows differ)
  bool is_value = false;             // request: the element is in the value view (else the key view)
  int64_t head = -1, dim = -1;       // request: its head and dim
  int64_t request = -1, token = -1;  // request: the request and logical token whose new value it is
  int64_t common_request = -1;       // ambiguous: the request every written candidate row belongs to,
                                     // if they all belong to one (else -1)
};

// Index of every key/value input element by the bits the cache would store. Built lazily on the
// first decode() (O(rows * heads * head_dim) memory). Holds references to `c`, `initial` (the
// pre-run arena, whose input section holds the payload) and `loc` (the case's KV cache locator),
// which must outlive it. Float caches only (see the file comment).
class ValueDecoder {
 public:
  ValueDecoder(const Case& c, const Arena& initial, const CacheLocator& loc) : c_(c), initial_(initial), loc_(loc) {}

  // The writer of `bits` found in cache cell `cell`:
  //   - no candidate: unknown;
  //   - only candidates of rows that must not be written (slot < 0, slot >= capacity, row >= T):
  //     their common kind (else unwritten_rows) and their common row (else -1);
  //   - otherwise, for a context cell with several candidates, those of the request owning the
  //     cell if there are any (a value the own request also holds is no evidence of another
  //     request's write, whichever head or dim holds it): of them, those of the cell's own tensor,
  //     head and dim, then of its head and dim, then any; the only one of the first non-empty set,
  //     else ambiguous with common_request that request;
  //   - otherwise, unless `cell` is a stride gap, the candidates of the cell's own tensor, head and
  //     dim, then (if none) those of its head and dim in either tensor; within the first non-empty
  //     set, the row decoded by the previous call that found one (rows are written contiguously),
  //     else its only candidate, else ambiguous;
  //   - otherwise the only candidate, else ambiguous.
  // A single candidate of a request row yields request, except unknown when its slot's block is free.
  // An ambiguous result names the one request all its written candidates belong to, if there is one
  // (common_request): several elements hold the value, but only that request could have written it.
  DecodedValue decode(uint32_t bits, const CacheCell& cell);

 private:
  using Entry = std::pair<uint32_t, uint64_t>;  // (bits as the cache stores them, candidate id)
  using It = std::vector<Entry>::const_iterator;
  struct Unwritten {
    bool any_written = false;                    // some candidate is a row with a valid slot
    ValueSource kind = ValueSource::unknown;     // else: the kind of all candidates
    int64_t row = -1;                            // and their row, if they all share one
  };

  void build();
  uint64_t id(bool is_value, int64_t row, int64_t head, int64_t dim) const;
  ValueSource row_kind(int64_t row) const;
  DecodedValue use(uint64_t candidate);
  DecodedValue ambiguous(It first, It last) const;
  bool pick(It lo, It end, uint64_t id_lo, uint64_t id_hi, DecodedValue& out);
  bool owned(It lo, It end, int64_t owner, uint64_t own, uint64_t both, DecodedValue& out);
  int64_t request_of(int64_t row) const;
  const Unwritten& unwritten(uint32_t bits, It lo, It end);

  const Case& c_;
  const Arena& initial_;
  const CacheLocator& loc_;
  bool built_ = false;
  std::vector<Entry> entries_;                         // [2 * rows * heads * head_dim] sorted
  std::unordered_map<uint32_t, Unwritten> unwritten_;  // per looked-up bits
  int64_t hint_row_ = -1;                              // row of the previous decode, -1 if none
};

// How a canary is named in sentences: "the stride-gap canary", "the guard pattern".
const char* canary_name(golden::Canary t);

// Bits as hex with 2 * bytes digits: hex_bits(0x7e00, 2) == "0x7e00".
std::string hex_bits(uint64_t bits, int bytes);

}  // namespace kvf
