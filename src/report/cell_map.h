// cell_map.h — the corruption map of one case, and the report value built on it.
//
// A Verdict (arena/finding.h) says in sentences who destroyed whose data. The map says it per cell:
// the role and owner of every (block, slot) of the cache, and for every (block, slot) that differs
// after the run, which tensors, heads and dims differ, what they should hold and whose value they
// hold instead. It is a fold over the classified cells of the three arenas of one run (initial,
// expected, actual; arena/classify.h), the cells the verdict (verdict.h) groups, so the map and the
// verdict file every cell alike and a reader can see each finding on the map.
//
// html.h, markdown.h and case_report_json() render a CaseReport; campaign/report_case.h builds one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arena/arena.h"
#include "arena/decode.h"  // hex_bits(), which the renderers share too
#include "arena/finding.h"
#include "arena/outside_diff.h"
#include "case/case.h"

namespace kvf {

// Role of one (block, slot) of the cache: the same for K and V and every head and dim.
enum class SlotRole : uint8_t {
  free_block,  // the block belongs to no request
  context,     // an earlier context token of the block's request
  new_token,   // a token this call appends (an expected write)
  tail,        // past the request's last token: nobody may write it
  hole,        // an unwritten position between the request's new tokens (case/placement.h): nobody may write it
  shared,      // context of a prefix block several requests share: nobody may write it
  sink,        // slot 0 in the sink padding mode: padding rows may write it; never judged
};

// One differing cache-buffer element, decoded.
struct CellDecode {
  int64_t elem = -1;        // index into the cache buffer
  CacheCell cell;           // what the element is and who owns it (role gap: a stride gap)
  std::string field = "K";  // what the case calls the cell's field: "K", "V" or "latent" (Case::field_name)
  FindingKind kind = FindingKind::wrong_value;  // how the classifier files it
  bool scale_cache = false; // the element is in the scale cache buffer (else the cache buffer)
  int bytes = 2;            // element size
  uint32_t expected = 0;    // bits the golden model expects
  uint32_t found = 0;       // bits the kernel left
  std::string expected_meaning;  // "request 7's context token 195"
  std::string found_meaning;     // "request 3 token 16 head 0 dim 5's K value"
  std::string victim;       // short label of whose cell it is: "request 7", "free blocks", "stride gaps"
  std::string writer;       // short label of whose value it holds: "request 3", "padding rows", "not written"
  int64_t writer_request = -1;  // request whose value it holds, -1 if none
};

// The differing elements of one (block, slot), all tensors, heads and dims together; or, with
// pos == -1, the differing stride-gap elements inside block `block`'s span (block -1: outside
// every block's span).
struct SlotDamage {
  int64_t block = -1;
  int64_t pos = -1;
  int64_t cells = 0;          // differing elements
  bool k = false, v = false;  // tensors hit (neither for stride gaps); k: K or an MLA latent entry
  std::string key_field = "K";  // what the case calls its first field: "K" or "latent"
  int64_t head_lo = 0, head_hi = -1, dim_lo = 0, dim_hi = -1;  // ranges hit (empty for gaps)
  FindingKind worst = FindingKind::wrong_value;  // most severe kind among the cells
  CellDecode first;           // the first differing element, decoded
  std::vector<std::string> writers;  // distinct writer labels, first kMaxWritersPerSlot of them
  bool more_writers = false;
};

// One row of the victim x writer matrix.
struct MatrixRow {
  std::string victim;
  std::vector<int64_t> cells;  // [writers.size()] differing elements by writer
};

struct CellMap {
  int64_t num_blocks = 0, block_size = 0, num_heads = 0, head_dim = 0;
  std::vector<int64_t> block_request;   // [num_blocks] owning request, -1 free
  std::vector<int64_t> block_logical;   // [num_blocks] index in the owner's block table, -1 free
  std::map<int64_t, std::vector<int64_t>> shared_blocks;  // shared block -> every request holding it (owner: the first)
  std::vector<SlotRole> roles;          // [num_blocks * block_size] role of (block, pos), block-major
  std::vector<int64_t> block_cells;     // [num_blocks] differing elements per block (slots and gaps)
  std::vector<SlotDamage> damage;       // differing (block, slot)s and gap groups, by (block, pos)
  int64_t differing_cache_cells = 0;    // every differing element of the cache buffer
  int64_t guard_before = 0;             // differing bytes of the guard band before the cache buffer
  int64_t guard_after = 0;              // differing bytes of the guard band after it
  std::vector<std::string> writers;     // matrix columns
  std::vector<MatrixRow> matrix;        // victims, with cells per writer (cache and other findings)

