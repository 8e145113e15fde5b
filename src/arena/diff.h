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
#include "finding.h"

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

Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual,
                       const TolerancePolicy& policy = {});

}  // namespace kvf
