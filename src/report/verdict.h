// verdict.h — the verdict of one run: every differing element, grouped into findings with words.
//
// compare_arenas() classifies the whole image (arena/classify.h: where each differing element is,
// what it holds, which kind of finding it is) and groups the cells by (kind, victim, writer) into
// Findings (arena/finding.h) with one sentence each. The report's cell map (cell_map.h) is built
// from the same classified cells.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arena/arena.h"
#include "arena/classify.h"
#include "arena/finding.h"
#include "arena/outside_diff.h"
#include "case/case.h"

namespace kvf {

// The three arenas share one layout and one set of materialised ranges. For windowed arenas
// (windows.h) `outside` is what the target found in the cache outside the windows (required, and
// checked); the verdict then covers the materialised bytes and those differences.
Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual,
                       const TolerancePolicy& policy = {}, const OutsideDiff* outside = nullptr);

}  // namespace kvf
