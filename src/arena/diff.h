// diff.h — whole-arena bit-exact comparison and classification of every difference.
//
// compare_arenas() walks the entire image: guard bands, input sections, the cache buffer and the
// counter (of a windowed arena: every materialised byte, plus the target's report of the cache
// outside the windows, windows.h). Each differing element is classified (finding.h) by where it is (which section and cache
// cell) and what it holds (decoded against the case's payload: which row/head/dim of which request
// could have produced it, a padding row, an input guard, a canary), then grouped by
// (kind, victim, writer) into Findings with one sentence each.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "case/case.h"
#include "arena.h"
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
};

// Parses "exact", "ulp:N" (N >= 0) or "written-any-value", optionally followed by per-format
// rules ",FORMAT=RULE" with a dtype name and one of those three ("exact,fp8_e4m3=written-any-value");
// std::nullopt otherwise. to_string() prints the same form.
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

// The three arenas share one layout and one set of materialised ranges. For windowed arenas
// (windows.h) `outside` is what the target found in the cache outside the windows (required, and
// checked); the verdict then covers the materialised bytes and those differences.
Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual,
                       const TolerancePolicy& policy = {}, const OutsideDiff* outside = nullptr);

}  // namespace kvf
