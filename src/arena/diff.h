// diff.h — whole-arena bit-exact comparison and classification of every difference.
//
// compare_arenas() walks the entire image: guard bands, input sections, the cache buffer and the
// counter. Each differing element is classified (finding.h) by where it is (which section and cache
// cell) and what it holds (decoded against the case's payload: which row/head/dim of which request
// could have produced it, a padding row, an input guard, a canary), then grouped by
// (kind, victim, writer) into Findings with one sentence each.
#pragma once

#include "../case/case.h"
#include "arena.h"
#include "finding.h"

namespace kvf {

Verdict compare_arenas(const Case& c, const Arena& initial, const Arena& expected, const Arena& actual);

}  // namespace kvf
