// diff.h — whole-arena bit-exact comparison and classification of every difference.
//
// compare_arenas() walks the entire image: guard bands, input sections, the cache buffer and the
// counter. Each differing element is classified (finding.h) by where it is (which section and cache
// cell) and what it holds (decoded against the case's payload: which row/head/dim of which request
// could have produced it, a padding row, an input guard, a canary), then grouped by
// (kind, victim, writer) into Findings with one sentence each.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "../case/case.h"
#include "arena.h"
#include "decode.h"
#include "finding.h"
#include "golden/payload.h"

namespace kvf {

// How the values of expected writes are judged (locations are always checked exactly). The
// project's own kernels are held to `exact`; the others exist for external kernels that follow
// another rounding or scale convention (README "Quantisation").
struct TolerancePolicy {
  enum class Kind : uint8_t {
    exact,              // bit for bit
    ulp,                // within `ulps` units in the last place of the stored format
    written_any_value,  // any value other than the cell's pre-run value
  };
  Kind kind = Kind::exact;
  int64_t ulps = 0;
};

// Parses "exact", "ulp:N" (N >= 0) or "written-any-value"; std::nullopt otherwise.
std::optional<TolerancePolicy> parse_tolerance(std::string_view text);
std::string to_string(const TolerancePolicy& p);

// How the classifier files one differing element of the KV cache buffer (the rules of diff.cpp's
// file comment, before any tolerance): the finding kind, what it rests on, and whose value the
// element holds. compare_arenas() groups these; the cell map (report/cell_map.h) draws them.
struct CacheDiff {
  enum class Basis : uint8_t {
    location,     // 1-byte cache: judged by where the cell is; `value` and `tag` are unused
    over_read,    // the found bits are all ones, the guard pattern or the input-gap canary (`tag`)
    not_written,  // an expected write still holding its pre-run value
    value,        // decoded (`value`); a padding/invalid/graph-row canary no row converts to counts as that row kind
  };
  FindingKind kind = FindingKind::wrong_value;
  Basis basis = Basis::value;
  DecodedValue value;                 // basis value: whose value the element holds
  std::optional<golden::Canary> tag;  // the canary the found bits are, if any (float caches only)
};

// Classifies cache buffer element `cell` (c's KV cache), which held `pre_run` before the run and
// `found` after it, differing from the expected bits. `values` is the case's decoder; it is
// consulted only for basis value.
CacheDiff classify_cache_diff(const Case& c, const CacheCell& cell, uint32_t found, uint32_t pre_run, ValueDecoder& values);

Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual,
                       const TolerancePolicy& policy = {});

}  // namespace kvf
