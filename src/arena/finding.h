// finding.h — what a verification found, as values (rendering lives in src/report/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvf {

enum class FindingKind : uint8_t {
  oob_write,              // a guard band changed
  cross_request_write,    // a cell of another request's earlier context (or of a shared prefix block) changed
  stray_write,            // a free block, stride gap, hole or block tail changed
  padding_leak,           // a padding/invalid/graph row's data landed somewhere
  wrong_value,            // an expected write landed with the wrong bits
  missing_write,          // an expected write did not happen
  scale_mismatch,         // a scale cache cell is wrong (quantised modes)
  input_modified,         // key/value/slot_mapping/input buffer changed
  oob_read_suspected,     // an input guard or gap pattern appeared in the cache
  invalid_slot_miscount,  // the invalid-slot counter differs from the number of slots >= capacity
  slot_mapping_mismatch,  // a context-parallel slot-mapping producer's output differs from the formula
  crash,                  // the run died (sticky CUDA error, signal)
  timeout,                // the run did not finish in time
  launch_error,           // the launch was refused
};

std::string_view to_string(FindingKind k);

// The one severity order of the finding kinds, most severe 0: the order of a verdict's findings, of
// the kinds in a report's cell map and of "worst" everywhere. Corruption outside the case's memory,
// then of other requests, then stray writes, then wrong and missing values of the case's own cells.
// A slot-mapping producer's wrong output comes before all of them: it is the cause of whatever its
// rank's append then wrote, and the finding that names it is the one to read first.
int severity(FindingKind k);

// One group of differing cells sharing (kind, victim, writer).
struct Finding {
  FindingKind kind = FindingKind::wrong_value;
  int64_t victim_request = -1;  // request whose cells were hit, -1 if none (a shared block: its first owner)
  std::vector<int64_t> victim_requests;  // every request whose cells were hit: several for a shared prefix
                                         // block, else victim_request alone; empty if none
  int64_t writer_request = -1;  // request whose data landed there, -1 if unknown or not a request
  std::string victim;           // "request 7", "free block 12", "guard band after the cache", ...
  std::string writer;           // "request 3 (tokens 16..19)", "padding row 5", "unknown writer"
  std::string victim_class;     // what kind of cell was hit, without ids: "context", "guard_band", "scale_cache:new_token"
  std::string writer_class;     // whose data, without ids: "request", "padding_row", "kernel", ...
  std::string where;            // "K block 12 slots 0..3, heads 0..7, dims 0..127"
  int64_t cells = 0;            // differing elements in the group
  std::string sentence;         // the whole finding as one sentence
  std::string example;          // first cell: location, expected bits, actual bits, decoded meaning
  bool in_cache = false;        // its cells are elements of the cache or scale cache buffer (the cell map draws them)
};

struct Verdict {
  std::vector<Finding> findings;  // most severe kind first
  int64_t differing_cells = 0;
  bool pass() const { return findings.empty(); }
};

}  // namespace kvf