  int64_t shard_blocks = 0;             // a sharded case (case/context_parallel.h): blocks per rank; 0 = none

  int64_t capacity() const { return num_blocks * block_size; }
  // "12", or in a sharded case the block as its rank's table names it: "3 of rank 1".
  std::string block_name(int64_t block) const {
    if (shard_blocks <= 0) return std::to_string(block);
    return std::to_string(block % shard_blocks) + " of rank " + std::to_string(block / shard_blocks);
  }
  SlotRole role(int64_t block, int64_t pos) const { return roles[static_cast<size_t>(block * block_size + pos)]; }
};

inline constexpr size_t kMaxWritersPerSlot = 4;

// What a finding's `cells` count, in words: "1 cell", "2 bytes" (a guard band is compared byte by
// byte), "3 elements" (an input), "1 entry" (slot-mapping output), "" for a run that did not finish.
std::string finding_amount(const Finding& f);

// A verdict's differing elements, each counted once and in its own unit: "3 differing cells",
// "1 differing cell, 2 overwritten guard-band bytes", "4 differing cells, 1 changed input element".
std::string differing_total(const Verdict& v);

// The case's serving conventions other than the default contract, in words ("context-parallel: 2
// ranks, interleave 3, input positions; ..."), or "" for none.
std::string serving_text(const Case& c);

// Builds the map of case `c` from its three arenas (same layout; see campaign/check.h for how they
// are made; a windowed run: with the target's report of the cache outside the windows). Values are
// judged exactly. `verdict` is compare_arenas() of the same arenas: its findings outside the cache
// and scale cache buffers (guard bands, inputs, counter, static scales) become matrix rows as they are.
CellMap build_cell_map(const Case& c, const Verdict& verdict, const Arena& initial, const Arena& expected,
                       const Arena& actual, const OutsideDiff* outside = nullptr);

// Everything a report shows about one case on one target.
struct CaseReport {
  std::filesystem::path case_file;  // as the user gave it
  Case kase;                        // the case as read
  std::string target;
  Verdict verdict;                  // findings of this run
  bool ran = true;                  // false: crash, timeout or launch error; the map shows the image as left
  std::string skipped;              // non-empty: the kernel skipped the case (KVFZ_APPEND_SKIP), why; nothing ran
  CellMap map;
  std::string replay_command;       // Invocation::command("replay", ...)
  std::string report_command;       // Invocation::command("report", ...)
  std::string locate_command;       // Invocation::locate(): where a crash happened ("" if none)
};

// Where the report of a saved case goes: <dir>/<stem>.report/ (replay does not descend into
// directories named *.report).
std::filesystem::path report_dir_for(const std::filesystem::path& case_file);

// Short names for reports.
std::string_view to_string(SlotRole r);

// The report as JSON (schema "kvfuzz-report", version 1). Lists at most `max_damage` damaged slots.
nlohmann::json case_report_json(const CaseReport& r, size_t max_damage = 2000);

// Plain-text pieces every renderer shares (and hex_bits(), arena/decode.h: "0x7e00").
std::string describe_cell(const CellDecode& d);           // "K block 3 slot 1 head 0 dim 2 (cache element 98)"
std::string describe_damage(const SlotDamage& s);         // multi-line tooltip text of one damaged slot
std::string case_shape_line(const Case& c);               // "paged_nhd, f16 -> bf16, 8 heads x 128, ..."

}  // namespace kvf
